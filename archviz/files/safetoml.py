"""TOML from untrusted files: the one TOML reader of every TOML file archviz reads (the project file, names,
annotations, checkpoint rules, an inputs file (`@file.toml`), hardware devices).

A file is read as `safeio` reads every input (a regular file only, at most a stated number of bytes: a FIFO, a
device or a huge file is refused before it is read), decoded as UTF-8 and parsed by the standard library's `tomllib`
(the `tomli` package on Python 3.10, where the standard library has none). Every fault is one line, the caller's
:class:`~archviz.errors.ArchvizError` subclass naming the file: not UTF-8, not valid TOML (the line and column
tomllib names), nested too deeply for its recursive parser, an integer beyond Python's 4,300 digits; reading never
runs code.

Pure library code: nothing here prints.
"""

from __future__ import annotations

import os
from typing import Any

from archviz.errors import ArchvizError

from .safeio import MiB, read_regular

try:
    import tomllib
except ImportError:  # Python 3.10: the same parser, published as tomli
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ImportError:
        tomllib = None  # type: ignore[assignment]

__all__ = ["MAX_TOML_BYTES", "load_file", "loads"]

#: Largest TOML file read where the caller names no smaller limit (the files archviz reads are a few KB).
MAX_TOML_BYTES = 16 * MiB


def loads(text: str, *, where: str, error: type[ArchvizError] = ArchvizError, hint: str | None = None
          ) -> dict[str, Any]:
    """`tomllib.loads(text)`; any fault is `error("{where}: not valid TOML (...)", hint=hint)`."""
    hint = hint or "fix the line it names"
    if tomllib is None:
        raise error(f"{where}: reading TOML needs Python 3.11 or the tomli package",
                    hint="pip install tomli, or run archviz on Python 3.11+")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise error(f"{where}: not valid TOML (nested too deeply)", hint=hint) from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{where}: not valid TOML ({e})", hint=hint) from None
    except ValueError as e:  # an integer beyond Python's 4300-digit limit
        raise error(f"{where}: not valid TOML ({str(e).split(';')[0]})", hint=hint) from None


def load_file(path: str | os.PathLike[str], *, what: str, max_bytes: int = MAX_TOML_BYTES, where: str | None = None,
              error: type[ArchvizError] = ArchvizError, hint: str | None = None) -> dict[str, Any]:
    """A TOML file: a regular file of at most `max_bytes` (`what` names it in a refusal: "rules", "names"),
    UTF-8, parsed by :func:`loads`; `where` names it in an error line (default: the path)."""
    where = where or os.fspath(path)
    raw = read_regular(path, max_bytes=max_bytes, what=what, error=error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not UTF-8 text (byte {e.start})", hint="save it as UTF-8") from None
    return loads(text, where=where, error=error, hint=hint)

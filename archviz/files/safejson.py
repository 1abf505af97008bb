"""JSON from untrusted files, parsed with bounds: nesting depth, integer size, lone surrogates, NaN.

``json.loads`` accepts what a strict reader (serde_json, which the safetensors library uses) refuses, and what
later code trips over: objects nested 10,000 deep (a ``RecursionError`` in whatever walks them next), integers of
4,000 digits (each arithmetic step on them is slow; 4,301 digits raise a ``ValueError`` that is no
``JSONDecodeError``), lone UTF-16 surrogates (``"\\ud800"``: a ``str`` that cannot be encoded, printed or written
back), and the non-JSON tokens ``NaN`` / ``Infinity``. :func:`loads` parses like ``json.loads`` and then refuses
those, with one line naming the file and the fault; every failure is the caller's
:class:`~archviz.errors.ArchvizError` subclass, never a traceback.

The checks cost a few C-level passes over the text (no Python call per value); the depth check runs only when the
text has that many brackets at all.

Pure library code: nothing here prints.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from archviz.errors import ArchvizError

from .safeio import GZIP_MAGIC, MiB, gunzip_bounded, read_regular

__all__ = ["MAX_CONFIG_BYTES", "MAX_DEPTH", "MAX_INT_DIGITS", "JSONLimitError", "check_text", "load_config_file",
           "load_file", "loads", "max_depth"]

#: Deepest nesting accepted: serde_json's limit (it refuses 128 open brackets), so what the safetensors library
#: reads, archviz reads.
MAX_DEPTH = 127
#: Largest config file read (transformers' config.json files are a few KB; the biggest, with label maps, < 1 MB).
MAX_CONFIG_BYTES = 16 * MiB
#: Longest integer literal accepted (2**64 has 20 digits; a count, a size or an offset never needs more).
MAX_INT_DIGITS = 40

# A JSON string (valid JSON: every '"' outside a string opens one, every backslash inside escapes one character).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = str.maketrans("", "", "".join(chr(c) for c in range(128) if chr(c) not in "[]{}"))
_INNERMOST = re.compile(r"\[\]|\{\}")
# A \u escape of a UTF-16 surrogate (high or low); what follows decides whether it is half of a pair.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class JSONLimitError(ValueError):
    """Valid JSON beyond one of the bounds (raised by :func:`check_text`, caught by :func:`loads`)."""


def _no_constant(name: str) -> Any:
    raise JSONLimitError(f"{name} is not JSON")


def max_depth(text: str, stop: int = MAX_DEPTH + 1) -> int:
    """Deepest nesting of brackets in valid JSON ``text``, counted up to ``stop`` (then ``stop`` is returned): the
    strings removed, the rest reduced to its brackets, innermost pairs removed once per level (C-level passes)."""
    brackets = _STRING.sub("", text).translate(_BRACKETS)
    depth = 0
    while brackets and depth < stop:
        brackets = _INNERMOST.sub("", brackets)
        depth += 1
    return depth


def check_text(text: str, obj: Any, *, max_nesting: int = MAX_DEPTH, max_int_digits: int = MAX_INT_DIGITS) -> None:
    """Raise :class:`JSONLimitError` when ``text`` (valid JSON, parsed to ``obj``) nests deeper than
    ``max_nesting``, holds an integer of more than ``max_int_digits`` digits, or a lone surrogate."""
    if text.count("[") + text.count("{") > max_nesting and max_depth(text, max_nesting + 1) > max_nesting:
        raise JSONLimitError(f"nested more than {max_nesting} levels deep")
    long_int = re.compile(rf"[0-9]{{{max_int_digits + 1},}}")
    if long_int.search(text):
        m = long_int.search(_STRING.sub('""', text))
        if m is not None:
            raise JSONLimitError(f"a number of {len(m.group(0)):,} digits (at most {max_int_digits} are accepted)")
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as e:
            raise JSONLimitError(f"a lone UTF-16 surrogate ({e.object[e.start:e.end]!a})") from None


def loads(text: str, *, where: str, error: type[ArchvizError] = ArchvizError, hint: str | None = None,
          max_nesting: int = MAX_DEPTH, max_int_digits: int = MAX_INT_DIGITS, constants: bool = False,
          object_pairs_hook: Any = None) -> Any:
    """``json.loads(text)`` within the bounds; any fault is ``error("{where}: not valid JSON (...)")``.

    ``constants`` lets ``NaN``, ``Infinity`` and ``-Infinity`` through (Python's json writes them for float
    nan/inf; a strict reader refuses them)."""
    hint = hint or "check the file"
    try:
        obj = json.loads(text, parse_constant=None if constants else _no_constant,
                         object_pairs_hook=object_pairs_hook)
        check_text(text, obj, max_nesting=max_nesting, max_int_digits=max_int_digits)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})", hint=hint) from None
    except RecursionError:
        raise error(f"{where}: not valid JSON (nested more than {max_nesting} levels deep)", hint=hint) from None
    except JSONLimitError as e:
        raise error(f"{where}: refused JSON ({e})", hint=hint) from None
    except ValueError as e:  # an integer literal beyond Python's 4300-digit limit
        raise error(f"{where}: refused JSON ({str(e).split(';')[0]})", hint=hint) from None
    return obj


def load_file(path: str | os.PathLike[str], *, what: str = "JSON", max_bytes: int = 64 * MiB,
              error: type[ArchvizError] = ArchvizError, gzip: bool = False, constants: bool = False) -> Any:
    """A JSON file (a regular file of at most ``max_bytes``; gunzipped to at most that when ``gzip`` and it starts
    with the gzip magic bytes), parsed by :func:`loads`."""
    where = os.fspath(path)
    raw = read_regular(where, max_bytes=max_bytes, what=what, error=error)
    if gzip and raw[:2] == GZIP_MAGIC:
        raw = gunzip_bounded(raw, max_bytes=max_bytes, where=where, what=what, error=error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not valid UTF-8 (byte {e.start})", hint="check the file") from None
    return loads(text, where=where, error=error, constants=constants)


def load_config_file(path: str | os.PathLike[str], *, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """A model config file (``config.json``): a regular file of at most ``max_bytes``, bounded JSON (``NaN`` and
    ``Infinity`` allowed: Python's json writes them). Faults are :class:`~archviz.errors.SourceError`."""
    from archviz.errors import SourceError

    where = os.fspath(path)
    raw = read_regular(where, max_bytes=max_bytes, what="config", error=SourceError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SourceError(f"{where}: not a readable JSON config (not UTF-8 at byte {e.start})",
                          hint="check the file") from None
    return loads(text, where=f"{where}: not a readable JSON config", error=SourceError, constants=True)

"""YAML from untrusted files: a model config a training codebase writes in YAML (`configs/*.yaml`, read by OmegaConf or
PyYAML in its own launcher).

A file is read as `safeio` reads every input (a regular file only, at most a stated number of bytes), decoded as
UTF-8 and parsed by PyYAML's safe loader, which makes plain values only (no tag builds an object, nothing runs).
Anchors and aliases are kept (a merge key `<<: *base` is common), but the document is first composed into nodes
and its size counted as expanded, each alias at its full size (memoised, so the count itself is linear): a document
of more than `MAX_NODES` values expanded (an alias bomb: ten aliases of ten aliases ...) is refused before any of
it is built, as is one nested deeper than `MAX_DEPTH`; what is built is handed back as JSON values (a date as
its text, keys as strings). PyYAML is not one of archviz's requirements: where it is
not installed, the refusal says how to install it (every project whose configs are YAML has it). Every fault is one
line, the caller's :class:`~archviz.errors.ArchvizError` subclass naming the file.

Pure library code: nothing here prints.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

from archviz.errors import ArchvizError

from .safeio import MiB, read_regular
from .safejson import MAX_DEPTH, MAX_INT_DIGITS

__all__ = ["MAX_NODES", "MAX_YAML_BYTES", "YAML_SUFFIXES", "load_file"]

#: Largest YAML file read (a training config is a few KB).
MAX_YAML_BYTES = 4 * MiB
#: Most values a document may hold once its aliases are expanded.
MAX_NODES = 200_000
YAML_SUFFIXES = (".yaml", ".yml")


def _expanded_size(root: Any) -> int:
    """Values in the document once every alias is expanded, stopping past MAX_NODES; a node nested deeper than
    MAX_DEPTH counts as too many."""
    import yaml

    sizes: dict[int, int] = {}

    def size(node: Any, depth: int) -> int:
        if depth > MAX_DEPTH:
            return MAX_NODES + 1
        got = sizes.get(id(node))
        if got is not None:
            return got
        sizes[id(node)] = MAX_NODES + 1  # a node inside itself (a recursive alias): too many
        if isinstance(node, yaml.MappingNode):
            children = [x for pair in node.value for x in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        total = 1
        for c in children:
            total += size(c, depth + 1)
            if total > MAX_NODES:
                break
        sizes[id(node)] = total
        return total

    return size(root, 0) if root is not None else 0


def load_file(path: str | os.PathLike[str], *, what: str, error: type[ArchvizError] = ArchvizError,
              max_bytes: int = MAX_YAML_BYTES) -> Any:
    """A YAML file's one document as JSON values (dicts with string keys, lists, str, int, float, bool, None)."""
    where = os.fspath(path)
    raw = read_regular(where, max_bytes=max_bytes, what=what, error=error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not a readable YAML {what} (not UTF-8 at byte {e.start})", hint="check the file") \
            from None
    try:
        import yaml
    except ImportError:
        raise error(f"{where}: reading a YAML {what} needs PyYAML, which is not installed",
                    hint="pip install pyyaml, or give the config as JSON") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if _expanded_size(root) > MAX_NODES:
            raise error(f"{where}: a YAML {what} of more than {MAX_NODES:,} values (its aliases expanded) or nested "
                        f"deeper than {MAX_DEPTH}", hint="check the file")
        loader = yaml.SafeLoader("")
        try:
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except RecursionError:
        raise error(f"{where}: not a readable YAML {what} (nested too deeply)", hint="check the file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise error(f"{where}: not a readable YAML {what} ({problem}{at})", hint="check the file") from None
    return _plain(data, where, what, error)


def _plain(value: Any, where: str, what: str, error: type[ArchvizError]) -> Any:
    """`value` as JSON values (string keys, lists; a date or binary scalar as its text), or one line why not."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise error(f"{where}: refused YAML {what} (a key of type {type(k).__name__})",
                            hint="keys of a config are names")
            out[k if isinstance(k, str) else str(k)] = _plain(v, where, what, error)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, where, what, error) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and len(str(abs(value))) > MAX_INT_DIGITS:
        raise error(f"{where}: refused YAML {what} (an integer of more than {MAX_INT_DIGITS} digits)",
                    hint="check the file")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (datetime.date, datetime.datetime, bytes)):
        return str(value)  # a date or a binary scalar: kept as its text
    raise error(f"{where}: refused YAML {what} (a value of type {type(value).__name__})", hint="check the file")

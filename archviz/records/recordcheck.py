"""The one validator style of archviz's JSON (and TOML) data files: a value of the wrong type (a list where a class
name goes, a string where a count goes) is refused when the file is read, naming the field it is in, not met later
in a renderer or in the grouping.

The primitives (`want_str`, `want_int`, `want_number`, `want_bool`, `want_list`, `want_strs`, `want_table`) each
take a field path (`node #2.claim #1.lines`, `[h200].memory_gb`) and a decoded value, return the value, and raise a
`SchemaError` (a ValueError) `"{path}: {what is expected}, not {the value}"`; each reader adds its file's name and
raises its own error (exit 2, one line): `with refused_as(lambda m: ArchvizError(f"{file}: {m}")): ...`. Records
files (archviz.records), annotations, hardware presets, names files, the gallery's sets, rules files, manifests'
shard lists, the site's marker and the records cache check their documents with them.

`check(field, value)` takes a decoded `ModuleRecord` field value (archviz.records); a compact file's distinct values
are checked once each, a version 1 file's for every module.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, NoReturn

_JSON_SCALARS = (str, int, float, bool, type(None))


class SchemaError(ValueError):
    """A field of a data file that does not hold what it must: `path` names the field, the message says what."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown[:60] + "…" if len(shown) > 60 else shown


def fail(path: str, what: str, value: Any = ...) -> NoReturn:
    """Raise the SchemaError "{path}: {what}, not {value}" (`value` left out: "{path}: {what}")."""
    tail = f", not {_shown(value)}" if value is not ... else ""
    raise SchemaError(path, f"{path}: {what}{tail}" if path else f"{what}{tail}")


def want_str(path: str, v: Any, optional: bool = False, nonempty: bool = False) -> Any:
    """A string (`nonempty`: with a character other than white space); `optional`: or None."""
    if not ((type(v) is str and (not nonempty or v.strip())) or (optional and v is None)):
        fail(path, ("a non-empty string" if nonempty else "a string") + (" or null" if optional else ""), v)
    return v


def want_int(path: str, v: Any, optional: bool = False, minimum: int | None = None) -> Any:
    """An integer (never a bool), at least `minimum`; `optional`: or None."""
    if not ((type(v) is int and (minimum is None or v >= minimum)) or (optional and v is None)):
        what = "an integer" if minimum is None else f"an integer of at least {minimum}"
        fail(path, what + (" or null" if optional else ""), v)
    return v


def want_number(path: str, v: Any, minimum: float | None = None, maximum: float | None = None) -> float:
    """A finite int or float (never a bool), at least `minimum` and at most `maximum`: as a float (an integer too
    large for a float, 400 digits, is refused like any other number out of range)."""
    try:
        ok = type(v) in (int, float) and math.isfinite(v) and (minimum is None or v >= minimum) and \
            (maximum is None or v <= maximum)
    except OverflowError:
        ok = False
    if not ok:
        what = "a number" if minimum is None else "a non-negative number" if minimum == 0 else \
            f"a number of at least {minimum}"
        fail(path, what if maximum is None else f"{what} up to {maximum:g}", v)
    return float(v)


def want_bool(path: str, v: Any, optional: bool = False) -> Any:
    """true or false; `optional`: or null."""
    if not (type(v) is bool or (optional and v is None)):
        fail(path, "true, false or null" if optional else "true or false", v)
    return v


def want_list(path: str, v: Any, nonempty: bool = False) -> list[Any]:
    """A list (a JSON array, a TOML array or array of tables); `nonempty`: with an item."""
    if type(v) is not list or (nonempty and not v):
        fail(path, "a non-empty list" if nonempty else "a list", v)
    return v


def want_strs(path: str, v: Any, nonempty: bool = False) -> list[str]:
    """A list of strings (`nonempty`: of non-empty strings, at least one)."""
    if type(v) is not list or (nonempty and not v) or any(type(x) is not str or (nonempty and not x) for x in v):
        fail(path, "a non-empty list of non-empty strings" if nonempty else "a list of strings", v)
    return v


def want_table(path: str, v: Any, keys: Iterable[str] | None = None, what: str = "a table") -> dict[str, Any]:
    """An object with string keys (a JSON object, a TOML table); `keys`: the only keys it may have (the first unknown
    one is named)."""
    if type(v) is not dict or any(type(k) is not str for k in v):
        fail(path, what, v)
    if keys is not None:
        known = set(keys)
        unknown = sorted(k for k in v if k not in known)
        if unknown:
            fail(path, f"unknown key {unknown[0]!r} (keys: {', '.join(sorted(known))})")
    return v


@contextmanager
def refused_as(error: Callable[[str], Exception]) -> Iterator[None]:
    """A SchemaError raised inside becomes `error(message)`: the reader's own error, naming its file."""
    try:
        yield
    except SchemaError as e:
        raise error(str(e)) from None


def _strs(field: str, v: Any) -> None:
    if type(v) is not tuple or any(type(x) is not str for x in v):
        fail(field, "a list of strings", v)


def _shape(field: str, v: Any, symbols: bool = False) -> None:
    if type(v) is not tuple or any(not (type(d) is int or (symbols and type(d) is str)) for d in v):
        fail(field, "a list of " + ("dims (integers or symbols)" if symbols else "integers"), v)


def _shapes(field: str, v: Any) -> None:
    if type(v) is not tuple:
        fail(field, "a list of shapes", v)
    for s in v:
        _shape(field, s, symbols=True)


def _json(field: str, v: Any, depth: int = 0) -> None:
    if depth > 8:
        fail(field, "a value nested at most 8 deep", v)
    if isinstance(v, (list, tuple)):
        for x in v:
            _json(field, x, depth + 1)
    elif isinstance(v, dict):
        for k, x in v.items():
            want_str(field, k)
            _json(field, x, depth + 1)
    elif not isinstance(v, _JSON_SCALARS):
        fail(field, "a JSON value", v)


def _tensor(t: Any) -> None:
    f = "tensors"
    want_str(f, t.name)
    want_str(f, t.kind)
    _shape(f, t.shape)
    want_str(f, t.dtype)
    for n in (t.elements, t.storage_elements, t.bytes):
        want_int(f, n)
    if t.persistent is not None and type(t.persistent) is not bool:
        fail(f, "persistent true, false or null", t.persistent)
    for s in (t.packing, t.alias_of, t.scales, t.note):
        want_str(f, s, optional=True)
    if t.logical_shape is not None:
        _shape(f, t.logical_shape)


def _totals(field: str, t: Any) -> None:
    for n in (t.parameters, t.scale_elements, t.table_elements, t.buffer_elements, t.persistent_buffer_elements,
              t.bytes):
        want_int(field, n)


def _span(field: str, s: Any) -> None:
    if s is not None:
        want_str(field, s.file)
        want_int(field, s.start)
        want_int(field, s.end)


def _flow(f: Any) -> None:
    if f is None:
        return
    for st in f.steps:
        want_str("flow", st.name)
        _shapes("flow", st.shapes)
        _shape("flow", st.inputs)
        want_int("flow", st.count)
    _shape("flow", f.outputs)
    _strs("flow", f.inputs)


def check(field: str, v: Any) -> None:
    """Raise ValueError unless `v` is a value field `field` of a ModuleRecord can hold."""
    if field in ("class_name", "class_module"):
        want_str(field, v)
    elif field == "doc":
        want_str(field, v, optional=True)
    elif field == "called":
        if v is not None and type(v) is not bool:
            fail(field, "true, false or null", v)
    elif field in ("children", "assumptions", "kernels"):
        _strs(field, v)
    elif field == "tensors":
        if type(v) is not tuple:
            fail(field, "a list of tensors", v)
        for t in v:
            _tensor(t)
    elif field in ("totals", "own"):
        _totals(field, v)
    elif field in ("class_span", "init_span", "forward_span"):
        _span(field, v)
    elif field == "attributes":
        if type(v) is not tuple:
            fail(field, "an object", v)
        for k, x in v:
            want_str(field, k)
            _json(field, x)
    elif field == "calls":
        for c in v:
            _shapes(field, c.inputs)
            _shapes(field, c.outputs)
            _strs(field, c.input_dtypes)
            _strs(field, c.output_dtypes)
    elif field == "call_sites":
        for c in v:
            want_str(field, c.file)
            want_int(field, c.line)
            want_str(field, c.code)
    elif field == "dims":
        for d, n in v:
            want_int(field, d)
            want_str(field, n)
    elif field == "flow":
        _flow(v)


def check_head(source: Any, summary: Any) -> None:
    """Raise ValueError unless the record's source and summary hold what the schema gives them."""
    for f in ("spec", "kind", "name", "model_class"):
        want_str(f"source.{f}", getattr(source, f))
    _strs("source.notes", source.notes)
    _strs("source.stubbed_imports", source.stubbed_imports)
    want_int("source.world_size", source.world_size)
    want_int("source.rank", source.rank)
    for f in ("files", "versions"):
        for k, v in getattr(source, f):
            want_str(f"source.{f}", k)
            want_str(f"source.{f}", v)
    for f in ("config", "overrides", "file_facts"):
        for k, v in getattr(source, f):
            want_str(f"source.{f}", k)
            _json(f"source.{f}", v)
    for f in ("parameters", "scale_elements", "table_elements", "buffer_elements", "persistent_buffer_elements",
              "bytes", "modules", "input_embedding_parameters"):
        want_int(f"summary.{f}", getattr(summary, f))
    want_int("summary.active_parameters", summary.active_parameters, optional=True)
    for f in ("bytes_by_dtype", "parameters_by_dtype"):
        for k, v in getattr(summary, f):
            want_str(f"summary.{f}", k)
            want_int(f"summary.{f}", v)
    for m in summary.moe:
        want_str("summary.moe", m.path)
        for n in (m.experts, m.local_experts, m.parameters, m.per_expert):
            want_int("summary.moe", n)
        want_int("summary.moe", m.top_k, optional=True)
    _strs("summary.active_assumptions", summary.active_assumptions)
    want_str("summary.input_embedding_path", summary.input_embedding_path, optional=True)


__all__ = ["SchemaError", "check", "check_head", "fail", "refused_as", "want_bool", "want_int", "want_list",
           "want_number", "want_str", "want_strs", "want_table"]

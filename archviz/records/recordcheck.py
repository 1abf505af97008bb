"""The types a records file's values must have, checked as they are read: a file is data from anywhere, and a value of
the wrong type (a list where a class name goes, a string where a count goes) must be refused when the file is read,
with the field it is in, not fail later in a renderer or in the grouping.

`check(field, value)` takes a decoded `ModuleRecord` field value (archviz.records); a compact file's distinct values
are checked once each, a version 1 file's for every module. A ValueError names what is wrong.
"""

from __future__ import annotations

from typing import Any

_JSON_SCALARS = (str, int, float, bool, type(None))


def _fail(field: str, what: str, value: Any) -> None:
    shown = repr(value)
    raise ValueError(f"{field}: {what}, not {shown[:60] + '…' if len(shown) > 60 else shown}")


def _str(field: str, v: Any, optional: bool = False) -> None:
    if not (type(v) is str or (optional and v is None)):
        _fail(field, "a string" + (" or null" if optional else ""), v)


def _int(field: str, v: Any, optional: bool = False) -> None:
    if not (type(v) is int or (optional and v is None)):
        _fail(field, "an integer" + (" or null" if optional else ""), v)


def _strs(field: str, v: Any) -> None:
    if type(v) is not tuple or any(type(x) is not str for x in v):
        _fail(field, "a list of strings", v)


def _shape(field: str, v: Any, symbols: bool = False) -> None:
    if type(v) is not tuple or any(not (type(d) is int or (symbols and type(d) is str)) for d in v):
        _fail(field, "a list of " + ("dims (integers or symbols)" if symbols else "integers"), v)


def _shapes(field: str, v: Any) -> None:
    if type(v) is not tuple:
        _fail(field, "a list of shapes", v)
    for s in v:
        _shape(field, s, symbols=True)


def _json(field: str, v: Any, depth: int = 0) -> None:
    if depth > 8:
        _fail(field, "a value nested at most 8 deep", v)
    if isinstance(v, (list, tuple)):
        for x in v:
            _json(field, x, depth + 1)
    elif isinstance(v, dict):
        for k, x in v.items():
            _str(field, k)
            _json(field, x, depth + 1)
    elif not isinstance(v, _JSON_SCALARS):
        _fail(field, "a JSON value", v)


def _tensor(t: Any) -> None:
    f = "tensors"
    _str(f, t.name)
    _str(f, t.kind)
    _shape(f, t.shape)
    _str(f, t.dtype)
    for n in (t.elements, t.storage_elements, t.bytes):
        _int(f, n)
    if t.persistent is not None and type(t.persistent) is not bool:
        _fail(f, "persistent true, false or null", t.persistent)
    for s in (t.packing, t.alias_of, t.scales, t.note):
        _str(f, s, optional=True)
    if t.logical_shape is not None:
        _shape(f, t.logical_shape)


def _totals(field: str, t: Any) -> None:
    for n in (t.parameters, t.scale_elements, t.table_elements, t.buffer_elements, t.persistent_buffer_elements,
              t.bytes):
        _int(field, n)


def _span(field: str, s: Any) -> None:
    if s is not None:
        _str(field, s.file)
        _int(field, s.start)
        _int(field, s.end)


def _flow(f: Any) -> None:
    if f is None:
        return
    for st in f.steps:
        _str("flow", st.name)
        _shapes("flow", st.shapes)
        _shape("flow", st.inputs)
        _int("flow", st.count)
    _shape("flow", f.outputs)
    _strs("flow", f.inputs)


def check(field: str, v: Any) -> None:
    """Raise ValueError unless `v` is a value field `field` of a ModuleRecord can hold."""
    if field in ("class_name", "class_module"):
        _str(field, v)
    elif field == "doc":
        _str(field, v, optional=True)
    elif field == "called":
        if v is not None and type(v) is not bool:
            _fail(field, "true, false or null", v)
    elif field in ("children", "assumptions", "kernels"):
        _strs(field, v)
    elif field == "tensors":
        if type(v) is not tuple:
            _fail(field, "a list of tensors", v)
        for t in v:
            _tensor(t)
    elif field in ("totals", "own"):
        _totals(field, v)
    elif field in ("class_span", "init_span", "forward_span"):
        _span(field, v)
    elif field == "attributes":
        if type(v) is not tuple:
            _fail(field, "an object", v)
        for k, x in v:
            _str(field, k)
            _json(field, x)
    elif field == "calls":
        for c in v:
            _shapes(field, c.inputs)
            _shapes(field, c.outputs)
            _strs(field, c.input_dtypes)
            _strs(field, c.output_dtypes)
    elif field == "call_sites":
        for c in v:
            _str(field, c.file)
            _int(field, c.line)
            _str(field, c.code)
    elif field == "dims":
        for d, n in v:
            _int(field, d)
            _str(field, n)
    elif field == "flow":
        _flow(v)


def check_head(source: Any, summary: Any) -> None:
    """Raise ValueError unless the record's source and summary hold what the schema gives them."""
    for f in ("spec", "kind", "name", "model_class"):
        _str(f"source.{f}", getattr(source, f))
    _strs("source.notes", source.notes)
    _strs("source.stubbed_imports", source.stubbed_imports)
    _int("source.world_size", source.world_size)
    _int("source.rank", source.rank)
    for f in ("files", "versions"):
        for k, v in getattr(source, f):
            _str(f"source.{f}", k)
            _str(f"source.{f}", v)
    for f in ("config", "overrides", "file_facts"):
        for k, v in getattr(source, f):
            _str(f"source.{f}", k)
            _json(f"source.{f}", v)
    for f in ("parameters", "scale_elements", "table_elements", "buffer_elements", "persistent_buffer_elements",
              "bytes", "modules", "input_embedding_parameters"):
        _int(f"summary.{f}", getattr(summary, f))
    _int("summary.active_parameters", summary.active_parameters, optional=True)
    for f in ("bytes_by_dtype", "parameters_by_dtype"):
        for k, v in getattr(summary, f):
            _str(f"summary.{f}", k)
            _int(f"summary.{f}", v)
    for m in summary.moe:
        _str("summary.moe", m.path)
        for n in (m.experts, m.local_experts, m.parameters, m.per_expert):
            _int("summary.moe", n)
        _int("summary.moe", m.top_k, optional=True)
    _strs("summary.active_assumptions", summary.active_assumptions)
    _str("summary.input_embedding_path", summary.input_embedding_path, optional=True)


__all__ = ["check", "check_head"]

"""Per-module differences of a matched pair: class, tensors, attributes, shapes, call sites, lines, kernels, dims,
doc and notes, each aspect only when asked for. Pure function of records (no torch)."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from .. import format as fmt
from ..records import PARAMETER_KINDS, ModuleRecord, SourceSpan, TensorRecord
from .result import Change

_LINE_REF = re.compile(r"(\.py):\d+")  # "model.py:388" in a note: the line part is the "lines" aspect's


def _span(s: SourceSpan | None) -> str | None:
    return None if s is None else f"{s.file}:{s.start}-{s.end}"


def tensor_text(t: TensorRecord) -> str:
    """One tensor as a line: 'weight float8_e4m3fn [7168, 1536] 11,010,048'; packing, persistence, aliasing and a
    logical shape follow when set."""
    parts = [t.kind, t.dtype, fmt.shape(t.shape), fmt.count(t.elements)]
    if t.logical_shape is not None and tuple(t.logical_shape) != tuple(t.shape):
        parts.append(f"logical {fmt.shape(t.logical_shape)}")
    if t.packing:
        parts.append(f"packed {t.packing}")
    if t.persistent is not None:
        parts.append("persistent" if t.persistent else "not persistent")
    if t.alias_of:
        parts.append(f"alias of {t.alias_of}")
    return " ".join(parts)


def _counted(t: TensorRecord | None) -> int:
    return t.elements if t is not None and t.kind in PARAMETER_KINDS else 0


def _calls_text(m: ModuleRecord) -> str:
    if not m.calls:
        return "not called" if m.called is False else "no calls recorded"
    out = []
    for c in m.calls:
        ins = ", ".join(fmt.shape(s) for s in c.inputs)
        outs = ", ".join(fmt.shape(s) for s in c.outputs)
        dt = ""
        if c.input_dtypes or c.output_dtypes:
            dt = f" ({', '.join(c.input_dtypes)} → {', '.join(c.output_dtypes)})"
        out.append(f"({ins}) → ({outs}){dt}")
    return "; ".join(out)


def _sizes(m: ModuleRecord, env: Mapping[str, int]) -> tuple | None:
    """The calls of `m` with every dim a number: symbols read from `env` (the pass's B, T, B·T); None where a dim
    is a symbol `env` lacks (a routed count, a dim the user named)."""
    out = []
    for c in m.calls:
        sides = []
        for shapes in (c.inputs, c.outputs):
            for s in shapes:
                dims = []
                for d in s:
                    v = d if isinstance(d, int) else env.get(d)
                    if v is None:
                        return None
                    dims.append(v)
                sides.append(tuple(dims))
        out.append((tuple(sides), c.input_dtypes, c.output_dtypes))
    return tuple(out)


def pass_dims(extra: Mapping[str, Any]) -> dict[str, int]:
    """The symbols a meta pass named its dims by, with their sizes, from its `extra("shapes")`."""
    b, t = extra.get("B"), extra.get("T")
    if not isinstance(b, int) or not isinstance(t, int):
        return {}
    return {"B": b, "T": t, "B·T": b * t}


def _mapping(items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    return {k: v for k, v in items}


def compare(ma: ModuleRecord, mb: ModuleRecord, aspects: frozenset[str], shapes: bool, sized: bool | None = None,
            dims: tuple[Mapping[str, int], Mapping[str, int]] = ({}, {})) -> list[Change]:
    """The changes from `ma` (in A) to `mb` (in B) in `aspects`; `shapes`: both records hold the meta pass, so
    what it records (call sites, the kernels it met) can be compared; `sized` (default `shapes`): both passes ran
    at the same sizes, so what quotes them (calls, the assumptions it noted) can be too. `dims`: each pass's
    symbols and sizes (`pass_dims`): calls whose dims all read as numbers are compared as numbers (a dim named B·T
    by one pass and 4096 by the other is the same dim)."""
    sized = shapes if sized is None else sized and shapes
    out: list[Change] = []
    if "class" in aspects and (ma.class_name != mb.class_name or ma.class_module != mb.class_module):
        out.append(Change("class", "class", f"{ma.class_module}.{ma.class_name}", f"{mb.class_module}.{mb.class_name}"))
    if "tensors" in aspects and ma.tensors != mb.tensors:
        ta = {t.name: t for t in ma.tensors}
        tb = {t.name: t for t in mb.tensors}
        for name in list(ta) + [n for n in tb if n not in ta]:
            x, y = ta.get(name), tb.get(name)
            if x == y:
                continue
            sx = tensor_text(x) if x is not None else None
            sy = tensor_text(y) if y is not None else None
            if sx != sy:
                out.append(Change("tensors", f"tensor {name}", sx, sy, _counted(y) - _counted(x)))
    if "attributes" in aspects and ma.attributes != mb.attributes:
        xa, xb = _mapping(ma.attributes), _mapping(mb.attributes)
        # `self.engram = None` in one model, a submodule in the other: the child's addition says it already
        kids = {c.rsplit(".", 1)[-1] for c in ma.children + mb.children}
        for k in list(xa) + [k for k in xb if k not in xa]:
            if k not in kids and xa.get(k, _MISSING) != xb.get(k, _MISSING):
                out.append(Change("attributes", f"attribute {k}", None if k not in xa else repr(xa[k]),
                                  None if k not in xb else repr(xb[k])))
    if sized and "shapes" in aspects and (ma.calls != mb.calls or ma.called != mb.called):
        a, b = _calls_text(ma), _calls_text(mb)
        xa, xb = _sizes(ma, dims[0]), _sizes(mb, dims[1])
        if (a != b if xa is None or xb is None else xa != xb or ma.called != mb.called):
            out.append(Change("shapes", "calls", a, b))
    if shapes and ma.call_sites != mb.call_sites:
        ca = [c.code for c in ma.call_sites]
        cb = [c.code for c in mb.call_sites]
        if "call-sites" in aspects and ca != cb:
            out.append(Change("call-sites", "call sites", "; ".join(ca) or None, "; ".join(cb) or None))
        la = ", ".join(f"{c.file}:{c.line}" for c in ma.call_sites)
        lb = ", ".join(f"{c.file}:{c.line}" for c in mb.call_sites)
        if "lines" in aspects and la != lb:
            out.append(Change("lines", "call-site lines", la or None, lb or None))
    if "lines" in aspects:
        for what, x, y in (("class lines", ma.class_span, mb.class_span), ("__init__ lines", ma.init_span,
                                                                           mb.init_span),
                           ("forward lines", ma.forward_span, mb.forward_span)):
            if x != y:
                out.append(Change("lines", what, _span(x), _span(y)))
    if shapes and "kernels" in aspects and ma.kernels != mb.kernels:
        out.append(Change("kernels", "kernels", ", ".join(ma.kernels) or None, ", ".join(mb.kernels) or None))
    if "dims" in aspects and ma.dims != mb.dims:
        out.append(Change("dims", "dim names", ", ".join(f"{v} = {n}" for v, n in ma.dims) or None,
                          ", ".join(f"{v} = {n}" for v, n in mb.dims) or None))
    if "doc" in aspects and ma.doc != mb.doc:
        out.append(Change("doc", "doc", ma.doc, mb.doc))
    if sized and ma.assumptions != mb.assumptions:
        na = [_LINE_REF.sub(r"\1:…", x) for x in ma.assumptions]
        nb = [_LINE_REF.sub(r"\1:…", x) for x in mb.assumptions]
        if "notes" in aspects and na != nb:
            out.append(Change("notes", "notes", "; ".join(ma.assumptions) or None,
                              "; ".join(mb.assumptions) or None))
        elif na == nb and "lines" in aspects:
            out.append(Change("lines", "note lines", "; ".join(ma.assumptions), "; ".join(mb.assumptions)))
    return out


_MISSING = object()

__all__ = ["compare", "tensor_text"]

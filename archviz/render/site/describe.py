"""A node's one-line description from its records alone ("Linear 8,192 → 5,120, bfloat16 weight"), and the
words for its tensors' shapes and sizes."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from ... import format as fmt
from ..dims import DimNames
from ...records import (
    ALIAS,
    BIAS,
    BUFFER,
    SCALE,
    TABLE,
    WEIGHT,
    ModuleRecord,
    TensorRecord,
)
from .nodes import CONTAINERS


def linear_dims(m: ModuleRecord) -> tuple[int, int] | None:
    attrs = dict(m.attributes)
    i, o = attrs.get("in_features"), attrs.get("out_features")
    if isinstance(i, int) and isinstance(o, int) and not isinstance(i, bool):
        return i, o
    return None


def main_weight(m: ModuleRecord) -> TensorRecord | None:
    for t in m.tensors:
        if t.kind == WEIGHT and t.name == "weight":
            return t
    ws = [t for t in m.tensors if t.kind == WEIGHT]
    return ws[0] if len(ws) == 1 else None


def logical_shape(t: TensorRecord) -> tuple[int, ...]:
    return tuple(t.logical_shape) if t.logical_shape else tuple(t.shape)


def calc_text(shape: Sequence[int], elements: int) -> str:
    if not shape:
        return f"1 = {fmt.count(elements)}"
    if len(shape) == 1:
        return fmt.count(shape[0])
    return " × ".join(fmt.count(d) for d in shape) + f" = {fmt.count(elements)}"


DTYPE_BYTES = {"float32": "4 bytes", "float16": "2 bytes", "bfloat16": "2 bytes", "float64": "8 bytes",
                "float8_e4m3fn": "1 byte", "float8_e5m2": "1 byte", "float8_e8m0fnu": "1 byte", "int8": "1 byte",
                "uint8": "1 byte", "int64": "8 bytes", "int32": "4 bytes", "float4_e2m1fn_x2": "1 byte per 2 values"}


def component_text(t: TensorRecord) -> str:
    shape = logical_shape(t)
    if t.kind == WEIGHT:
        if len(shape) == 2:
            return f"Weight matrix `{t.name}`" if t.name != "weight" else "Weight matrix"
        if len(shape) == 1:
            return f"Weight vector `{t.name}`" if t.name != "weight" else "Weight vector"
        if len(shape) >= 3:
            return f"Stacked weights `{t.name}`"
        return f"Scalar `{t.name}`"
    return {BIAS: "Bias" if t.name == "bias" else f"Bias `{t.name}`", SCALE: f"Block scales `{t.name}`",
            TABLE: f"Integer table `{t.name}`", BUFFER: f"Buffer `{t.name}`", ALIAS: f"Alias `{t.name}`"}.get(t.kind,
                                                                                                        t.name)


def describe(m: ModuleRecord, names: DimNames, child_count: int, local: Mapping[int, str] | None = None) -> str:
    """A one-line description generated from the module and its shapes (`local`: the page's width names, by default
    the module's own)."""
    local = dict(m.dims) if local is None else local
    lin = linear_dims(m)
    w = main_weight(m)
    cls = m.class_name
    low = cls.lower()
    if lin:
        i, o = lin
        inn = names.name(i, local)
        src = f"the {fmt.count(i)} {'(' + inn + ') ' if inn and inn != names.width_key else ''}input features"
        if names.width is not None and i == names.width:
            src = f"the model width ({fmt.count(i)})"
        dst = f"the model width ({fmt.count(o)})" if names.width is not None and o == names.width else \
            f"{fmt.count(o)} output features"
        return f"Map {src} to {dst}."
    if "embed" in low and w is not None and len(logical_shape(w)) == 2:
        n, d = logical_shape(w)
        return f"Look up one of {fmt.count(n)} vectors of width {fmt.count(d)} per token."
    if "norm" in low:
        if w is not None and len(logical_shape(w)) == 1:
            return f"Normalize the last {fmt.count(logical_shape(w)[0])} features, then scale them by a learned vector."
        if m.calls and m.calls[0].inputs:
            return f"Normalize the last {m.calls[0].inputs[0][-1]} features (no learned scale)."
        return "Normalize its input (no learned scale)."
    if cls in CONTAINERS:
        return f"A {cls} of {len(m.children)} modules."
    if m.doc:
        first = re.split(r"(?<=[.!?])\s", m.doc.strip(), maxsplit=1)[0]
        return first if len(first) <= 240 else first[:239] + "…"
    if m.calls and m.calls[0].inputs and m.calls[0].outputs:
        c = m.calls[0]
        ends = (c.inputs[0], c.outputs[0])
        return f"{cls}: {names.shape(ends[0], local, near=ends[1])} in, {names.shape(ends[1], local, near=ends[0])} out."
    parts = f"{child_count} parts, " if child_count else ""
    return f"{cls}: {parts}{fmt.count(m.totals.parameters)} parameters per instance."

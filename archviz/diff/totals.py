"""The model totals of A and B side by side: parameters, active, scales, tables, buffers, bytes and parameters per
dtype, modules (FLOPs and KV bytes join once `archviz cost` records them). Pure function of records."""

from __future__ import annotations

from ..records import ModelRecord
from .result import Delta


def totals(a: ModelRecord, b: ModelRecord) -> tuple[Delta, ...]:
    sa, sb = a.summary, b.summary
    out = [
        Delta("parameters", sa.parameters, sb.parameters),
        Delta("active parameters", sa.active_parameters, sb.active_parameters),
        Delta("quantization scales", sa.scale_elements, sb.scale_elements),
        Delta("integer tables", sa.table_elements, sb.table_elements),
        Delta("buffers", sa.buffer_elements, sb.buffer_elements),
        Delta("persistent buffers", sa.persistent_buffer_elements, sb.persistent_buffer_elements),
        Delta("stored bytes", sa.bytes, sb.bytes),
    ]
    for label, xa, xb in (("bytes", sa.bytes_by_dtype, sb.bytes_by_dtype),
                          ("parameters", sa.parameters_by_dtype, sb.parameters_by_dtype)):
        da, db = dict(xa), dict(xb)
        for dtype in sorted(set(da) | set(db)):
            out.append(Delta(f"{label} {dtype}", da.get(dtype, 0), db.get(dtype, 0)))
    out.append(Delta("modules", sa.modules, sb.modules))
    return tuple(out)


__all__ = ["totals"]

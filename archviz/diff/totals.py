"""The model totals of A and B side by side: parameters, active, scales, tables, buffers, bytes and parameters per
dtype, modules, and, where a side's records carry `archviz cost`'s extra (`cost -o`), prefill and decode FLOPs and
KV-cache bytes. Pure function of records."""

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
    out.extend(_cost_totals(a, b))
    return tuple(out)


def _cost_totals(a: ModelRecord, b: ModelRecord) -> list[Delta]:
    """FLOPs and KV bytes from the records' cost extras; None on a side without one (nothing when neither has)."""
    if not a.extra("cost") and not b.extra("cost"):
        return []
    from ..cost.report import cost_report

    def figures(r: ModelRecord) -> dict[str, int | None]:
        if not r.extra("cost"):
            return {}
        c = cost_report(r)
        L = c.context
        return {f"prefill FLOPs at {c.batch}×{c.seq}": c.prefill.flops,
                f"decode FLOPs per token at L={L:,}": c.decode.flops if c.decode else None,
                "KV-cache bytes per token": round(c.kv.per_token),
                f"KV-cache bytes at B={c.batch}, L={L:,}": round(c.kv.at_context)}

    fa, fb = figures(a), figures(b)
    names = list(fa) + [k for k in fb if k not in fa]
    return [Delta(k, fa.get(k), fb.get(k)) for k in names]


__all__ = ["totals"]

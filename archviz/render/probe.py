"""The tables of `archviz probe`: pure functions of a probe's result (archviz.probe: the reduced copy's agreement
per layer kind, or every rank's under torch.distributed); nothing printed."""

from __future__ import annotations

from typing import Any


def kinds_table(r: Any) -> Any:
    """One row per layer kind: its layers, the layers the reduced copy ran, its module calls and how many the run
    confirmed (a `ProbeResult`)."""
    from rich.table import Table

    table = Table(title=f"{r.record.source.name}: shapes by execution on {r.device} (B={r.B}, T={r.T}, "
                        f"{r.mode} mode)",
                  title_justify="left")
    table.add_column("layer kind")
    table.add_column("layers", justify="right")
    table.add_column("layers run", justify="left")  # which layers of the kind the reduced copy ran
    table.add_column("modules", justify="right")
    table.add_column("confirmed", justify="right")
    table.add_column("agreement", justify="right")
    for k in r.kinds:
        if not k["compared"] and not k["layers"]:
            continue
        probed = ", ".join(map(str, k["probed"])) if k["probed"] else ("—" if k["layers"] else "")
        agree = f"{k['confirmed'] / k['compared']:.0%}" if k["compared"] else "not exercised"
        style = "red" if k["disagreements"] else ("yellow" if not k["compared"] else None)
        table.add_row(k["kind"], str(k["layers"]) if k["layers"] else "", probed, str(k["compared"]),
                      str(k["confirmed"]), agree, style=style)
    return table


def ranks_table(source: str, world_size: int, result: Any) -> Any:
    """One row per rank of a probe under torch.distributed: module calls confirmed, tensors checked, the output
    against the single-process run, time and peak RSS (a tensor-parallel probe's result)."""
    from rich.table import Table

    table = Table(title=f"{source}: {world_size} ranks under torch.distributed ({result.backend})",
                  title_justify="left")
    for col in ("rank", "module calls confirmed", "tensors checked", "outputs compared", "output vs 1 process",
                "time", "peak RSS"):
        table.add_column(col, justify="left" if col == "rank" else "right")
    for r in result.ranks:
        final = r["output"]
        table.add_row(str(r["rank"]), f"{r['modules_confirmed']}/{r['modules_compared']}",
                      f"{r['tensors_checked'] - len(r['tensor_disagreements'])}/{r['tensors_checked']}",
                      str(r["outputs_compared"]), f"{final['error']:.2g}" if final else "—",
                      f"{r['seconds']:.1f} s", f"{r['peak_rss_mb']:,.0f} MB", style=None if r["ok"] else "red")
    return table


__all__ = ["kinds_table", "ranks_table"]

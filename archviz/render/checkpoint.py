"""The tables of `archviz check` (rich, laid out for the console by archviz.render.fit): pure functions of a
comparison (the ``checkpoint`` extra) and the rows archviz.checkpoint.report makes of it; nothing printed.

Every string may come from the checkpoint (tensor names, a manifest's source and revision) or a rules file (labels):
each reaches a cell as text with its control characters escaped (archviz.render.text), never read as rich markup."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..checkpoint.report import summary_rows
from .fit import NUMBER, PATH, Column, FitTable
from .text import SafeText as Text
from ..errors import option


def _n(v: Any) -> str:
    if v is None:
        return "—"
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def summary_table(result: Mapping[str, Any]) -> FitTable:
    ok = result.get("verdict") == "match"
    title = Text("checkpoint check: ")
    title.append(str(result.get("verdict")), style="green" if ok else "red")
    t = FitTable(Column("", NUMBER, style="bold"), Column(""), title=title, show_header=False)
    for k, v in summary_rows(result):
        t.add_row(k, Text(str(v)))
    return t


def problems_table(rows: Sequence[Mapping[str, Any]], limit: int = 40) -> FitTable:
    t = FitTable(Column("module / notes", PATH), Column("verdict", NUMBER, drop=1),
                 Column("model", NUMBER, justify="right"), Column("checkpoint", NUMBER, justify="right"),
                 Column("model − ckpt", NUMBER, justify="right", drop=2), title="modules that differ")
    for r in rows[:limit]:
        t.add_row(Text(str(r["module"])), Text(str(r["verdict"]), style="red"), _n(r["model"]),
                  _n(r["checkpoint"]), f"{r['difference']:+,}")
        for note in r["notes"][:3]:
            t.add_row(Text(f"  {note}", style="dim"))
    if len(rows) > limit:
        t.add_row(f"… {len(rows) - limit} more ({option('json')} lists them all)")
    return t


def checkpoint_only_table(groups: Sequence[Mapping[str, Any]]) -> FitTable:
    t = FitTable(Column("kind"), Column("tensors", NUMBER, justify="right"),
                 Column("elements", NUMBER, justify="right"), Column("explained", drop=2),
                 Column("examples", drop=1), title="checkpoint-only tensors")
    for g in groups:
        examples = Text()
        for e in g["examples"][:-1]:
            examples.line(str(e))
        examples.append(str(g["examples"][-1]) if g["examples"] else "")
        t.add_row(Text(str(g["kind"])), _n(g["tensors"]), _n(g["elements"]),
                  Text("yes") if g["explained"] else Text("no", style="red"), examples)
    return t


def notes_table(notes: Sequence[tuple[str, int]], limit: int = 12) -> FitTable:
    t = FitTable(Column("tensors", NUMBER, justify="right"), Column("note"),
                 title="notes (matching tensors; not mismatches)")
    for note, n in notes[:limit]:
        t.add_row(_n(n), Text(str(note)))
    if len(notes) > limit:
        t.add_row("", f"… {len(notes) - limit} more distinct notes ({option('json')} lists every tensor)")
    return t


def ranks_table(result: Mapping[str, Any], world_size: int) -> Any:
    """`check` at a world size N without a rank: one row per rank's shard file and its verdict (archviz.checkpoint.ranks'
    result)."""
    from rich.table import Table

    table = Table(title=f"checkpoint check per rank ({world_size} ranks): {result['verdict']}",
                  title_justify="left")
    for col in ("rank", "file", "verdict", "matched", "mismatched", "missing", "checkpoint only"):
        table.add_column(col, justify="right" if col not in ("file", "verdict") else "left")
    for r in result["ranks"]:
        s = r["summary"]
        table.add_row(str(r["rank"]), r["file"], r["verdict"], f"{s['matched']:,}", f"{s['mismatched']:,}",
                      f"{s['missing']:,}", f"{s['checkpoint_only']:,}",
                      style=None if r["verdict"] == "match" else "red")
    return table


__all__ = ["summary_table", "problems_table", "checkpoint_only_table", "notes_table", "ranks_table"]

"""Renderings of a ModelDiff (`archviz diff`): rich tables for the terminal and GitHub workflow commands. Pure
functions of the diff records; they never print and never import torch. Every name and value comes from records
files or model code (untrusted), so control characters are shown escaped, never sent to the terminal."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .. import format as fmt
from ..diff.result import Folded, ModelDiff
from ..files.sanitize import github_data, github_property, printable


def signed(n: int | None) -> str:
    if n is None:
        return "—"
    return f"+{n:,}" if n > 0 else f"{n:,}" if n < 0 else "0"


_KIND_STYLE = {"added": "green", "removed": "red", "renamed": "yellow", "changed": "cyan"}


def _where(f: Folded) -> str:
    a, b = ", ".join(f.a), ", ".join(f.b)
    if f.kind == "added":
        return b
    if f.kind == "removed" or a == b:
        return a
    return f"{a} → {b}"


def _what(f: Folded, esc=printable) -> list[str]:
    """The lines an entry says, each value passed through `esc` (the terminal's `printable`; GitHub's escaping)."""
    if f.kind == "added" or f.kind == "removed":
        return [esc(f.class_name)]
    out = []
    if f.kind == "renamed":
        out.append(f"{esc(f.class_name)}, renamed ({f'by rule {esc(f.rule)}' if f.rule else f'by {f.how}'})")
    for c in f.changes:
        before = "absent" if c.before is None else esc(c.before)
        after = "absent" if c.after is None else esc(c.after)
        if "→" in before or "→" in after or len(before) + len(after) > 60:
            out.append(f"{esc(c.what)}:\n      A {before}\n      B {after}")
        else:
            out.append(f"{esc(c.what)}: {before} → {after}")
    return out


def totals_table(d: ModelDiff) -> Table:
    title = Text.assemble("diff: ", ("identical" if d.identical else "different", "green" if d.identical else "red"),
                          f"\nA = {printable(d.a)}\nB = {printable(d.b)}")
    t = Table(title=title, title_justify="left")
    t.add_column("total", style="bold", no_wrap=True)
    t.add_column("A", justify="right")
    t.add_column("B", justify="right")
    t.add_column("B − A", justify="right")
    for x in d.totals:
        if x.differs or x.name in ("parameters", "modules") or (x.a is None) != (x.b is None):  # one side's: shown
            t.add_row(printable(x.name), fmt.count(x.a), fmt.count(x.b),
                      Text(signed(x.delta), style="" if not x.differs else "bold"))
    t.add_row("matched modules", fmt.count(d.matched), fmt.count(d.matched), "")
    return t


def changes_view(d: ModelDiff, limit: int = 40) -> Text | None:
    """One entry per folded difference: kind, where (path patterns), how many (× 43 layers), class and the
    parameter delta multiplied out; then the changes of one module of them, indented."""
    if not d.folded:
        return None
    n = len({x.a for x in d.nodes} | {p.a for p in d.renamed}) + len(d.added) + len(d.removed)
    t = Text()
    t.append(f"what changed: {len(d.folded):,} {'entry' if len(d.folded) == 1 else 'entries'} for {n:,} "
             f"{'module' if n == 1 else 'modules'} (one entry reads for every module of a kind)\n",
             style="bold")
    for f in d.folded[:limit]:
        t.append(f"{f.kind:8s}", style=_KIND_STYLE[f.kind])
        t.append(" " + printable(_where(f)), style="bold")
        if f.multiplicity:
            t.append(" " + printable(f.multiplicity))
        what = _what(f)
        if f.kind != "changed":
            t.append("  " + printable(what[0]))
            what = what[1:]
        else:
            t.append(f"  {printable(f.class_name)}")
        if f.parameters_each:
            each = signed(f.parameters_each)
            t.append("  " + (f"{each} parameters" if f.count == 1
                             else f"{each} {f.multiplicity or f'× {f.count:,}'} = {signed(f.parameters)} parameters"),
                     style="bold")
        t.append("\n")
        for line in what:
            t.append("    " + "\n".join(printable(x) for x in line.split("\n")) + "\n")
    if len(d.folded) > limit:
        t.append(f"… {len(d.folded) - limit:,} more entries (--limit N, or --json for all)\n", style="dim")
    t.rstrip()
    return t


def diff_view(d: ModelDiff, limit: int = 40) -> Group:
    parts: list = [totals_table(d)]
    ch = changes_view(d, limit)
    if ch is not None:
        parts.append(ch)
    lines = [f"compared: {', '.join(d.compared)}"]
    if d.ignored:
        lines.append(f"ignored: {', '.join(d.ignored)}")
    lines += [printable(n) for n in d.notes]
    parts.append(Text("\n".join(lines), style="dim"))
    return Group(*parts)


# ---------------------------------------------------------------------------------------------------------------------
# GitHub workflow commands


def github_lines(d: ModelDiff, file: str | None = None, limit: int = 50) -> list[str]:
    """One `::error` per folded difference (up to `limit`), then a `::notice` with the verdict and the totals."""
    fprop = f"file={github_property(file)}," if file else ""
    out = []
    for f in d.folded[:limit]:
        msg = f"{f.kind} {github_data(_where(f))}"
        if f.multiplicity:
            msg += f" {github_data(f.multiplicity)}"
        msg += ": " + "; ".join(x.replace("\n", "%0A") for x in _what(f, github_data))
        if f.parameters:
            msg += f" ({signed(f.parameters)} parameters)"
        out.append(f"::error {fprop}title={github_property('archviz diff: ' + f.kind)}::{msg}")
    if len(d.folded) > limit:
        out.append(f"::error {fprop}title=archviz diff::{len(d.folded) - limit} more differences")
    p = next((x for x in d.totals if x.name == "parameters"), None)
    msg = (f"{'identical' if d.identical else 'different'}: A {d.a}, B {d.b}; {d.matched:,} modules matched"
           + (f"; parameters {fmt.count(p.a)} → {fmt.count(p.b)} ({signed(p.delta)})" if p is not None else "")
           + (f"; ignored {', '.join(d.ignored)}" if d.ignored else ""))
    out.append(f"::notice {fprop}title=archviz diff::{github_data(msg)}")
    return out


__all__ = ["diff_view", "totals_table", "changes_view", "github_lines"]

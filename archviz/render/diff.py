"""Renderings of a ModelDiff (`archviz diff`): rich tables for the terminal and GitHub workflow commands. Pure
functions of the diff records; they never print and never import torch. Every name and value comes from records
files or model code (untrusted), so control characters are shown escaped, never sent to the terminal."""

from __future__ import annotations

from typing import Iterator

from rich.console import Console, ConsoleOptions, Group
from rich.text import Text

from .. import format as fmt
from ..diff.result import Folded, ModelDiff, Stack, Summary
from ..diff.summary import lines_only
from ..files.sanitize import github_data, github_property, printable
from .fit import NUMBER, Column, FitTable, shorten_path
from ..errors import option


def signed(n: int | None) -> str:
    if n is None:
        return "—"
    return f"+{n:,}" if n > 0 else f"{n:,}" if n < 0 else "0"


_KIND_STYLE = {"added": "green", "removed": "red", "renamed": "yellow", "changed": "cyan"}


def _where(f: Folded, width: int | None = None) -> str:
    """The entry's paths (A's → B's); with `width`, each path shortened from the middle to fit it (the layer kept)."""
    cut = (lambda p: p) if width is None else (lambda p: shorten_path(p, width))
    a, b = ", ".join(cut(p) for p in f.a), ", ".join(cut(p) for p in f.b)
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
    moved = sum(1 for c in f.changes if c.aspect == "lines")
    if f.kind == "renamed":
        out.append(f"{esc(f.class_name)}, renamed ({f'by rule {esc(f.rule)}' if f.rule else f'by {f.how}'})")
    for c in f.changes:
        if c.aspect == "lines" and moved < len(f.changes):  # where the code sits: counted, not listed
            continue
        before = "absent" if c.before is None else esc(c.before)
        after = "absent" if c.after is None else esc(c.after)
        if "→" in before or "→" in after or len(before) + len(after) > 60:
            out.append(f"{esc(c.what)}:\n      A {before}\n      B {after}")
        else:
            out.append(f"{esc(c.what)}: {before} → {after}")
    if moved and moved < len(f.changes):
        out.append(f"(and {moved} source-line {'move' if moved == 1 else 'moves'}: files and line numbers)")
    return out


def config_line(s: Summary, limit: int = 8) -> str:
    """'config: 3 keys differ: n_layers 4 → 12, dim 64 → 5120, block_size 32 → absent' (the first `limit`)."""
    if not s.config:
        return "config: the same keys and values"
    shown = ", ".join(f"{c.key} {c.a or 'absent'} → {c.b or 'absent'}" for c in s.config[:limit])
    more = f", and {len(s.config) - limit:,} more" if len(s.config) > limit else ""
    n = len(s.config)
    return f"config: {n:,} {'key differs' if n == 1 else 'keys differ'}: {shown}{more}"


def stack_text(x: Stack) -> str:
    """'layers 61 → 43 (A: 3 dense + 58 MoE; B: ...)', 'mtp absent → 1'."""
    a, b = (f"{n:,}" if n else "absent" for n in (x.a, x.b))
    kinds = "; ".join(f"{side}: {k}" for side, k in (("A", x.kinds_a), ("B", x.kinds_b)) if k)
    return f"{x.path} {a} → {b}" if a != b else f"{x.path} {a}" + (f" ({kinds})" if kinds else "")


def summary_view(d: ModelDiff) -> Text | None:
    """What reads first: config keys changed, layers per stack, the headline totals with their deltas, and the
    modules that moved in the source only (counted, not listed)."""
    s = d.summary
    if s is None:
        return None
    t = Text()
    t.append("summary\n", style="bold")
    t.append(printable(config_line(s)) + "\n")
    if s.stacks:
        t.append("layers: " + printable(", ".join(stack_text(x) for x in s.stacks)) + "\n")
    for x in s.totals:
        t.append(f"{printable(x.name)}: {fmt.count(x.a)} → {fmt.count(x.b)} ")
        t.append(f"({signed(x.delta)})\n", style="bold" if x.differs else "")
    if s.lines_only:
        t.append(f"{s.lines_only:,} {'module' if s.lines_only == 1 else 'modules'} moved in the source only "
                 "(files and line numbers): not listed; the JSON output lists them\n", style="dim")
    t.rstrip()
    return t


def _verdict(d: ModelDiff) -> Text:
    return Text.assemble("diff: ", ("identical" if d.identical else "different", "green" if d.identical else "red"),
                         f"\nA = {printable(d.a)}\nB = {printable(d.b)}")


def totals_table(d: ModelDiff) -> FitTable:
    """Every total that differs (and parameters, modules): A, B and B − A, laid out for the console (numbers whole)."""
    t = FitTable(Column("total", style="bold"), Column("A", NUMBER, justify="right"),
                 Column("B", NUMBER, justify="right"), Column("B − A", NUMBER, justify="right", drop=1),
                 title="all totals" if d.summary is not None else _verdict(d))
    for x in d.totals:
        if x.differs or x.name in ("parameters", "modules") or (x.a is None) != (x.b is None):  # one side's: shown
            t.add_row(printable(x.name), fmt.count(x.a), fmt.count(x.b),
                      Text(signed(x.delta), style="" if not x.differs else "bold"))
    t.add_row("matched modules", fmt.count(d.matched), fmt.count(d.matched), "")
    return t


class Changes:
    """The folded differences, laid out when printed: each path shortened from the middle (the layer kept) where one
    would not fit the console's width; numbers and words wrap whole."""

    def __init__(self, d: ModelDiff, folded: list[Folded], limit: int) -> None:
        self.d, self.folded, self.limit = d, folded, limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        yield self.text(max(options.max_width - 10, 18))

    def text(self, path_width: int | None = None) -> Text:
        d, folded, limit = self.d, self.folded, self.limit
        n = len({x.a for x in d.nodes} | {p.a for p in d.renamed}) + len(d.added) + len(d.removed)
        n -= sum(f.count for f in d.folded if lines_only(f))
        t = Text()
        t.append(f"what changed: {len(folded):,} {'entry' if len(folded) == 1 else 'entries'} for {n:,} "
                 f"{'module' if n == 1 else 'modules'} (one entry reads for every module of a kind)\n",
                 style="bold")
        for f in folded[:limit]:
            _entry(t, f, path_width)
        if len(folded) > limit:
            t.append(f"… {len(folded) - limit:,} more entries ({option('limit')} N, or {option('json')} for all)\n",
                     style="dim")
        t.rstrip()
        return t


def _entry(t: Text, f: Folded, path_width: int | None) -> None:
    """One folded difference on `t`: kind, where, how many, class, the parameter delta; its changes indented."""
    t.append(f"{f.kind:8s}", style=_KIND_STYLE[f.kind])
    t.append(" " + printable(_where(f, path_width)), style="bold")
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


def changes_view(d: ModelDiff, limit: int = 40) -> Changes | None:
    """One entry per folded difference: kind, where (path patterns), how many (× 43 layers), class and the
    parameter delta multiplied out; then the changes of one module of them, indented."""
    folded = [f for f in d.folded if not lines_only(f)]
    return Changes(d, folded, limit) if folded else None


def diff_view(d: ModelDiff, limit: int = 40) -> Group:
    first = summary_view(d)
    parts: list = [_verdict(d), first] if first is not None else []
    parts.append(totals_table(d))
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


__all__ = ["Changes", "diff_view", "totals_table", "changes_view", "summary_view", "github_lines", "config_line", "stack_text"]

"""Terminal renderables (rich): pure functions of records. They never print; the CLI does."""

from __future__ import annotations

from typing import Any, Sequence

from rich.console import Group
from rich.table import Table
from .text import Labelled, SafeText as Text  # data shown with its control characters escaped
from rich.tree import Tree

from .. import format as fmt
from ..checkpoint.report import stored_rows
from ..cost.provenance import built_dtype_said, config_said
from .dims import DimNames
from .fit import NUMBER, Column, FitTable
from .views import tied_text
from ..records import ModelRecord, ModuleRecord


def summary_table(record: ModelRecord, stored: bool = True) -> Group:
    """`stored`: the checkpoint the record was checked against, its bytes per stored type (False where the check's
    own table follows and says them)."""
    s = record.summary
    src = record.source
    # Data goes in as Text, never as a markup string: a name or a line of code may hold "[...]" (rich markup)
    t = FitTable(Column("what", NUMBER, style="bold"), Column("value", NUMBER, justify="right"), Column("", style="dim"),
                 title=Text(f"{src.name} · {src.model_class.rsplit('.', 1)[-1]}"), show_header=False)
    said = config_said(src.spec)
    if said:
        t.add_row("config", "", said)
    ws = src.world_size
    per_rank = f" per rank (× {ws} ranks = {fmt.count(s.parameters * ws)})" if ws > 1 else ""
    t.add_row("parameters", fmt.count(s.parameters), fmt.human(s.parameters) + per_rank)
    if s.active_parameters is not None:
        with_emb = "with the input embedding" if s.input_embedding_parameters else ""
        t.add_row("active per token", fmt.count(s.active_parameters),
                  f"{fmt.human(s.active_parameters)} {with_emb}".rstrip())
        if s.input_embedding_parameters:
            without = s.active_without_input_embedding
            t.add_row("  without input embedding", fmt.count(without), fmt.human(without))
        tables = (record.extra("shapes") or {}).get("gathered") or ()
        if tables:
            read, held = sum(x["active"] for x in tables), sum(x["parameters"] for x in tables)
            t.add_row("  lookup tables, rows read", fmt.count(read),
                      f"of {fmt.human(held)} in {len(tables)} table{'s' if len(tables) != 1 else ''}")
    t.add_row("quantization scales", fmt.count(s.scale_elements), "not parameters")
    if s.table_elements:
        t.add_row("integer tables", fmt.count(s.table_elements), "not parameters")
    t.add_row("buffers", fmt.count(s.buffer_elements), f"{fmt.count(s.persistent_buffer_elements)} persistent")
    tied = tied_text(record)
    if tied:
        t.add_row("tied weights", tied[0], Text(tied[1]))
    built = built_dtype_said(src.spec, dict(src.config))
    t.add_row("stored bytes", fmt.count(s.bytes), fmt.nbytes(s.bytes) + (f" · {built}" if built else ""))
    for dtype, n in s.bytes_by_dtype:
        t.add_row(f"  {dtype}", fmt.count(n), fmt.nbytes(n))
    checked = record.extra("checkpoint") if stored else None
    for k, n, bits in stored_rows(checked) if isinstance(checked, dict) else ():
        where = str(checked.get("source") or "").rstrip("/").rsplit("/", 1)[-1]
        t.add_row("checkpoint stores" if k == "stored" else k, fmt.count(n),
                  Text(fmt.nbytes(n) + (f" · {bits:.2f} bits a weight" if bits is not None else f" · {where}")))
    t.add_row("modules", fmt.count(s.modules), "")
    parts: list[Any] = [t]
    if s.moe:
        k = sorted({m.top_k for m in s.moe if m.top_k})
        e = sorted({m.experts for m in s.moe})
        per = sorted({m.per_expert for m in s.moe})
        parts.append(Labelled("MoE: ", f"{len(s.moe)} routed-expert collections · {'/'.join(map(str, e))} experts "
                                       f"· top-{'/'.join(map(str, k))} · {'/'.join(fmt.count(p) for p in per)} "
                                       "parameters each", "cyan"))
    for a in s.active_assumptions:
        parts.append(Labelled("assumed: ", a, "dim"))
    if src.stubbed_imports:
        parts.append(Labelled("stubbed imports: ", stubbed_text(src.stubbed_imports), "yellow"))
    for n in src.notes:
        parts.append(Labelled("note: ", n, "dim"))
    return Group(*parts)


def stubbed_text(names: Sequence[str], whole: int = 8) -> str:
    """The stubbed imports, each package once with the names taken from it counted ("torchvision (24 names)"), so
    that a package whose many attributes a model touched takes one line, not a screen; every name is in JSON."""
    by: dict[str, list[str]] = {}
    for n in names:
        by.setdefault(n.split(".")[0], []).append(n)
    if len(names) <= whole:
        return ", ".join(names)
    return ", ".join(top if len(ns) == 1 and ns[0] == top else
                     f"{top} ({len(ns) - (top in ns)} name{'' if len(ns) - (top in ns) == 1 else 's'})"
                     for top, ns in by.items())


def run_notes(record: ModelRecord) -> Group | None:
    """What built the config (transformers' default for `hf:TYPE`), what the build and the meta forward pass noted
    (neutralised devices, the model's own warnings, the pass's B and T and what it answered from memo), one dim line
    each; None when there is nothing to say."""
    said = config_said(record.source.spec)
    parts: list[Any] = [Labelled("config: ", said, "dim")] if said else []
    parts += [Labelled("note: ", n, "dim") for n in record.source.notes]
    shapes = record.extra("shapes")
    if shapes:
        mode = f" ({shapes['mode']} mode)" if shapes.get("mode") else ""
        used = shapes.get("used", ("B", "T"))  # records from before "used": both
        sizes = [f"{s} = {shapes.get(s)} ({what})" for s, what in (("B", "batch"), ("T", "positions")) if s in used]
        sizes += [f"{s} = {v}" for s, v in (shapes.get("named") or {}).items()]
        parts.append(Labelled(f"meta pass{mode}: ", ", ".join(sizes) if sizes else "every input given with explicit "
                                                                                  "sizes", "dim"))
        parts += [Labelled("meta pass: ", n, "dim") for n in shapes.get("notes") or ()]
    return Group(*parts) if parts else None


def _signature(index: dict[str, ModuleRecord], path: str) -> tuple:
    m = index[path]
    return (m.class_name, m.totals, tuple((t.name, t.shape, t.dtype, t.kind) for t in m.tensors), len(m.children))


def _label(m: ModuleRecord, name: str, count: int = 1) -> Text:
    text = Text()
    text.append(name, style="bold")
    text.append(f" {m.class_name}", style="cyan")
    p = m.totals.parameters
    if count > 1:
        text.append(f"  {fmt.count(p)} × {count} = {fmt.count(p * count)}", style="green")
    else:
        text.append(f"  {fmt.count(p)}", style="green")
    if m.totals.scale_elements:
        text.append(f"  +{fmt.count(m.totals.scale_elements * count)} scales", style="dim")
    if m.calls:
        c = m.calls[0]
        text.append("  in " + ", ".join(fmt.shape(s) for s in c.inputs) + " → out " +
                    ", ".join(fmt.shape(s) for s in c.outputs), style="magenta")
    if m.called is False:
        text.append("  (not called by forward)", style="dim")
    return text


def module_tree(record: ModelRecord, path: str = "", depth: int = 3) -> Tree:
    """The subtree at `path`, runs of identical siblings folded (`experts.0–255 × 256`), `depth` levels deep."""
    index = record.index()
    root = index[path]
    tree = Tree(_label(root, path or "(model)"))

    def add(node: Tree, m: ModuleRecord, level: int) -> None:
        if level >= depth:
            if m.children:
                node.add(Text(fmt.hidden_children(len(m.children)), style="dim"))
            return
        children = list(m.children)
        i = 0
        while i < len(children):
            sig = _signature(index, children[i])
            j = i + 1
            numbered = index[children[i]].name.isdigit()
            while numbered and j < len(children) and _signature(index, children[j]) == sig:
                j += 1
            first = index[children[i]]
            if j - i > 1:
                last = index[children[j - 1]].name
                child = node.add(_label(first, f"{first.name}–{last}", j - i))
            else:
                child = node.add(_label(first, first.name))
            for t in first.tensors:
                child.add(_tensor_label(t))
            add(child, first, level + 1)
            i = j

    for t in root.tensors:
        tree.add(_tensor_label(t))
    add(tree, root, 0)
    return tree


def _tensor_label(t: Any) -> Text:
    text = Text()
    text.append(f"{t.name}", style="yellow")
    text.append(f" {t.kind} {fmt.shape(t.shape)} {t.dtype}", style="dim")
    if t.packing:
        text.append(f" ({t.packing}: {fmt.shape(t.logical_shape or ())})", style="dim")
    text.append(f"  {fmt.count(t.elements)}")
    if t.alias_of:
        text.append(f"  alias of {t.alias_of}", style="dim")
    if t.scales:
        text.append(f"  scales {t.scales}", style="dim")
    return text


def module_card(record: ModelRecord, path: str) -> Group:
    """One module in full: class, source lines, tensors, shapes, call sites."""
    m = record.module(path)
    t = Table(show_header=False, title=Text(path or "(model)"), title_justify="left")
    t.add_column("k", style="bold")
    t.add_column("v")

    def row(key: str, value: str) -> None:
        t.add_row(key, Text(value))  # code, paths and shapes hold "[...]": never read as rich markup

    row("class", f"{m.class_name} ({m.class_module})")
    if m.class_span:
        row("source", f"{m.class_span.file}:{m.class_span.start}–{m.class_span.end}")
    if m.forward_span:
        row("forward", f"{m.forward_span.file}:{m.forward_span.start}–{m.forward_span.end}")
    row("parameters", fmt.count(m.totals.parameters))
    for c in m.call_sites:
        row("called as", f"{c.code} · {c.file}:{c.line}")
    names, local = DimNames.for_record(record), dict(m.dims)  # widths named as on the site
    for call in m.calls[:4]:
        row("in", ", ".join(named_shape(s, names, local) for s in call.inputs))
        row("out", ", ".join(named_shape(s, names, local) for s in call.outputs))
    for a in m.assumptions:
        row("assumed", a)
    return Group(t)


from .grouped import grouped_tree, named_shape  # noqa: E402,F401

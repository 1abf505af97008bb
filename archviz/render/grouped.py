"""The grouped tree for `archviz inspect` (rich): kinds with counts, multiplicity paths and totals. Pure: no torch."""

from __future__ import annotations

from rich.console import Group

from .text import SafeText as Text  # data shown with its control characters escaped

from .. import format as fmt
from .dims import DimNames
from .fit import NUMBER, Column, FitTable
from ..group import grouping, layer_membership
from ..records import ModelRecord


def _numbers(node: dict, text: Text) -> None:
    factors = node["multiplicity"]
    if factors:
        text.append(f"  {fmt.count(node['per_instance'])}", style="green")
        for f in factors:
            text.append(f" × {f['factor']:,} {f['name']}", style="green")
        text.append(f" = {fmt.count(node['total'])}", style="bold green")
    else:
        text.append(f"  {fmt.count(node['total'])}", style="bold green")
    if node.get("scale_elements_total"):
        text.append(f"  +{fmt.count(node['scale_elements_total'])} scales", style="dim")


def node_label(node: dict) -> Text:
    """`title  class  per_instance × factors = total`."""
    text = Text()
    text.append(node["title"], style="bold")
    cls = node.get("class_name")
    if cls and not node["title"].endswith(f"({cls})"):
        text.append(f"  {cls}", style="cyan")
    elif node.get("segment") == "gather":  # a names-file gathering: say which children it holds
        text.append("  " + " + ".join(node.get("items") or ()), style="cyan")
    elif node.get("virtual"):
        text.append("  group", style="cyan")
    _numbers(node, text)
    return text


def named_shape(shape: tuple, names: DimNames, local: dict) -> str:
    """`[B, T, hidden_size=7168]`: a width with a name as name=width, symbols bare."""
    out = []
    for d in shape:
        n = names.name(d, local) if isinstance(d, int) else None
        out.append(f"{n.replace(' ', '')}={d}" if n else str(d))  # one word: it wraps whole
    return "[" + ", ".join(out) + "]"


def _shapes(calls: tuple, names: DimNames, local: dict) -> str:
    """`[B, T, hidden=64] → [B, T, hidden=64]` of the node's first call, compactly: at most two inputs and two
    outputs shown, and how many other call shapes there are."""
    if not calls:
        return ""
    c = calls[0]

    def some(shapes: tuple) -> str:
        shown = ", ".join(named_shape(s, names, local) for s in shapes[:2])
        return shown + (f", +{len(shapes) - 2}" if len(shapes) > 2 else "") if shapes else "()"

    text = f"{some(c.inputs)} → {some(c.outputs)}"
    other = len({(k.inputs, k.outputs) for k in calls}) - 1
    if other:
        text += f" (+{other} other call shape{'' if other == 1 else 's'})"
    return text


def _title(node: dict) -> str:
    """The node's title without the class it ends with (the class column shows it)."""
    title, cls = node["title"], node.get("class_name")
    if cls and title.endswith(f" ({cls})"):
        return title[:-len(cls) - 3]
    return title


def _class(node: dict) -> str:
    if node.get("segment") == "gather":  # a names-file gathering: which children it holds
        return " + ".join(node.get("items") or ())
    return node.get("class_name") or ("group" if node.get("virtual") else "")


def grouped_tree(record: ModelRecord, path: str = "", depth: int = 3) -> Group:
    """The grouped tree below the node standing for `path` (the model when ""), `depth` levels deep, as a table
    laid out for the console (archviz.render.fit): module (indented by level), class, shapes in → out with their
    dims named, parameters per instance, × multiplicity, total. For an item of the main layer list, lines above it
    say which group and kind the layer belongs to."""
    g = grouping(record)
    nodes = g["nodes"]
    by_id = {n["id"]: n for n in nodes}
    entry = g["by_path"].get(path) if path else None
    start = by_id[entry["node"]] if entry else nodes[0]
    index = record.index()
    names = DimNames.for_record(record)
    # at 80 columns the class goes before the shapes (the node's own class heads the page), which keep a readable
    # width: `[B, 49, 768] →` a line
    table = FitTable(Column("module"), Column("class", style="cyan", drop=1),
                     Column("shape in → out", style="magenta", drop=3, least=16),
                     Column("parameters", NUMBER, justify="right", style="green"),
                     Column("×", NUMBER, style="green"),
                     Column("total", NUMBER, justify="right", style="bold green", drop=2))

    def row(node: dict, level: int) -> None:
        first = index.get(node["paths"][0]) if node.get("paths") else None
        shapes = _shapes(first.calls, names, dict(first.dims)) if first is not None else ""
        factors = node["multiplicity"]
        mult = " × ".join(f"{f['factor']:,} {f['name']}".rstrip() for f in factors)
        total = Text(fmt.count(node["total"]))
        if node.get("scale_elements_total"):  # on a line of its own: the total stays whole in a narrow column
            total = Text().line(fmt.count(node["total"])).append(f"+{fmt.count(node['scale_elements_total'])} "
                                                                 "scales", style="dim")
        table.add_row(Text("  " * level + _title(node), style="bold" if not level else None), Text(_class(node)),
                      Text(shapes), fmt.count(node["per_instance"]) if factors else fmt.count(node["total"]),
                      Text(mult), total)

    def add(node: dict, level: int) -> None:
        if level > depth:
            return
        row(node, level)
        if level == depth:
            if node["children"]:
                table.add_row(Text("  " * (level + 1) + fmt.hidden_children(len(node["children"])), style="dim"))
            return
        for cid in node["children"]:
            add(by_id[cid], level + 1)

    parts: list = []
    if path and entry is not None:
        where = layer_membership(record, path)
        if where:
            parts.append(Text(where, style="yellow"))
        n = len(start["paths"])
        if path not in start["paths"]:  # a list folded into the run of its items
            parts.append(Text(f"{path}: a list of {start['count']:,} folded into one node, "
                              f"{fmt.count(entry['total'])} in all", style="dim"))
        elif n > 1:
            parts.append(Text(f"{path} is one of {n:,} modules folded into this node", style="dim"))
        if start["breadcrumb"][:-1]:
            parts.append(Text(" › ".join(start["breadcrumb"]), style="dim"))
    add(start, 0)
    return Group(*parts, table)


__all__ = ["grouped_tree", "named_shape", "node_label"]

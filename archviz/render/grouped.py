"""The grouped tree for `archviz inspect` (rich): kinds with counts, multiplicity paths and totals. Pure: no torch."""

from __future__ import annotations

from .text import SafeText as Text  # data shown with its control characters escaped
from rich.tree import Tree

from .. import format as fmt
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


def _shapes(calls: tuple, text: Text) -> None:
    """`  [B, T, 64] → [B, T, 64]` of the node's first call, compactly: at most two inputs and two outputs shown,
    and how many other call shapes there are."""
    if not calls:
        return
    c = calls[0]

    def some(shapes: tuple) -> str:
        shown = ", ".join(fmt.shape(s) for s in shapes[:2])
        return shown + (f", +{len(shapes) - 2}" if len(shapes) > 2 else "") if shapes else "()"

    text.append(f"  {some(c.inputs)} → {some(c.outputs)}", style="magenta")
    other = len({(k.inputs, k.outputs) for k in calls}) - 1
    if other:
        text.append(f" (+{other} other call shape{'' if other == 1 else 's'})", style="dim")


def grouped_tree(record: ModelRecord, path: str = "", depth: int = 3) -> Tree:
    """The grouped tree below the node standing for `path` (the model when ""), `depth` levels deep. For an item of
    the main layer list, the root line first says which group and kind the layer belongs to."""
    g = grouping(record)
    nodes = g["nodes"]
    by_id = {n["id"]: n for n in nodes}
    entry = g["by_path"].get(path) if path else None
    start = by_id[entry["node"]] if entry else nodes[0]
    index = record.index()

    def label_of(node: dict) -> Text:  # the node's numbers, and the shapes of the first module it stands for
        text = node_label(node)
        first = index.get(node["paths"][0]) if node.get("paths") else None
        if first is not None:
            _shapes(first.calls, text)
        return text

    label = label_of(start)
    if path and entry is not None:
        shown = Text()
        where = layer_membership(record, path)
        if where:
            shown.line(where, style="yellow")
        n = len(start["paths"])
        if path not in start["paths"]:  # a list folded into the run of its items
            shown.line(f"{path}: a list of {start['count']:,} folded into one node, {fmt.count(entry['total'])} "
                       "in all", style="dim")
        elif n > 1:
            shown.line(f"{path} is one of {n:,} modules folded into this node", style="dim")
        if start["breadcrumb"][:-1]:
            shown.append(" › ".join(start["breadcrumb"][:-1]) + " › ", style="dim")
        shown.append_text(label)
        label = shown
    tree = Tree(label)

    def add(branch: Tree, node: dict, level: int) -> None:
        if level >= depth:
            if node["children"]:
                branch.add(Text(fmt.hidden_children(len(node["children"])), style="dim"))
            return
        for cid in node["children"]:
            child = by_id[cid]
            add(branch.add(label_of(child)), child, level + 1)

    add(tree, start, 0)
    return tree


__all__ = ["grouped_tree", "node_label"]

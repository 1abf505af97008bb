"""`archviz inspect`'s flow tree: a module's forward folded as the site draws it (`flowfold`), printed as a tree with
shapes -- its inputs, each child call (whose own forward opens below it, `depth` levels deep), each function call
(whose ops open below it), each op of its own, its output; each line says which lines above it consumed."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from rich.tree import Tree

from .dims import DimNames
from ..records import ModelRecord, ModuleRecord
from .flowfold import FlowNaming, Item, flow_items, function_parts


def flow_tree(record: ModelRecord, path: str = "", depth: int = 2) -> Tree:
    """The folded forward of the module at `path`; a child's forward opens below its call while `depth` allows."""
    index = record.index()
    names = DimNames.for_record(record)
    g = record.extra("grouping") or {}
    by_path, by_id = g.get("by_path") or {}, {n["id"]: n for n in g.get("nodes") or ()}
    m = index[path]
    tree = Tree(Text.assemble((path or "(model)", "bold"), f" ({m.class_name}) forward"))
    _add(tree, m, index, names, by_path, by_id, depth)
    return tree


def _add(branch: Tree, m: ModuleRecord, index: Any, names: DimNames, by_path: dict, by_id: dict, depth: int) -> None:
    flow = m.flow
    if flow is None or not flow.steps:
        branch.add(Text("no forward recorded (a leaf, or no shape pass)", style="dim"))
        return
    local = dict(m.dims)

    def shape(dims: Any) -> str:
        return names.shape(dims, local, words=False)

    prefix = f"{m.path}." if m.path else ""

    def full(rel: str) -> str:
        return rel[1:] if rel.startswith("/") else prefix + rel

    def node_of(rel: str) -> str | None:  # a kind per child: its grouped node, else its class
        p = full(rel)
        entry = by_path.get(p)
        if entry is not None:
            return entry["node"]
        child = index.get(p)
        return child.class_name if child is not None else None

    def node_info(nid: str | None, rels: list[str]) -> tuple[str, str | None, str]:
        node = by_id.get(nid)
        child = index.get(full(rels[0])) if rels else None
        cls = child.class_name if child is not None else ""
        return ((node or {}).get("title") or cls or (rels[0] if rels else ""), None, cls)

    call = m.calls[0] if m.calls else None
    items, cut = flow_items(m, flow, FlowNaming(shape, node_of, node_info),
                            inputs=tuple(shape(s) for s in call.inputs) if call else (),
                            outputs=tuple(shape(s) for s in call.outputs) if call else ())
    parts = {f"#flow-fn-{p['step']}": p for p in function_parts(flow, shape)}
    for n, it in enumerate(items):
        sub = branch.add(_line(n, it, items))
        if it.kind == "fn" and it.href in parts:
            for k, op in enumerate(parts[it.href]["items"]):
                sub.add(_line(k, op, parts[it.href]["items"]))
        elif it.kind == "call" and depth > 1 and it.path in index and index[it.path].flow is not None:
            _add(sub, index[it.path], index, names, by_path, by_id, depth - 1)
    if cut:
        branch.add(Text(f"{cut} more steps not shown", style="dim"))


_STYLES = {"in": "yellow", "out": "yellow", "call": "bold cyan", "fold": "bold cyan", "fn": "bold magenta", "op": ""}


def _line(n: int, it: Item, items: list[Item]) -> Text:
    """`3 q_b_proj (Linear) [B, T, 32768]  ← 2 q_a_norm`: the item's number, its text, what it consumed."""
    text = Text(f"{n + 1} ", style="dim")
    if it.kind == "fn":
        text.append(it.label, style=_STYLES["fn"])
        text.append(f" · {it.sub}  {it.cls}", style="dim")
    elif it.kind in ("call", "fold"):
        text.append(it.label, style=_STYLES[it.kind])
        what = it.sub if it.kind == "fold" else it.cls or it.sub
        text.append(f" ({what})" if what else "", style="dim")
    else:
        text.append(("in " if it.kind == "in" else "") + it.label, style=_STYLES.get(it.kind, ""))
    if it.kind == "out":
        text.append(f" {it.sub}", style="magenta")
    elif it.shape or (it.kind == "in" and it.sub):
        text.append(f" {it.shape or it.sub}", style="magenta")
    if it.inputs:
        text.append("  ← " + ", ".join(f"{j + 1} {items[j].label}" + (f" via {it.via[j]}" if j in it.via else "")
                                       for j in it.inputs), style="dim")
    return text

"""A node page's dataflow picture: its module's forward folded (`archviz.render.flowfold`: a box per child call,
linking to the child's node page, per function call, expanding to its ops, per op of its own), laid out by
`flowlayout`; and which module's forward the overview draws.
"""

from __future__ import annotations

from typing import Any

from ... import format as fmt
from ...records import ModuleRecord
from ..flowfold import FlowNaming, flow_items, function_parts
from .flowlayout import picture


def overview_module(record: Any, index: dict[str, ModuleRecord]) -> ModuleRecord | None:
    """The module whose forward runs the main layer list (the list's nearest ancestor with a flow), else the root."""
    from ...errors import ArchvizError
    from ...group.layers import main_layer_list

    root = index.get("")
    try:
        path = main_layer_list(record).path
    except ArchvizError:
        return root
    while path:
        path = path.rpartition(".")[0]
        m = index.get(path)
        if m is not None and m.flow is not None:
            return m
    return root


def flow_picture(ms: Any, n: Any, m: ModuleRecord, mroot: str, title: str, collapse: int = 0) -> dict[str, Any] | None:
    """The picture of `m`'s forward for node `n`'s page (`mroot`: the page's way back to the model's folder), or
    None where the records hold no flow (no shape pass, a leaf, a repeating group node)."""
    flow = m.flow
    if flow is None or not flow.steps or getattr(n, "virtual", False):
        return None
    local = ms.widths(m)
    near = [d for c in m.calls[:1] for s in (*c.inputs, *c.outputs) for d in s]  # the module's own in and out

    bare: dict[int, str] = {}  # sizes the short labels leave bare though several fields equal them: the legend

    def shape(dims: Any) -> str:
        bare.update(ms.names.left_bare(dims, local, near))
        return ms.names.shape(dims, local, words=False, near=near)

    prefix = f"{m.path}." if m.path else ""

    def node_of(rel: str) -> str | None:
        return ms.node_of.get(rel[1:] if rel.startswith("/") else prefix + rel)

    def node_info(nid: str | None, rels: list[str]) -> tuple[str, str | None, str]:
        if nid is None:
            return (rels[0] if rels else "", None, "")
        node = ms.nodes[nid]
        t = (ms.annotations.get(nid) or {}).get("title") or node.title
        return (t, mroot + node.file, node.class_name)

    def group_of(nids: list[str | None]) -> str | None:
        parents = {ms.nodes[x].parent for x in nids if x is not None}
        if len(parents) != 1 or None in parents:
            return None
        (p,) = parents
        return None if p == ms.root or p == ms.node_of.get(m.path) else mroot + ms.nodes[p].file

    call = m.calls[0] if m.calls else None
    items, cut = flow_items(m, flow, FlowNaming(shape, node_of, node_info, group_of),
                            inputs=tuple(shape(s) for s in call.inputs) if call else (),
                            outputs=tuple(shape(s) for s in call.outputs) if call else (), collapse=collapse)
    boxes = sum(1 for i in items if i.kind in ("call", "fold"))
    fns = sum(1 for i in items if i.kind == "fn")
    ops = sum(1 for i in items if i.kind == "op")
    label = f"Dataflow of {title}: {boxes} module box{'' if boxes == 1 else 'es'}, {fns} function" \
            f"{'' if fns == 1 else 's'} and {ops} op{'' if ops == 1 else 's'} in forward order"
    parts = [{**p, "picture": picture(p["items"], f"Ops inside {p['name']}", ident=f"fn{p['step']}")}
             for p in function_parts(flow, shape)]
    return {"picture": picture(items, label), "label": label, "steps": [i.as_list_item() for i in items],
            "cut": cut, "truncated": flow.truncated, "functions": parts,
            "sizes": [{"size": fmt.count(d), "names": bare[d]} for d in sorted(bare)]}

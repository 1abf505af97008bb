"""What a dataflow picture shows: a module's forward (`ModuleRecord.flow`) as boxes in forward order -- its inputs,
each child call (a box linking to the child's node page), each op of its own (a pill with its output shape), its
output -- and the edges of which value each consumed. Runs of calls to list items of one kind ("layers.3" ...
"layers.60", all the MoE layer's node) fold into one box, "layers 3–60 · MoE layer ×58", and runs of a repeating
pattern of kinds fold by their period, so a 61-layer model reads as a few boxes. Laid out by `flowlayout`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...records import Flow, FlowStep, ModuleRecord
from .flowlayout import Item, render_svg

MAX_ITEMS = 160  # boxes drawn per picture; a longer forward is cut with a note (the list below says how many)
MAX_PERIOD = 8  # the longest repeating pattern of kinds folded as one


@dataclass
class _Run:
    """Steps [start, end] of the flow folded into one box."""
    start: int
    end: int
    calls: list[int] = field(default_factory=list)  # the call steps in it
    period: int = 1


def _list_item(name: str) -> tuple[str, int] | None:
    head, _, tail = name.rpartition(".")
    return (head, int(tail)) if head and tail.isdigit() else None


def _runs(steps: tuple[FlowStep, ...], node_of: Any) -> list[_Run]:
    """Runs of consecutive calls to items of one list whose kinds (nodes) repeat with some period <= MAX_PERIOD,
    the ops between two calls the same all along (they fold in with them)."""
    calls = [i for i, s in enumerate(steps) if s.kind == "call" and _list_item(s.name)]
    out: list[_Run] = []
    a = 0
    while a < len(calls):
        # the longest chain from calls[a]: same list, only ops between, the same ops each time
        chain = [calls[a]]
        head = _list_item(steps[calls[a]].name)[0]  # type: ignore[index]
        gap: tuple | None = None
        b = a + 1
        while b < len(calls):
            prev, cur = calls[b - 1], calls[b]
            item = _list_item(steps[cur].name)
            between = tuple(s.name for s in steps[prev + 1:cur])
            if item is None or item[0] != head or any(s.kind != "op" for s in steps[prev + 1:cur]) or \
                    (gap is not None and between != gap):
                break
            gap = between
            chain.append(cur)
            b += 1
        kinds = [node_of(steps[i].name) for i in chain]
        k = 0
        while k < len(chain):
            best = (1, 1)  # (period, repeats)
            for p in range(1, MAX_PERIOD + 1):
                unit = kinds[k:k + p]
                if len(unit) < p or None in unit:
                    break
                r = 1
                while kinds[k + r * p:k + (r + 1) * p] == unit:
                    r += 1
                if r >= 2 and r * p > best[0] * best[1] and (p == 1 or len(set(unit)) > 1):
                    best = (p, r)
            p, r = best
            n = p * r
            if r >= 2:
                out.append(_absorb(steps, _Run(chain[k], chain[k + n - 1], chain[k:k + n], p), gap or ()))
            k += n
        a = b
    return out


def _absorb(steps: tuple[FlowStep, ...], run: _Run, gap: tuple) -> _Run:
    """The ops between two items are the end of one item's part and the start of the next's: the fold takes in
    the same ops before its first item and after its last, split where both sides match."""
    for s in range(len(gap) + 1):
        before, after = gap[s:], gap[:s]
        a, b = run.start - len(before), run.end + 1 + len(after)
        if a < 0 or b > len(steps):
            continue
        if all(x.kind == "op" for x in steps[a:run.start]) and tuple(x.name for x in steps[a:run.start]) == before \
                and all(x.kind == "op" for x in steps[run.end + 1:b]) and \
                tuple(x.name for x in steps[run.end + 1:b]) == after:
            return _Run(a, b - 1, run.calls, run.period)
    return run


def flow_items(m: ModuleRecord, flow: Flow, *, shape: Any, node_of: Any, node_info: Any,
               inputs: tuple[str, ...], outputs: tuple[str, ...], collapse: int = 0,
               group_of: Any = None) -> tuple[list[Item], int]:
    """The boxes of `m`'s forward, folded (pure: `node_of(rel)` names a child's node id, `node_info(nid, paths)`
    gives its (title, href, class name) and `shape(dims)` writes a shape); and how many steps were cut. With
    `collapse`, a run of more ops than that between two calls is one pill (the overview: masks and positions)."""
    steps = flow.steps
    runs: dict[int, _Run] = {}
    last = -1
    for r in sorted(_runs(steps, node_of), key=lambda r: r.start):  # ops two folds both took in go to the first
        r.start = max(r.start, last + 1)
        if r.start <= r.calls[0]:
            runs[r.start] = r
            last = r.end
    items: list[Item] = []
    at: dict[int, int] = {}  # flow index (step k, input -1 - i) -> item index
    used_inputs = sorted({j for s in steps for j in s.inputs if j < 0} | {j for j in flow.outputs if j < 0},
                         reverse=True)
    for j in used_inputs:
        i = -1 - j
        at[j] = len(items)
        named = flow.inputs[i] if i < len(flow.inputs) else None
        items.append(Item("in", named or ("input" if len(inputs) <= 1 and i == 0 else f"input {i}"),
                          inputs[i] if i < len(inputs) else ""))
    k = 0
    cut = 0
    while k < len(steps):
        if len(items) >= MAX_ITEMS:
            cut = len(steps) - k
            break
        run = runs.get(k)
        if run is not None:
            members = [steps[c].name for c in run.calls]
            numbers = [_list_item(n)[1] for n in members]  # type: ignore[index]
            head = _list_item(members[0])[0]  # type: ignore[index]
            span = f"{numbers[0]}–{numbers[-1]}" if numbers == list(range(numbers[0], numbers[-1] + 1)) \
                else ", ".join(map(str, numbers[:3])) + ("…" if len(numbers) > 3 else "")
            kinds = [node_of(n) for n in members[:run.period]]
            infos = [node_info(nid, members[i:i + 1]) for i, nid in enumerate(kinds)]
            reps = len(members) // run.period
            # a group node's title may carry its own count ("58 MoE layers"): the box says how many it folds
            names = [re.sub(r"^\d[\d,]*\s+", "", i[0]) for i in infos]
            unit: list[list] = []  # the period's kinds, run-length: "KV-source layer → reusing layers ×5"
            for x in names:
                if unit and unit[-1][0] == x:
                    unit[-1][1] += 1
                else:
                    unit.append([x, 1])
            title = " → ".join(x + (f" ×{c}" if c > 1 else "") for x, c in unit)
            label = f"{head} {span}"
            sub = f"{title} ×{reps}" if run.period == 1 else f"({title}) ×{reps}"
            href = infos[0][1]
            if run.period > 1 and group_of is not None:  # the node of the repeating group, where there is one
                href = group_of(kinds) or href
            ins = sorted({j for s in steps[run.start:run.end + 1] for j in s.inputs
                          if j < run.start or j > run.end})
            item = Item("fold", label, sub, href=href, cls=infos[0][2] if run.period == 1 else "",
                        path=f"{m.path}.{members[0]}" if m.path else members[0],
                        inputs=[at[j] for j in ins if j in at],
                        shape=shape(steps[run.end].shapes[0]) if steps[run.end].shapes else "")
            for j in range(run.start, run.end + 1):
                at[j] = len(items)
            items.append(item)
            k = run.end + 1
            continue
        s = steps[k]
        end = k
        while collapse and end + 1 < len(steps) and steps[end + 1].kind == "op" and end + 1 not in runs:
            end += 1
        if s.kind == "op" and collapse and end - k + 1 > collapse:
            ops = steps[k:end + 1]
            names = list(dict.fromkeys(x.name.lstrip("_") for x in ops))
            ins = sorted({j for x in ops for j in x.inputs if j < k})
            last = ops[-1]
            item = Item("op", f"{len(ops)} ops ({', '.join(names[:3])}{', …' if len(names) > 3 else ''})", "",
                        inputs=[at[j] for j in ins if j in at], shape=shape(last.shapes[0]) if last.shapes else "")
            for j in range(k, end + 1):
                at[j] = len(items)
            items.append(item)
            k = end + 1
            continue
        ins = [at[j] for j in s.inputs if j in at]
        shp = shape(s.shapes[0]) if s.shapes else ""
        if len(s.shapes) > 1:
            shp = f"{len(s.shapes)} × {shp}" if len(set(s.shapes)) == 1 else f"{shp} + {len(s.shapes) - 1} more"
        if s.kind == "call":
            name = s.name[1:] if s.name.startswith("/") else s.name
            nid = node_of(s.name)
            title, href, cls = node_info(nid, [s.name]) if nid is not None else (name, None, "")
            path = name if s.name.startswith("/") or not m.path else f"{m.path}.{name}"
            item = Item("call", name, title if title != name else "", href=href, cls=cls, path=path, inputs=ins,
                        shape=shp)
        else:
            op = s.name.lstrip("_") or s.name
            item = Item("op", op + (f" ×{s.count}" if s.count > 1 else ""), "", inputs=ins, shape=shp)
        at[k] = len(items)
        items.append(item)
        k += 1
    out = Item("out", "output", ", ".join(outputs), inputs=[at[j] for j in flow.outputs if j in at])
    items.append(out)
    return items, cut


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
    local = dict(m.dims)

    def shape(dims: Any) -> str:
        return ms.names.shape(dims, local, words=False)

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
    items, cut = flow_items(m, flow, shape=shape, node_of=node_of, node_info=node_info,
                            inputs=tuple(shape(s) for s in call.inputs) if call else (),
                            outputs=tuple(shape(s) for s in call.outputs) if call else (), collapse=collapse,
                            group_of=group_of)
    boxes = sum(1 for i in items if i.kind in ("call", "fold"))
    ops = sum(1 for i in items if i.kind == "op")
    label = f"Dataflow of {title}: {boxes} module box{'' if boxes == 1 else 'es'} and {ops} op" \
            f"{'' if ops == 1 else 's'} in forward order"
    return {"svg": render_svg(items, label), "label": label, "steps": [i.as_list_item() for i in items],
            "cut": cut, "truncated": flow.truncated}

"""A module's forward (`ModuleRecord.flow`) folded into what a reader reads, for every renderer that draws it (the
site's dataflow pictures, `archviz inspect`'s flow): its inputs (the tensors of one argument with one shape as one),
each child call, each run of ops inside one call of a Python function (one item named after it, expanding to the
ops), each op of its own, its output -- and which value each consumed. A chain of layout ops (view, transpose, ...)
the forward runs itself folds into the edge it labels. Runs of calls to list items of one kind ("layers.3" ...
"layers.60", all the MoE layer's node) fold into one item, "layers 3–60 · MoE layer ×58", and runs of a repeating
pattern of kinds fold by their period, so a 61-layer model reads as a few items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..records import Flow, FlowStep, ModuleRecord

MAX_ITEMS = 160  # boxes drawn per picture; a longer forward is cut with a note (the list below says how many)
MAX_PERIOD = 8  # the longest repeating pattern of kinds folded as one


@dataclass
class Item:
    kind: str  # "in" | "call" | "fold" | "fn" | "op" | "out"
    label: str
    sub: str
    href: str | None = None
    cls: str = ""
    path: str = ""
    inputs: list[int] = field(default_factory=list)  # items whose values it consumes
    shape: str = ""
    via: dict[int, str] = field(default_factory=dict)  # input item -> the layout ops on that edge ("view → [..]")

    def lines(self) -> list[str]:
        if self.kind == "fn":
            return [f"{self.label} · {self.sub}", " ".join(x for x in (self.cls, self.shape) if x)]
        if self.kind in ("call", "fold"):
            first = self.label + (f" · {self.sub}" if self.sub and self.kind == "call" and
                                  not self.sub.startswith(self.label) else "")
            second = " ".join(x for x in ((self.sub if self.kind == "fold" else ""), self.cls, self.shape) if x)
            return [first, second] if second else [first]
        if self.kind == "op":
            return [f"{self.label} → {self.shape}" if self.shape else self.label]
        return [f"{self.label} {self.sub}".strip()]

    def as_list_item(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": " · ".join(self.lines()), "href": self.href, "path": self.path,
                "inputs": self.inputs, "via": [self.via[i] for i in self.inputs if i in self.via]}


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


# Ops that only lay a value out anew: outside a function they fold into the edge from the value's maker
LAYOUT_OPS = frozenset(("view", "reshape", "_reshape_alias", "_unsafe_view", "transpose", "permute", "contiguous",
                        "unsqueeze", "squeeze", "flatten", "unflatten", "t", "expand", "as_strided", "alias",
                        "clone", "detach"))


def _outermost(flow: Flow, fn: int) -> int:
    """The function call the forward itself made that `fn` ran inside (itself where the forward called it)."""
    funcs = flow.functions
    for _ in range(64):
        if fn < 0 or fn >= len(funcs) or funcs[fn].parent < 0:
            return fn
        fn = funcs[fn].parent
    return fn


def _function_runs(flow: Flow) -> dict[int, int]:
    """step index -> the last step of the run of ops inside one call of a function the forward made, where a run
    starts there (a run of one op of torch's own functions, F.silu, stays an op)."""
    steps = flow.steps
    out: dict[int, int] = {}
    k = 0
    while k < len(steps):
        s = steps[k]
        if s.kind != "op" or s.function < 0:
            k += 1
            continue
        root = _outermost(flow, s.function)
        end = k
        while end + 1 < len(steps) and steps[end + 1].kind == "op" and steps[end + 1].function >= 0 and \
                _outermost(flow, steps[end + 1].function) == root:
            end += 1
        if end > k or not flow.functions[root].file.startswith("torch/"):
            out[k] = end
        k = end + 1
    return out


def _short_file(file: str) -> str:
    return file.rsplit("/", 1)[-1]


def _input_groups(flow: Flow, used: list[int], inputs: tuple[str, ...]) -> list[tuple[str, str, list[int]]]:
    """The module inputs the picture draws, as (label, shape, flow indices): the tensors of one argument that have
    one shape drawn as one box, "position_embeddings[0–1] ×2", in the order their first one comes."""
    groups: dict[tuple[str, str], tuple[list[str], list[int]]] = {}
    for j in used:
        i = -1 - j
        named = flow.inputs[i] if i < len(flow.inputs) else None
        name = named or ("input" if len(inputs) <= 1 and i == 0 else f"input {i}")
        shape = inputs[i] if i < len(inputs) else ""
        stem = name.partition("[")[0] if named and name.endswith("]") else name
        names, js = groups.setdefault((stem, shape), ([], []))
        names.append(name)
        js.append(j)
    return [(_names_text(names), shape, js) for (_, shape), (names, js) in groups.items()]


def _names_text(names: list[str]) -> str:
    """The tensors of one argument: "a[0]", "a[1]", "a[2]" -> "a[0–2] ×3" (one name stays itself)."""
    if len(names) == 1:
        return names[0]
    idx = [n.partition("[")[2][:-1] for n in names]
    if all(i.isdigit() for i in idx):
        nums = [int(i) for i in idx]
        inner = f"{nums[0]}–{nums[-1]}" if nums == list(range(nums[0], nums[-1] + 1)) else ",".join(idx)
    else:
        inner = ",".join(idx)
    return f"{names[0].partition('[')[0]}[{inner}] ×{len(names)}"


def function_parts(flow: Flow, shape: Any) -> list[dict[str, Any]]:
    """What each function box expands to: per run of ops in one function call, its name, where it is defined and
    called from, and the ops inside (with the nested function each ran in) as a small picture of their own."""
    parts = []
    for k, end in sorted(_function_runs(flow).items()):
        steps = flow.steps[k:end + 1]
        root = flow.functions[_outermost(flow, steps[0].function)]
        items: list[Item] = []
        at: dict[int, int] = {}
        outside = sorted({j for s in steps for j in s.inputs if j < k})
        for j in outside:
            at[j] = len(items)
            src = flow.steps[j] if j >= 0 else None
            if src is None:
                label = flow.inputs[-1 - j] if -1 - j < len(flow.inputs) and flow.inputs[-1 - j] else "input"
            else:
                label = src.name.lstrip("_") if src.kind == "op" else src.name
            items.append(Item("in", label, shape(src.shapes[0]) if src is not None and src.shapes else ""))
        for n, s in enumerate(steps):
            fn = flow.functions[s.function]
            inner = f" ({fn.name})" if s.function >= 0 and fn is not root else ""
            shp = shape(s.shapes[0]) if s.shapes else ""
            at[k + n] = len(items)
            items.append(Item("op", (s.name.lstrip("_") or s.name) + (f" ×{s.count}" if s.count > 1 else "") + inner,
                              "", inputs=[at[j] for j in s.inputs if j in at], shape=shp))
        parts.append({"step": k, "name": root.name, "where": f"{root.file}:{root.line}", "site": root.site,
                      "ops": end - k + 1, "items": items})
    return parts


@dataclass(frozen=True)
class FlowNaming:
    """How the fold names what it draws (pure functions): `shape(dims)` writes a shape, `node_of(rel)` names a
    child's node id, `node_info(nid, paths)` gives its (title, href, class name), and `group_of(nids)`, where given,
    the href of the node of a repeating group of kinds."""
    shape: Any
    node_of: Any
    node_info: Any
    group_of: Any = None


def flow_items(m: ModuleRecord, flow: Flow, naming: FlowNaming, *, inputs: tuple[str, ...],
               outputs: tuple[str, ...], collapse: int = 0) -> tuple[list[Item], int]:
    """The boxes of `m`'s forward, folded (pure: `naming` names the nodes and writes the shapes); and how many
    steps were cut. With `collapse`, a run of more ops than that between two calls is one pill (the overview: masks
    and positions). A run of ops inside one call of a Python function is one box named after it (`function_parts`
    says what it expands to, its href "#flow-fn-K" at its first step K); a chain of layout ops (view, transpose,
    ...) the forward runs itself folds into the edge from the value's maker, which it labels."""
    fold = _Folder(m, flow, naming, collapse)
    fold.add_inputs(inputs)
    steps = flow.steps
    k = 0
    cut = 0
    while k < len(steps):
        if len(fold.items) >= MAX_ITEMS:
            cut = len(steps) - k
            break
        k = fold.step(k)
    ins, labels = fold.edges(flow.outputs)
    fold.items.append(Item("out", "output", ", ".join(outputs), inputs=ins, via=labels))
    return fold.items, cut


class _Folder:
    """The items of one forward as they are folded, step by step, and where each flow value landed."""

    def __init__(self, m: ModuleRecord, flow: Flow, naming: FlowNaming, collapse: int) -> None:
        self.m, self.flow, self.naming, self.collapse = m, flow, naming, collapse
        self.steps = flow.steps
        self.runs: dict[int, _Run] = {}
        last = -1
        for r in sorted(_runs(self.steps, naming.node_of), key=lambda r: r.start):  # ops two folds took: the first
            r.start = max(r.start, last + 1)
            if r.start <= r.calls[0]:
                self.runs[r.start] = r
                last = r.end
        self.fruns = _function_runs(flow)
        self.items: list[Item] = []
        self.at: dict[int, int] = {}  # flow index (step k, input -1 - i) -> item index
        self.via: dict[int, str] = {}  # a layout step folded into an edge -> the edge's label ("view, transpose")

    def add_inputs(self, inputs: tuple[str, ...]) -> None:
        flow = self.flow
        used_inputs = sorted({j for s in self.steps for j in s.inputs if j < 0} | {j for j in flow.outputs if j < 0},
                             reverse=True)
        for label, shp, js in _input_groups(flow, used_inputs, inputs):
            for j in js:
                self.at[j] = len(self.items)
            self.items.append(Item("in", label, shp))

    def edges(self, ins: Any) -> tuple[list[int], dict[int, str]]:
        targets: list[int] = []
        labels: dict[int, str] = {}
        for j in ins:
            if j in self.at and self.at[j] not in targets:
                targets.append(self.at[j])
                if j in self.via:
                    labels[self.at[j]] = self.via[j]
        return targets, labels

    def _place(self, first: int, last: int, item: Item) -> int:
        """Steps first..last drawn as `item`; the next step to fold."""
        for j in range(first, last + 1):
            self.at[j] = len(self.items)
        self.items.append(item)
        return last + 1

    def _shape_of(self, step: FlowStep) -> str:
        return self.naming.shape(step.shapes[0]) if step.shapes else ""

    def step(self, k: int) -> int:
        """Fold the flow from step k on into one item (or one edge label); the next step to fold."""
        if k in self.runs:
            return self._fold_run(self.runs[k])
        if k in self.fruns:
            return self._fold_function(k, self.fruns[k])
        s = self.steps[k]
        if s.kind == "op" and s.name in LAYOUT_OPS and s.function < 0:
            src = [j for j in s.inputs if j in self.at]
            if len(src) == 1:  # the value passes along the edge, laid out anew
                j = src[0]
                self.at[k] = self.at[j]
                chain = self.via[j].rpartition(" → ")[0] + ", " if j in self.via else ""
                self.via[k] = f"{chain}{s.name.lstrip('_')} → {self._shape_of(s)}"
                return k + 1
        end = k
        while self.collapse and end + 1 < len(self.steps) and self.steps[end + 1].kind == "op" \
                and end + 1 not in self.runs:
            end += 1
        if s.kind == "op" and self.collapse and end - k + 1 > self.collapse:
            return self._collapse_ops(k, end)
        return self._place(k, k, self._single(s))

    def _fold_run(self, run: _Run) -> int:
        """A run of calls to list items of one kind (or one repeating pattern of kinds) as one box."""
        steps, naming = self.steps, self.naming
        members = [steps[c].name for c in run.calls]
        numbers = [_list_item(n)[1] for n in members]  # type: ignore[index]
        head = _list_item(members[0])[0]  # type: ignore[index]
        span = f"{numbers[0]}–{numbers[-1]}" if numbers == list(range(numbers[0], numbers[-1] + 1)) \
            else ", ".join(map(str, numbers[:3])) + ("…" if len(numbers) > 3 else "")
        kinds = [naming.node_of(n) for n in members[:run.period]]
        infos = [naming.node_info(nid, members[i:i + 1]) for i, nid in enumerate(kinds)]
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
        if run.period > 1 and naming.group_of is not None:  # the node of the repeating group, where there is one
            href = naming.group_of(kinds) or href
        ins, labels = self.edges(sorted({j for s in steps[run.start:run.end + 1] for j in s.inputs
                                         if j < run.start or j > run.end}))
        m = self.m
        item = Item("fold", label, sub, href=href, cls=infos[0][2] if run.period == 1 else "",
                    path=f"{m.path}.{members[0]}" if m.path else members[0], inputs=ins, via=labels,
                    shape=self._shape_of(steps[run.end]))
        return self._place(run.start, run.end, item)

    def _fold_function(self, k: int, end: int) -> int:
        """The ops of one call of a Python function, steps k..end, as one box named after it."""
        steps = self.steps
        fn = self.flow.functions[_outermost(self.flow, steps[k].function)]
        ins, labels = self.edges(sorted({j for x in steps[k:end + 1] for j in x.inputs if j < k}))
        item = Item("fn", fn.name, f"{_short_file(fn.file)}:{fn.line}", href=f"#flow-fn-{k}", inputs=ins,
                    via=labels, shape=self._shape_of(steps[end]), cls=f"{end - k + 1} op{'' if end == k else 's'}")
        return self._place(k, end, item)

    def _collapse_ops(self, k: int, end: int) -> int:
        """A run of ops between two calls, steps k..end, as one pill."""
        ops = self.steps[k:end + 1]
        names = list(dict.fromkeys(x.name.lstrip("_") for x in ops))
        ins, labels = self.edges(sorted({j for x in ops for j in x.inputs if j < k}))
        item = Item("op", f"{len(ops)} ops ({', '.join(names[:3])}{', …' if len(names) > 3 else ''})", "",
                    inputs=ins, via=labels, shape=self._shape_of(ops[-1]))
        return self._place(k, end, item)

    def _single(self, s: FlowStep) -> Item:
        """One call or op of its own."""
        ins, labels = self.edges(s.inputs)
        shp = self._shape_of(s)
        if len(s.shapes) > 1:
            shp = f"{len(s.shapes)} × {shp}" if len(set(s.shapes)) == 1 else f"{shp} + {len(s.shapes) - 1} more"
        if s.kind == "call":
            name = s.name[1:] if s.name.startswith("/") else s.name
            nid = self.naming.node_of(s.name)
            title, href, cls = self.naming.node_info(nid, [s.name]) if nid is not None else (name, None, "")
            path = name if s.name.startswith("/") or not self.m.path else f"{self.m.path}.{name}"
            return Item("call", name, title if title != name else "", href=href, cls=cls, path=path, inputs=ins,
                        via=labels, shape=shp)
        op = s.name.lstrip("_") or s.name
        return Item("op", op + (f" ×{s.count}" if s.count > 1 else ""), "", inputs=ins, via=labels, shape=shp)

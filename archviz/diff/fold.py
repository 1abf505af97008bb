"""Grouped reporting: differences that read once for many modules, as the explorer groups them.

The kinds and multiplicities are the grouping stage's (`archviz.group.tree.grouping`): two modules' differences fold
into one line when their grouping nodes are of the same kind in both models and the differences are the same, so a
change in all 43 layers reads once, "× 43 layers", with the parameter delta multiplied out. Pure function of
records (no torch).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..group import grouping, multiplicity_text
from ..records import ModelRecord
from .result import Folded, NodeDiff, Pair, Subtree


class Kinds:
    """Path -> grouping kind and multiplicity, from a record's grouping."""

    def __init__(self, record: ModelRecord):
        g = grouping(record)
        self.by_path = g["by_path"]
        self.nodes = {n["id"]: n for n in g["nodes"]}

    def kind(self, path: str) -> str:
        e = self.by_path.get(path)
        return self.nodes[e["node"]]["kind"] if e else f"path:{path}"

    def multiplicity(self, path: str) -> list[dict]:
        e = self.by_path.get(path)
        return e["multiplicity"] if e else []

    def node_paths(self, path: str) -> list[str]:
        e = self.by_path.get(path)
        return self.nodes[e["node"]]["paths"] if e else [path]


def _patterns(paths: Sequence[str]) -> tuple[str, ...]:
    from ..paths import compress_paths  # the explorer's path patterns: layers.{0-2,5}.attn

    return tuple(compress_paths(list(paths)))


def _count_text(paths: Sequence[str], kinds: Kinds) -> str:
    """'× 43 layers' (the grouping's multiplicity) when the paths are exactly what one grouping node stands for
    with its multiplicity; else the count, named by the list whose index varies ('× 61 layers'), or '× N modules'."""
    n = len(paths)
    if n <= 1:
        return ""
    mult = kinds.multiplicity(paths[0])
    prod = 1
    for f in mult:
        prod *= f["factor"]
    if prod == n and all(kinds.multiplicity(p) == mult for p in paths):
        return multiplicity_text(mult)
    segs = [p.split(".") for p in paths]
    if len({len(s) for s in segs}) == 1:
        varying = [i for i in range(len(segs[0])) if len({s[i] for s in segs}) > 1]
        if len(varying) == 1 and varying[0] > 0 and all(s[varying[0]].isdigit() for s in segs):
            return f"× {n:,} {segs[0][varying[0] - 1]}"
    return f"× {n:,} modules"


def _item_name(path: str) -> str:
    """A subtree's name for folding: its attribute name, or for an item of a list (`layers.32`) the list's path with
    the index left out, so that layers 32-60 added or removed alike read once, "× 29 layers"."""
    parent, _, name = path.rpartition(".")
    return f"{parent}.*" if name.isdigit() else name


def fold(a: ModelRecord, b: ModelRecord, nodes: Iterable[NodeDiff], renamed: Iterable[Pair],
         added: Iterable[Subtree], removed: Iterable[Subtree], kinds: tuple["Kinds", "Kinds"] | None = None,
         indexes: tuple[dict, dict] | None = None) -> tuple[Folded, ...]:
    """The differences grouped; `kinds` (A's and B's `Kinds`) and `indexes` (their `index()`) when already made."""
    ka, kb = kinds or (Kinds(a), Kinds(b))
    groups: dict[tuple, list[Any]] = {}
    nodes = list(nodes)
    by_a = {nd.a: nd for nd in nodes}
    told: set[str] = set()  # renamed modules whose changes read with the rename
    for p in renamed:
        nd = by_a.get(p.a)
        changes = nd.changes if nd is not None else ()
        told.add(p.a)
        key = ("renamed", p.how, p.rule, p.a.rsplit(".", 1)[-1], p.b.rsplit(".", 1)[-1], ka.kind(p.a), kb.kind(p.b),
               changes)
        groups.setdefault(key, []).append((p, nd))
    for nd in nodes:
        if nd.a in told:
            continue
        key = ("changed", ka.kind(nd.a), kb.kind(nd.b), nd.changes)
        groups.setdefault(key, []).append(nd)
    for st in removed:
        groups.setdefault(("removed", _item_name(st.path), ka.kind(st.path), st.parameters), []).append(st)
    for st in added:
        groups.setdefault(("added", _item_name(st.path), kb.kind(st.path), st.parameters), []).append(st)
    ia, ib = indexes or (a.index(), b.index())
    out: list[Folded] = []
    for key, items in groups.items():
        what = key[0]
        if what == "renamed":
            pa = [p.a for p, _ in items]
            first, nd = items[0]
            each = nd.parameters if nd is not None else 0
            out.append(Folded("renamed", _patterns(pa), _patterns([p.b for p, _ in items]), len(items),
                              _count_text(pa, ka), ia[pa[0]].class_name, nd.changes if nd is not None else (), each,
                              sum(x.parameters for _, x in items if x is not None), first.how, first.rule))
        elif what == "changed":
            pa = [x.a for x in items]
            each = items[0].parameters
            out.append(Folded("changed", _patterns(pa), _patterns([x.b for x in items]), len(items),
                              _count_text(pa, ka), ia[pa[0]].class_name, items[0].changes, each,
                              sum(x.parameters for x in items)))
        else:
            ps = [x.path for x in items]
            sign = 1 if what == "added" else -1
            out.append(Folded(what, () if what == "added" else _patterns(ps), _patterns(ps) if what == "added" else (),
                              len(items), _count_text(ps, kb if what == "added" else ka), items[0].class_name, (),
                              sign * items[0].parameters, sign * sum(x.parameters for x in items)))
    order = {"removed": 0, "added": 1, "renamed": 2, "changed": 3}
    out.sort(key=lambda f: order[f.kind])  # stable: within a kind, in the models' order
    return tuple(out)


__all__ = ["fold", "Kinds"]

"""Parameters read by index during the meta pass, and what a token reads of them.

A parameter indexed along one dim (`table[ids]`, `F.embedding(ids, table)`, `index_select`) is read a few slices
at a time: an index tensor of n·(B·T) elements reads n slices a token. Where the index came from a top-k over that
dim's size (routing), the parameter is a stack of experts (gpt-oss's `self.mlp1_weight[expert_indices]`): k of E are
active. Otherwise it is a lookup table (an embedding, a value embedding, an Engram n-gram table): a token reads n of
its rows, whatever the table's name; the input embedding and the tables beside it (positions, token types) count in
full. A top-k over E scores in a block that holds a list of E alike modules routes tokens to them, however the code
runs them (a Python loop over masks or `torch.where` indices): they are routed experts, k of E active. Blocks
answered from the memo read and route as the block they copy. `adjust` turns this into active parameters per
token."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch

from ..records import BIAS, WEIGHT, ModelRecord, MoELayer
from ..walk.moe import beside_input

aten = torch.ops.aten

GATHER_OPS = frozenset((aten.index.Tensor, aten.embedding.default, aten.index_select.default,
                        aten._embedding_bag.default, aten.embedding_bag.padding_idx))


class Gathers:
    """Seen by the pass's dispatch policy: per parameter (by its full path), the dim indexed, the slices a token reads
    (`tokens`: the input's token count) and the k of a top-k index over that dim (None: not routing)."""

    def __init__(self, paths: dict[int, str], objects: dict[int, Any], tokens: int = 1):
        self.tokens = tokens
        self.names: dict[int, str] = {}
        for i, mod in objects.items():
            prefix = f"{paths[i]}." if paths[i] else ""
            for name, p in mod._parameters.items():
                if p is not None and id(p) not in self.names:
                    self.names[id(p)] = prefix + name
        # name -> (dim indexed, slices a token reads, top-k of a routing index or None, the parameter's shape)
        self.seen: dict[str, tuple[int, float, int | None, tuple[int, ...]]] = {}
        self.routes: dict[str, dict[int, int]] = {}  # module path -> {E scored: k chosen} of the top-ks it ran

    def route(self, path: str, experts: int, k: int) -> None:
        """A top-k of `k` over `experts` scores ran in the module at `path`."""
        ks = self.routes.setdefault(path, {})
        ks[experts] = max(k, ks.get(experts, 0))

    def op(self, func: Any, args: tuple, policy: Any) -> None:
        if func is aten.index.Tensor:
            table, indices = args[0], args[1]
            hits = [(d, i) for d, i in enumerate(indices) if i is not None]
            if len(hits) != 1 or hits[0][1].dtype in (torch.bool, torch.uint8):
                return
            dim, index = hits[0]
        elif func is aten.index_select.default:
            table, dim, index = args[0], args[1], args[2]
        else:  # embedding(weight, indices, ...), embedding_bag(weight, indices, ...)
            table, index, dim = args[0], args[1], 0
        name = self.names.get(id(table))
        if name is None and isinstance(table, torch.Tensor) and table._base is not None:
            name = self.names.get(id(table._base))  # a view of the parameter (`self.ve.view(5, V, d)[:, ids]`)
        if name is None or not isinstance(index, torch.Tensor):
            return
        per_token = index.numel() / max(1, self.tokens)
        prov = policy.get(index)
        routed = prov.k if prov is not None and prov.range == table.shape[dim] and prov.k else None
        old = self.seen.get(name)
        if old is None or per_token > old[1]:
            self.seen[name] = (dim, per_token, routed, tuple(table.shape))

    def copy(self, source: str, target: str) -> None:
        """A block answered from the memo reads what `source` read."""
        src = f"{source}." if source else ""
        dst = f"{target}." if target else ""
        for name, hit in list(self.seen.items()):
            if name.startswith(src):
                self.seen.setdefault(dst + name[len(src):], hit)
        for path, ks in list(self.routes.items()):
            if path == source or path.startswith(src):
                self.routes.setdefault(target + path[len(source):], dict(ks))


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _owner(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def _looped(record: ModelRecord, routes: dict[str, dict[int, int]], known: dict[str, MoELayer]) -> list[MoELayer]:
    """Routed experts the code runs itself: a list (ModuleList, ModuleDict) of E ≥ 2 modules of one class whose
    parent block (its gate, a module just below it, or the nearest block around it) ran a top-k over E scores; known
    collections without a top-k take it there."""
    index = record.index()
    by_block: dict[str, dict[int, int]] = {}
    for path, ks in routes.items():  # a routing counts for the block that ran it and the block holding that (a gate)
        for block_path in {path, path.rpartition(".")[0]}:
            for e, k in ks.items():
                block = by_block.setdefault(block_path, {})
                block[e] = max(k, block.get(e, 0))

    def routed(block: str, n: int) -> int | None:
        """The k of a top-k over n run by `block`, its gate, or the nearest block around it that ran one."""
        while True:
            k = by_block.get(block, {}).get(n)
            if k is not None or not block:
                return k
            block = block.rpartition(".")[0]

    out = []
    for m in record.modules:
        n = len(m.children)
        if m.class_name not in ("ModuleList", "ModuleDict") or n < 2 or m.parent is None:
            continue
        k = routed(m.parent, n)
        old = known.get(m.path)
        if k is None or (old is not None and old.top_k) or len({index[c].class_name for c in m.children}) != 1:
            continue
        if old is not None:
            out.append(dataclasses.replace(old, top_k=k))
        else:
            params = m.totals.parameters
            out.append(MoELayer(path=m.path, experts=n, local_experts=n, top_k=k, parameters=params,
                                per_expert=params // n))
    return out


def adjust(record: ModelRecord, gathers: Gathers) -> tuple[ModelRecord, list[dict[str, Any]]]:
    """The record with the routed experts found in the pass (stacked tensors indexed by routing, lists of experts
    run by the code's own loop) added to its MoE collections, and the active parameters per token counting a lookup
    table by the rows a token reads; and the tables, for the shapes extra."""
    s = record.summary
    known = {m.path: m for m in s.moe}
    looped = {m.path: m for m in _looped(record, gathers.routes, known)}

    def inside(path: str, roots: Any) -> bool:
        return any(r and (path == r or path.startswith(r + ".")) for r in roots)

    tensors = {(m.path + "." if m.path else "") + t.name: t for m in record.modules for t in m.tensors}
    experts: dict[str, list[tuple[str, int, int]]] = {}  # owner module -> [(tensor, E, k)]
    tables: list[dict[str, Any]] = []
    skip = (*known, *looped, *beside_input(record))
    for name, (dim, per_token, routed, shape) in sorted(gathers.seen.items()):
        t = tensors.get(name)
        if t is None or t.kind not in (WEIGHT, BIAS) or inside(name, skip):
            continue
        slices = shape[dim]
        if routed is not None:
            experts.setdefault(_owner(name), []).append((name, slices, routed))
            continue
        read = min(slices, max(1, round(per_token)))
        if read >= slices:
            continue
        full = t.elements
        tables.append({"path": name, "rows": slices, "rows_per_token": read, "parameters": full,
                       "active": full // slices * read})
    layers = [looped.get(m.path, m) for m in s.moe] + [m for p, m in looped.items() if p not in known]
    for owner, hits in sorted(experts.items()):
        e = hits[0][1]
        k = max(h[2] for h in hits)
        params = sum(tensors[h[0]].elements for h in hits if h[1] == e)
        layers.append(MoELayer(path=owner, experts=e, local_experts=e, top_k=k, parameters=params,
                               per_expert=params // e))
    notes = list(s.active_assumptions)
    active = s.active_parameters
    if experts or looped:
        active = None if not all(m.top_k for m in layers) else s.parameters - sum(
            m.parameters - min(m.top_k or 0, m.local_experts) * m.per_expert for m in layers)
        if active is not None:  # the walk's "no top-k found" answered
            notes = [n for n in notes if "top-k not found" not in n and "no top-k found" not in n]
    if experts:
        stacked = [m for m in layers if m.path in experts]
        notes.append(f"stacked experts: {len(stacked)} collection{'s' if len(stacked) != 1 else ''} of tensors "
                     f"indexed by routing (top-k indices) in the meta pass ({', '.join(_fold(m.path for m in stacked))})"
                     "; their top-k from the routing's torch.topk")
    if looped:
        notes.append(f"experts run by the code's own loop: {', '.join(_fold(looped))}, top-k from the routing's "
                     "torch.topk in the meta pass")
    if tables and active is None and not layers:
        active = s.parameters  # a dense model: its tables are what a token does not read in full
    if tables and active is not None:
        active -= sum(t["parameters"] - t["active"] for t in tables)
        notes.append("lookup tables read by index (" + ", ".join(_fold(t["path"] for t in tables)) +
                     ") count as active by the rows a token reads, found in the meta pass")
    summary = dataclasses.replace(s, moe=tuple(layers), active_parameters=active, active_assumptions=tuple(notes))
    return dataclasses.replace(record, summary=summary), tables


def _fold(paths: Any) -> list[str]:
    out: dict[str, None] = {}
    for p in paths:
        out[re.sub(r"\.\d+(?=\.|$)", ".*", p)] = None
    return list(out)


__all__ = ["Gathers", "GATHER_OPS", "adjust"]

"""Parameters read by index during the meta pass, and what a token reads of them.

A parameter indexed along one dim (`table[ids]`, `F.embedding(ids, table)`, `index_select`) is read a few slices
at a time: an index tensor of n·(B·T) elements reads n slices a token. Where the index came from a top-k over that
dim's size (routing), the parameter is a stack of experts (gpt-oss's `self.mlp1_weight[expert_indices]`): k of E are
active. Otherwise it is a lookup table (an embedding, an Engram n-gram table): a token reads n of its rows. Blocks
answered from the memo read what the block they copy read. `adjust` turns this into active parameters per token."""

from __future__ import annotations

import re
from typing import Any

import torch

from ..records import BIAS, WEIGHT, ModelRecord, MoELayer

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


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _owner(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def adjust(record: ModelRecord, gathers: Gathers) -> tuple[ModelRecord, list[dict[str, Any]]]:
    """The record with stacked experts found by routing added to its MoE collections and the active parameters per
    token counting a lookup table by the rows a token reads; and the tables, for the shapes extra."""
    import dataclasses

    s = record.summary
    known = tuple(m.path for m in s.moe)

    def inside(path: str, roots: tuple[str, ...]) -> bool:
        return any(r and (path == r or path.startswith(r + ".")) for r in roots)

    tensors = {(m.path + "." if m.path else "") + t.name: t for m in record.modules for t in m.tensors}
    experts: dict[str, list[tuple[str, int, int]]] = {}  # owner module -> [(tensor, E, k)]
    tables: list[dict[str, Any]] = []
    skip = (*known, *((s.input_embedding_path,) if s.input_embedding_path else ()))
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
    layers = list(s.moe)
    for owner, hits in sorted(experts.items()):
        e = hits[0][1]
        k = max(h[2] for h in hits)
        params = sum(tensors[h[0]].elements for h in hits if h[1] == e)
        layers.append(MoELayer(path=owner, experts=e, local_experts=e, top_k=k, parameters=params,
                               per_expert=params // e))
    notes = list(s.active_assumptions)
    active = s.active_parameters
    if experts:
        stacked = [m for m in layers if m.path in experts]
        if active is None and not s.moe:
            active = s.parameters
        if active is not None:
            active -= sum(m.parameters - min(m.top_k or 0, m.local_experts) * m.per_expert for m in stacked)
        notes.append(f"stacked experts: {len(stacked)} collection{'s' if len(stacked) != 1 else ''} of tensors "
                     f"indexed by routing (top-k indices) in the meta pass ({', '.join(_fold(m.path for m in stacked))})"
                     "; their top-k from the routing's torch.topk")
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

"""MoE: the routed-expert collections of a model, their expert count and top-k, read from modules and the config."""

from __future__ import annotations

import re
from typing import Any

from ..records import (
    WEIGHT,
    ModelRecord,
    ModuleRecord,
    MoELayer,
)

_TOPK_ATTRS = ("topk", "top_k", "num_experts_per_tok", "n_activated_experts", "experts_per_token", "moe_topk")


_TOPK_CONFIG = ("num_experts_per_tok", "n_activated_experts", "moe_topk", "top_k", "num_experts_per_token",
                "experts_per_token", "moe_top_k")


_NEXPERT_CONFIG = ("n_routed_experts", "num_local_experts", "num_experts", "n_experts", "moe_num_experts")


def _config_value(config: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, int] | None:
    for k in keys:
        v = config.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return k, v
    return None


def module_attr(mod: Any, name: str) -> Any:
    """`getattr(mod, name, None)` without nn.Module.__getattr__'s slow miss path for plain attributes."""
    v = mod.__dict__.get(name)
    if v is None and hasattr(type(mod), name):  # a class attribute or property
        v = getattr(mod, name, None)
    return v


def _find_topk(model: Any, parent_path: str, config: dict[str, Any],
               by_path: dict[str, Any] | None = None) -> tuple[int | None, str]:
    if by_path is not None:
        parent = by_path.get(parent_path)
    else:
        try:
            parent = model.get_submodule(parent_path) if parent_path else model
        except AttributeError:
            parent = None
    if parent is not None:
        for mod_name, mod in [("", parent)] + list(parent.named_children()):
            for a in _TOPK_ATTRS:
                v = module_attr(mod, a)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    where = f"{parent_path}.{mod_name}" if mod_name else parent_path
                    return v, f"{where}.{a}"
    hit = _config_value(config, _TOPK_CONFIG)
    if hit:
        return hit[1], f"config {hit[0]}"
    return None, "top-k not found"


def find_moe(model: Any, modules: dict[str, ModuleRecord], config: dict[str, Any],
             by_path: dict[str, Any] | None = None) -> tuple[tuple[MoELayer, ...], list[str]]:
    """Routed-expert collections: a ModuleList named like experts (not shared ones), or a fused experts module whose
    tensors are stacked over the expert count from the config."""
    import torch

    layers: list[MoELayer] = []
    notes: list[str] = []
    n_cfg = _config_value(config, _NEXPERT_CONFIG)
    topk_sources: set[str] = set()
    for path, rec in modules.items():
        name = rec.name.lower()
        if "expert" not in name or "shared" in name:
            continue
        parent = rec.parent or ""
        if parent in modules and ("expert" in modules[parent].name.lower()):
            continue  # inside an expert
        if by_path is not None:
            mod = by_path.get(path)
            if mod is None:
                continue
        else:
            try:
                mod = model.get_submodule(path)
            except AttributeError:
                continue
        if isinstance(mod, torch.nn.ModuleList):
            local = len(rec.children)
            total_slots = len(mod._modules)
            if local < 2 and total_slots < 2:
                continue
            experts = total_slots
            params = rec.totals.parameters
            per_expert = params // local if local else 0
        else:
            if not n_cfg:
                continue
            e = n_cfg[1]
            stacked = [t for t in rec.tensors if t.kind == WEIGHT and t.shape and t.shape[0] == e]
            if not stacked:
                continue
            local = experts = e
            params = rec.totals.parameters
            per_expert = params // e
        k, src = _find_topk(model, parent, config, by_path)
        topk_sources.add(re.sub(r"\.\d+(?=\.|$)", ".*", src))
        layers.append(MoELayer(path=path, experts=experts, local_experts=local, top_k=k, parameters=params,
                               per_expert=per_expert))
    if layers:
        notes.append(f"routed experts: {len(layers)} collections; top-k from {', '.join(sorted(topk_sources))}")
        notes.append("active per token = all parameters − routed experts + top-k routed experts per MoE layer; "
                     "shared experts, embeddings and the head count in full")
    return tuple(layers), notes


def counted_by_the_pass(record: ModelRecord) -> str | None:
    """What of the active parameters only the meta pass can count (archviz.shapes.gathers) in a record walked
    without it, or None: routed experts whose top-k no attribute or config key names, a block holding a list of
    alike modules beside a router scoring as many (experts the code runs in its own loop, whatever their name),
    tensors stacked over a leading dim outside the routed experts found (experts indexed by routing, as gpt-oss's),
    or a lookup table other than the input embedding and the tables beside it (value embeddings, Engram's n-gram
    tables), which a token reads a few rows of."""
    s = record.summary
    roots = tuple(m.path for m in s.moe)
    unknown = [m.path for m in s.moe if not m.top_k]
    if unknown:
        return f"{unknown[0]}: routed experts without a top-k"
    index = record.index()
    beside = beside_input(record)
    for m in record.modules:
        path = m.path
        if any(path == r or path.startswith(r + ".") for r in roots) or path in beside:
            continue
        weights = [t for t in m.tensors if t.kind == WEIGHT]
        lead = [t.shape[0] for t in weights if len(t.shape) >= 3]
        if not roots and len(lead) >= 2 and len(set(lead)) == 1 and "conv" not in m.class_name.lower():
            return f"{path}: tensors stacked over {lead[0]}"
        name = f"{m.class_name} {m.name}".lower()
        tables = [t for t in weights if len(t.shape) == 2]
        if tables and ("embed" in name or "table" in name or any(
                "embed" in t.name.lower() or "table" in t.name.lower() for t in tables)):
            return f"{path}: a lookup table"
        if _routed_list(m, index):
            return f"{path}: {len(m.children)} alike modules beside a router scoring as many"
    return None


def beside_input(record: ModelRecord) -> set[str]:
    """The input embedding and the tables beside it -- its parent's other children that are single tables, with no
    modules below them (positions, token types): they count in full."""
    embed = record.summary.input_embedding_path
    index = record.index()
    if not embed or embed not in index:
        return set()
    parent = index.get(index[embed].parent or "") if index[embed].parent is not None else None
    beside = {embed}
    for c in parent.children if parent is not None else ():
        m = index[c]
        weights = [t for t in m.tensors if t.kind == WEIGHT]
        if not m.children and len(weights) == 1 and len(weights[0].shape) == 2:
            beside.add(c)
    return beside


def _routed_list(m: ModuleRecord, index: dict[str, ModuleRecord]) -> bool:
    """A ModuleList/ModuleDict of n ≥ 2 modules of one class whose parent (or a sibling module) holds a 2-D weight
    of n rows: a router over them."""
    n = len(m.children)
    if m.class_name not in ("ModuleList", "ModuleDict") or n < 2 or m.parent not in index:
        return False
    if len({index[c].class_name for c in m.children}) != 1:
        return False
    parent = index[m.parent]
    near = [parent, *(index[c] for c in parent.children if c != m.path)]
    return any(t.kind == WEIGHT and len(t.shape) == 2 and t.shape[0] == n for x in near for t in x.tensors)

"""Every model tensor's verdict against the checkpoint's tensors, and the checkpoint tensors left over: one interface
(:func:`tensor_verdicts`), the per-tensor path as its specification, the family path as its fast path.

The specification (``path="spec"``, :func:`_per_tensor`) maps each checkpoint tensor with the chosen ruleset and
works out each model tensor's verdict on its own. The family path (``families.py``) gives the same checkpoint extra,
byte for byte, from one rename and lookup per family of layer/expert tensors and one verdict per pair of a checkpoint
family and a kind of model tensor: a 671B model's 45,000 expert projections are a few dozen families. It is taken
where its preconditions hold (a compacted tensor list, names that split into their templates, every model name filed
once, and what ``families.py`` checks of the rules and the names); ``path="fast"`` takes it alone and gives ``None``
where it does not apply, ``path="auto"`` (every caller) falls back to the specification. The tests compare the two
through ``compare(..., path=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .entries import DirectEntries, Entry, fused_entry, missing_entry, split_entries
from .families import Fallback, ModelNames, compare_families
from .mapping import Resolver, map_units
from .rules import Rules, Ruleset
from .units import ModelTensor, Unit

__all__ = ["ModelSide", "Verdicts", "tensor_verdicts"]


@dataclass(frozen=True)
class ModelSide:
    """The model's tensors as ``model_index`` files them (targets, aliases, others), with what the family path
    needs of them: ``names`` (None where a name holds ``"{}"``, a NUL or an index with a leading zero) and whether
    every name was filed once (``unique``: no two modules' tensors share a name)."""

    targets: dict[str, ModelTensor]
    aliases: dict[str, str]
    others: dict[str, ModelTensor]
    names: ModelNames | None
    unique: bool


@dataclass
class Verdicts:
    """The entries in the per-tensor path's order (a ``FamilyEntry`` where many pairs share a verdict), each
    entry's place in that order (``positions``, None where there is one entry per place), and the checkpoint-only
    units with a label that overrides the rules' (None: the rules label it)."""

    entries: list[Any]
    positions: list[int] | None
    leftovers: list[tuple[Unit, str | None]]


def tensor_verdicts(units: list[Unit], model: ModelSide, ruleset: Ruleset, rules: Rules, block: tuple[int, int],
                    resolver: Resolver, *, compact: bool, path: Literal["auto", "fast", "spec"] = "auto"
                    ) -> Verdicts | None:
    """Map ``units`` with ``ruleset`` and give every model tensor its verdict. ``compact``: the tensor list will be
    collapsed over layer/expert indices (the family path's entries need it). Writes each unit's mapping (``mapped``,
    ``target``, ...) and the resolver's counts of the prefixes used. ``path`` as the module says."""
    if path != "spec" and compact and model.names is not None and model.unique:
        try:  # raises Fallback before writing anything where the family path would not give the same
            entries, positions, left = compare_families(units, model.names, ruleset, rules, block, resolver)
        except Fallback:
            pass
        else:
            n = len(model.targets)
            positions.extend(range(n, n + len(left)))
            return Verdicts(entries, positions, [(u, None) for u in left])
    if path == "fast":
        return None
    return Verdicts(*_per_tensor(units, model, ruleset, rules, block, resolver))


def _per_tensor(units: list[Unit], model: ModelSide, ruleset: Ruleset, rules: Rules, block: tuple[int, int],
                resolver: Resolver) -> tuple[list[Entry], None, list[tuple[Unit, str | None]]]:
    """The specification: map every unit and give every model tensor its verdict, one by one (entries in the
    model's order, no positions, the checkpoint-only units with a label that overrides the rules')."""
    map_units(units, ruleset, rules.user, resolver, write=True)
    by_target, splits, split_of, leftovers = _targets_of(units, model)
    targets = model.targets
    entries: list[Entry] = []
    direct_entry = DirectEntries(block, rules, ruleset, rules.user, resolver)
    for name, mt in targets.items():
        group = split_of.get(name)
        if group is not None:
            if name == group[0]:  # the whole group at its first member
                us = splits[group] + [u for m in group for u in by_target.get(m, ())]
                entries.extend(split_entries([targets[m] for m in group], us, rules))
                for u in us:
                    u.assigned = True
            continue
        us = by_target.get(name)
        if us is not None and len(us) == 1 and us[0].fuse is None:  # one checkpoint tensor, as is: most of them
            u = us[0]
            entries.append(direct_entry(mt, u))
            u.assigned = True
            continue
        if not us:
            entries.append(missing_entry(mt, ruleset.unheld.get(name)))
            continue
        fused = [u for u in us if u.fuse is not None]
        direct = [u for u in us if u.fuse is None]
        if len(direct) > 1 and not fused:
            # several checkpoint tensors on one name: the first is it, the rest tied copies when the same shape
            same = [u for u in direct[1:] if u.logical_shape == direct[0].logical_shape]
            for u in same:
                leftovers.append((u, "tied copy"))
            direct = [direct[0]] + [u for u in direct[1:] if u not in same]
        if len(direct) == 1 and not fused:
            entries.append(direct_entry(mt, direct[0]))
        else:
            entries.append(fused_entry(mt, direct + fused, block, rules))
        for u in us:
            u.assigned = True
    return entries, None, leftovers


def _targets_of(units: list[Unit], model: ModelSide
                ) -> tuple[dict[str, list[Unit]], dict[tuple[str, ...], list[Unit]], dict[str, tuple[str, ...]],
                           list[tuple[Unit, str | None]]]:
    """The mapped units by the model tensor they land on (an alias lands on the counted tensor), the groups of model
    tensors that splitting conversions fill together, each member's group, and the units that land on nothing the
    model loads."""
    by_target: dict[str, list[Unit]] = {}
    splits: dict[tuple[str, ...], list[Unit]] = {}  # model tensors filled together by splitting conversions
    split_of: dict[str, tuple[str, ...]] = {}
    leftovers: list[tuple[Unit, str | None]] = []  # (unit, label override)
    targets, aliases, others = model.targets, model.aliases, model.others
    for u in units:
        tgt = u.target
        if tgt is None:
            leftovers.append((u, None))
            continue
        if tgt in aliases:
            tgt = aliases[tgt]
            u.target = tgt
        if tgt in others or tgt not in targets:  # a non-persistent buffer or a paired scale: nothing to load it into
            leftovers.append((u, None))
            continue
        if u.split and all(s in targets for s in u.split):
            group = (tgt,) + u.split
            for member in group:
                split_of[member] = group
            splits.setdefault(group, []).append(u)
            continue
        by_target.setdefault(tgt, []).append(u)
    return by_target, splits, split_of, leftovers

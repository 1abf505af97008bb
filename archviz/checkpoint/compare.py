"""Compare a model's records with a checkpoint's headers: tensor by tensor, module by module.

    >>> rec = archviz.load("config.json")                                  # doctest: +SKIP
    >>> rec = compare(rec, open_checkpoint("model.safetensors"))           # doctest: +SKIP
    >>> rec.extra("checkpoint")["verdict"]                                 # doctest: +SKIP
    'match'

How a checkpoint tensor finds its model tensor (see ``rules.py``): the renames of the best-scoring ruleset, then the
prefix step; failing that a fuse rule (per-expert tensors → one stacked tensor, compared by sums). For a transformers
model one candidate ruleset is transformers' own (``hf_live.py``): its conversions join tensors (compared by sums) or
split one into several model tensors (compared with their sum). Quantization scales
pair with their weight by name (``X.weight_scale_inv`` / ``X.scale`` → ``X.weight``) and travel with it; each is
checked against the weight's shape and the block size. fp4 values packed two per byte in ``I8`` count twice.
A dtype difference (bf16 on disk, fp32 in the model; fp8 on disk dequantized at load) is a note, never a mismatch.

Verdicts per tensor: ``match`` · ``mismatch`` (counts or shapes differ; both numbers kept) · ``missing`` (the model
has it, the checkpoint does not) · ``checkpoint-only`` (explained by a label such as ``mtp``, ``mtp copy``,
``buffer``, or ``unmapped``). The result is stored in the record as the ``checkpoint`` extra (JSON-able); module
verdicts aggregate up the module tree, so every ancestor path carries its subtree's verdict and counts.

The verdicts come from one interface (``verdicts.py``): the per-tensor path, its specification, maps each
checkpoint tensor and works out each model tensor's verdict on its own; where the tensor list is compacted and the
names and rules allow it (``families.py`` lists when), the family path gives the same result, byte for byte, from
one rename and lookup per family of layer/expert tensors: a 671B model's 45,000 expert projections are a few dozen
families.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from itertools import chain
from typing import Any, Iterable, Literal, Mapping

from archviz.gcpause import collector_paused
from archviz.errors import CheckpointError
from archviz.records import BIAS, SCALE, TABLE, WEIGHT, ModelRecord

from .records import CheckpointInventory
from .hf_live import FACTS_KEY, live_ruleset
from .gguf_names import gguf_ruleset
from .rules import Rules, Ruleset, load_rules
from .entries import Entry, block_size, check_scales, checkpoint_only_label, ck_desc
from .compact import compact_checkpoint_only, compact_entries, compact_entry_list  # noqa: F401
from .aggregate import module_verdicts
from .units import INT_CK, NON_PARAM_LABELS, Unit, model_index, checkpoint_units
from .families import FamilyEntry, ModelNames, family_score
from .templates import split_name
from .mapping import Resolver, choose_ruleset
from .verdicts import ModelSide, tensor_verdicts
from .compact import compress_names  # noqa: F401 - part of this module's interface since before the split
from .aggregate import EXTRA_DEPTH  # noqa: F401
from .units import CK_TO_TORCH  # noqa: F401

__all__ = ["EXTRA_KEY", "CK_TO_TORCH", "compare", "check", "compress_names"]

EXTRA_KEY = "checkpoint"

COMPACT_ABOVE = 1000  # entries; above this the tensors list is collapsed over layer/expert indices


# ---------------------------------------------------------------------------------------------------------------------
# The checkpoint side: tensors grouped with their scales


# ---------------------------------------------------------------------------------------------------------------------
# The model side


# ---------------------------------------------------------------------------------------------------------------------
# Mapping


# ---------------------------------------------------------------------------------------------------------------------
# Notes and checks


# ---------------------------------------------------------------------------------------------------------------------
# Entries


# ---------------------------------------------------------------------------------------------------------------------
# Compact names: layers.{0-60}.ffn.experts.{0-255}.w1.weight


# ---------------------------------------------------------------------------------------------------------------------
# Module aggregation


# ---------------------------------------------------------------------------------------------------------------------
# compare


def compare(record: ModelRecord, inventory: CheckpointInventory | str | os.PathLike[str],
            rules: Rules | str | os.PathLike[str] | None = None, *, compact: bool | None = None,
            path: Literal["auto", "fast", "spec"] = "auto") -> ModelRecord | None:
    """Compare ``record`` with a checkpoint's headers; returns the record with the ``checkpoint`` extra set.

    ``inventory`` may be a :class:`CheckpointInventory` or anything ``open_checkpoint`` accepts; ``rules`` a
    :class:`Rules` or a user rules file (added to the built-in rules). ``compact`` collapses the per-tensor list over
    layer/expert indices (default: when it has more than ``COMPACT_ABOVE`` entries). ``path``: how the verdicts are
    worked out (``verdicts.py``: per tensor, the specification, with ``"spec"``; by families alone with ``"fast"``,
    None where that does not apply); the result is the same.
    """
    if not isinstance(inventory, CheckpointInventory):
        from .sources import open_checkpoint

        inventory = open_checkpoint(inventory)
    # Hundreds of thousands of small objects, none cyclic: the cyclic collector would only rescan them.
    with collector_paused():
        return _compare(record, inventory, rules, compact, path)


def _compare(record: ModelRecord, inventory: CheckpointInventory, rules: Rules | str | os.PathLike[str] | None,
             compact: bool | None, path: Literal["auto", "fast", "spec"]) -> ModelRecord | None:
    if rules is None:
        rules = load_rules()
    elif not isinstance(rules, Rules):
        rules = load_rules(rules)
    config = dict(record.source.config)
    block = block_size(config, rules)

    filed: list[int] = []
    targets, aliases, others = model_index(record, filed)
    units = checkpoint_units(inventory, rules)
    all_names = set(targets) | set(aliases) | set(others)
    resolver = Resolver(all_names, rules.prefixes)
    live, live_note = (None, None)
    if record.source.kind == "hf":
        live, live_note = live_ruleset(record.extra(FACTS_KEY), config.get("model_type"), all_names,
                                       (u.name for u in units))
    extra = (live,) if live is not None else ()
    formatted, format_note = gguf_ruleset(inventory, _shapes(targets, aliases))
    if formatted is not None:
        extra += (formatted,)
    live_note = live_note or format_note
    plain = _plain_names(all_names, inventory)
    names = None
    if plain:  # the names' splits stand for their templates (families.py)
        for u in units:
            u.template, u.nums = split_name(u.info.name)
        plain = not (_leading_zero((u.nums for u in units), (mt.nums for mt in targets.values()),
                                   (mt.nums for mt in others.values()), (split_name(a)[1] for a in aliases))
                     or _LEADING_ZERO.search("/" + "/".join(s.name for u in units for s in u.scales)))
    if plain:
        names = ModelNames(targets, aliases, others)
    scorer = (lambda sample, rs: family_score(sample, rs, rules.user, names, resolver)) if names else None
    ruleset, scores = choose_ruleset(units, rules, record, resolver, extra, scorer)
    resolver = Resolver(all_names, rules.prefixes)
    model = ModelSide(targets, aliases, others, names, filed[0] == len(all_names))
    found = tensor_verdicts(units, model, ruleset, rules, block, resolver, path=path,
                            compact=bool(compact or (compact is None and len(targets) > COMPACT_ABOVE)))
    if found is None:  # path="fast", and the family path does not apply
        return None
    entries, positions, leftovers = found.entries, found.positions, found.leftovers

    ck_only: list[dict[str, Any]] = []
    for u, override in leftovers:
        if override:
            label, about = override, "a second copy of a tensor the model ties to another"
        else:
            label, about = checkpoint_only_label(u, rules, ruleset, config, others)
        explained = label != "unmapped"
        param = label not in NON_PARAM_LABELS and label != "scale" and (
            u.packed or u.info.dtype not in INT_CK | {"F8_E8M0"})
        place = u.mapped if u.target is None else u.target
        placed = resolver.place(place) if u.target is None else place
        module = placed.rsplit(".", 1)[0] if "." in placed else ""
        note = about
        if u.scales:
            note += f"; {ck_desc(u)} with {len(u.scales)} scale(s)"
        entries.append(Entry(None, module, u.names, "checkpoint-only", label, 0, u.elements, param,
                              None, u.logical_shape, None, u.info.dtype, note, label, explained,
                              checkpoint_bytes=u.stored_bytes))
        ck_only.append({"name": u.name, "kind": label, "dtype": u.info.dtype, "shape": list(u.info.shape),
                        "elements": u.elements, "explained": explained,
                        **({"scales": [s.name for s in u.scales]} if u.scales else {})})

    result = _result(record, inventory, _Found(entries, positions, ck_only, units),
                     _RulesUsed(ruleset, scores, rules, block), (compact, plain))
    if live_note:
        result["rules"]["notes"] = [live_note]
    return record.with_extra(EXTRA_KEY, result)


@dataclass(frozen=True)
class _Found:
    """What the comparison found: every entry (in `positions` order where given), the checkpoint-only tensors as
    listed, and the checkpoint's units."""
    entries: list[Entry]
    positions: list[int] | None
    ck_only: list[dict[str, Any]]
    units: list[Unit]


@dataclass(frozen=True)
class _RulesUsed:
    """The ruleset chosen, every ruleset's score, the rules it was chosen from and the fp8 block size."""
    ruleset: Ruleset
    scores: Mapping[str, int]
    rules: Rules
    block: tuple[int, int]


def _result(record: ModelRecord, inv: CheckpointInventory, found: _Found, used: _RulesUsed,
            layout: tuple[bool | None, bool]) -> dict[str, Any]:
    """The checkpoint extra: verdict, summary, rules and every entry; `layout` is (compact: None for by size, plain
    names)."""
    entries, positions, ck_only, units = found.entries, found.positions, found.ck_only, found.units
    ruleset, scores, rules, block = used.ruleset, used.scores, used.rules, used.block
    compact, plain = layout
    counts = {"match": 0, "mismatch": 0, "missing": 0, "checkpoint-only": 0, "model-only": 0}
    model_el = {"match": 0, "mismatch": 0, "missing": 0, "checkpoint-only": 0, "model-only": 0}  # parameters only
    ck_only_el = ck_params = unexplained = notes = 0
    for e in entries:
        n = len(e.members) if type(e) is FamilyEntry else 1
        v = e.verdict
        counts[v] += n
        if e.parameter:
            model_el[v] += n * e.model_elements
            if v not in ("missing", "model-only"):
                ck_params += n * e.checkpoint_elements
        if v == "checkpoint-only":
            ck_only_el += n * e.checkpoint_elements
            if not e.explained:
                unexplained += n
        elif e.note and v != "model-only":  # its note is its verdict's why, counted apart
            notes += n
    matched, mismatched, missing = model_el["match"], model_el["mismatch"], model_el["missing"]
    scales_paired = sum(len(u.scales) for u in units)
    bad_scales = sum(1 for u in units if u.scales and not (
        u.scales_ok if u.scales_ok is not None else check_scales(u, block, rules.fp4_block)[0]))
    verdict = "match" if not (counts["mismatch"] or counts["missing"] or unexplained) else "mismatch"
    labels: dict[str, int] = {}
    for c in ck_only:
        labels[c["kind"]] = labels.get(c["kind"], 0) + 1
    if not counts["model-only"]:  # the format had a place for every model tensor: nothing to say
        del counts["model-only"]
    summary = {
        "model_parameters": record.summary.parameters,
        "checkpoint_parameters": ck_params,
        "matched": matched,
        "mismatched": mismatched,
        "missing": missing,
        "checkpoint_only": ck_only_el,
        "notes_count": notes,
        "tensors": counts,
        "checkpoint_tensors": len(inv.tensors),
        "checkpoint_only_kinds": labels,
        "unexplained": unexplained,
        "scales": {"paired": scales_paired, "weights_with_bad_scales": bad_scales},
    }
    if model_el["model-only"]:  # the format has no place for them: said apart, not failing
        summary["model_only"] = model_el["model-only"]
    stored = stored_totals(entries)
    if stored is not None:
        summary["stored"] = stored
    if compact or (compact is None and sum(counts.values()) > COMPACT_ABOVE):
        tensors = compact_entry_list(entries, plain, positions)
        ck_list = compact_checkpoint_only(ck_only)
    else:
        tensors = [e.to_json() for e in entries]
        ck_list = ck_only
    return {
        "source": inv.source,
        "revision": inv.revision,
        "model": inv.metadata.get("model"),
        "verdict": verdict,
        "summary": summary,
        "rules": {"ruleset": ruleset.describe(), "scores": dict(scores), "files": [os.path.basename(f) for f in
                                                                                   rules.files],
                  "fp8_block": list(block), "fp4_block": rules.fp4_block},
        "tensors": tensors,
        "modules": module_verdicts(record, entries, positions),
        "checkpoint_only": ck_list,
    }


#: The model tensor kinds whose checkpoint bytes are the weights' (buffers and tied second names left out).
STORED_KINDS = frozenset({WEIGHT, BIAS, SCALE, TABLE})


def stored_totals(entries: Iterable[Any]) -> dict[str, Any] | None:
    """What the checkpoint stores for the model's weights: ``{"bytes", "elements", "types": [{"type", "elements",
    "bytes"}]}`` summed over the matched entries of weights, biases, scales and tables (each checkpoint tensor once,
    its scales with it), the types by bytes, most first; None where a matched tensor's size is not known."""
    by: dict[str, list[int]] = {}
    for e in entries:
        if e.verdict != "match" or e.kind not in STORED_KINDS:
            continue
        if e.checkpoint_bytes is None:
            return None
        n = len(e.members) if type(e) is FamilyEntry else 1
        row = by.setdefault(e.checkpoint_dtype or "?", [0, 0])
        row[0] += n * e.checkpoint_elements
        row[1] += n * e.checkpoint_bytes
    types = [{"type": k, "elements": v[0], "bytes": v[1]} for k, v in sorted(by.items(), key=lambda kv: (-kv[1][1],
                                                                                                       kv[0]))]
    return {"bytes": sum(t["bytes"] for t in types), "elements": sum(t["elements"] for t in types), "types": types}


def _shapes(targets: Mapping[str, Any], aliases: Mapping[str, str]) -> dict[str, tuple[int, ...]]:
    """Each model tensor's shape by name, aliases (a tied output) with their target's."""
    out = {n: tuple(mt.rec.shape) for n, mt in targets.items()}
    out.update((a, out[t]) for a, t in aliases.items() if t in out)
    return out


def _plain_names(model_names: Iterable[str], inv: CheckpointInventory) -> bool:
    """Whether no model tensor's name and no checkpoint tensor's holds ``"{}"`` or a NUL character (the compact
    list's templates then are the names' splits, see ``compact_entry_list``, once no index has a leading zero)."""
    text = "/".join(model_names) + "/" + "/".join(inv.tensors)
    return "\x00" not in text and "{}" not in text


_LEADING_ZERO = re.compile(r"[./]0[0-9]+(?=[./]|$)")  # an index component "01" in names joined by "/"


def _leading_zero(*nums: Iterable[tuple[str, ...]]) -> bool:
    """Whether an index of these splits is a numeral with a leading zero ("01": a name of its own, not index 1)."""
    return any(n[0] == "0" and len(n) > 1 for n in set(chain.from_iterable(chain.from_iterable(nums))))


def check(record: ModelRecord, ck_spec: CheckpointInventory | str | os.PathLike[str],
          rules_file: str | os.PathLike[str] | None = None) -> ModelRecord:
    """``compare`` with a checkpoint spec and an optional user rules file."""
    if isinstance(ck_spec, str) and not ck_spec:
        raise CheckpointError("no checkpoint given", hint="pass a .safetensors file, folder, index or manifest")
    return compare(record, ck_spec, load_rules(rules_file))

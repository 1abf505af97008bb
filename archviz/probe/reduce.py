"""Reduction: a small copy of a model that keeps every width and every kind of layer, as a config transformation.

The execution probe cannot run a 300-billion-parameter model on a CPU, and it does not need to: what it checks (the
shapes of every module call) depends on the widths and on the kinds of layers, not on how many layers, experts or
vocabulary rows there are. `plans()` turns the full model's config into reduced configs, most reduced first:

- layers: the layers of every kind (kinds from `archviz.group.tree`, else from structural signatures), plus each one's
  sources (a layer that reuses another layer's KV needs that layer before it: for every list of layer ids in the
  config, `kv_source_layers`, `index_source_layers`, `engram_layer_ids`, ..., the nearest id at or before a kept layer
  is kept too). Per-layer lists (`compress_ratios`, `layer_types`) are cut to the kept layers, id lists renumbered,
  prefix counts (`n_hash_layers`, `first_k_dense_replace`) recounted. Should that copy not have the full model's
  structure, the next plan keeps the shortest prefix of the layer list that holds every kind; then all layers;
- routed experts: max(top-k, 4) (kept experts are the full model's experts of the same index); group-limited routing
  keeps its groups, with enough experts per group;
- vocabularies above 4,096 rows: 1,024 (ids drawn below it); n-gram tables (engram) scaled down with their buckets;
- max_seq_len / max_position_embeddings above 1,024: 1,024; multi-token-prediction layers the forward never calls: 0.

Every change is a `Reduction` (field, full value, reduced value), and `Plan.pairs` maps reduced dims back to full ones:
a reduced dim equal to the reduced value stands for the full value. `check_structure()` verifies a plan on a meta
build of the reduced config: every module of the copy is the full model's module at the mapped path, with the same
class and tensors (dims mapped back); every module of a kept layer is in the copy, save routed experts past the kept
count and dropped MTP layers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .. import format as fmt
from ..records import BUFFER, ModelRecord

# Config fields, by role.
_TOTAL_LAYER_FIELDS = ("n_layers", "num_hidden_layers", "num_layers", "n_layer", "n_layers_total")
_COUNT_FIELD = re.compile(r"^(n|num)_[a-z]+_layers$|^first_k_dense_replace$")
_MTP_FIELD = re.compile(r"(mtp|nextn)")
_SCALAR_ID_FIELD = re.compile(r"_layer(_id|_idx)?$")
_EXPERT_FIELDS = ("n_routed_experts", "num_local_experts", "num_experts", "n_experts", "moe_num_experts")
_TOPK_FIELDS = ("n_activated_experts", "num_experts_per_tok", "num_activated_experts", "moe_topk", "top_k",
                "experts_per_token")
_GROUP_FIELDS = ("n_expert_groups", "n_group", "num_expert_groups")
_LIMITED_FIELDS = ("n_limited_groups", "topk_group", "num_limited_groups")
_VOCAB_FIELDS = ("vocab_size", "n_vocab", "padded_vocab_size")
_SEQ_FIELDS = ("max_seq_len", "max_position_embeddings", "seq_length", "max_sequence_length", "n_positions")
_TABLE_ROWS = re.compile(r"(engram|ngram).*(num_embeddings|table_size|table_rows)")
_TABLE_BASE = re.compile(r"(engram|ngram).*vocab_size$")


@dataclass(frozen=True)
class Limits:
    """When a dim is cut, and to what."""

    vocab: int = 4096  # vocabularies above this many rows are cut ...
    vocab_target: int = 1024  # ... to about this many
    table_rows: int = 65536  # n-gram tables above this many rows are cut ...
    table_bucket_target: int = 4096  # ... with their bucket base (engram_vocab_size) brought down to this
    seq: int = 1024  # max_seq_len / max_position_embeddings above this are cut to it
    min_experts: int = 4  # routed experts kept: max(top-k, this)


@dataclass(frozen=True)
class Reduction:
    field: str
    full: Any
    reduced: Any
    why: str

    def as_json(self) -> dict[str, Any]:
        return {"field": self.field, "full": self.full, "reduced": self.reduced, "why": self.why}

    def line(self) -> str:
        return f"{self.field}: {_short(self.full)} → {_short(self.reduced)} ({self.why})"


def _short(v: Any) -> str:
    if isinstance(v, (list, tuple)) and len(v) > 8:
        return "[" + ", ".join(map(str, v[:6])) + f", … {len(v)} entries]"
    return str(v)


@dataclass
class Plan:
    """One reduced config and how its modules map back to the full model's."""

    method: str  # "layer kinds" | "layer prefix" | "all layers" | "none"
    overrides: dict[str, Any]  # config fields to set for the reduced build
    reductions: list[Reduction]
    layer_path: str | None = None  # the main layer list ("layers", "model.layers")
    kept_layers: tuple[int, ...] | None = None  # full indices of the layers kept, in order (None: all)
    full_layers: int = 0
    pairs: frozenset = frozenset()  # (full dim, reduced dim)
    dropped: tuple[str, ...] = ()  # module paths (and everything below) absent on purpose (MTP layers)
    experts: dict[str, int] = field(default_factory=dict)  # full experts container path -> experts kept
    notes: list[str] = field(default_factory=list)
    # A rank's share of the experts (world_size): full container path -> (its first expert in the model, its first
    # expert in the copy, the copy's count); a rank's experts pair by their place in its share, not their index.
    shares: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def reduces(self) -> bool:
        return bool(self.reductions)

    def _pos(self) -> dict[int, int]:
        pos = getattr(self, "_pos_cache", None)
        if pos is None:
            pos = {i: j for j, i in enumerate(self.kept_layers or ())}
            self._pos_cache = pos
        return pos

    def map_path(self, path: str) -> str | None:
        """The reduced copy's path for a full-model module path; None when its layer is not kept."""
        path = self._shift(path, 1)
        if self.kept_layers is None or self.layer_path is None:
            return path
        prefix = f"{self.layer_path}." if self.layer_path else ""
        if not path.startswith(prefix):
            return path
        rest = path[len(prefix):]
        head, dot, tail = rest.partition(".")
        if not head.isdigit():
            return path
        j = self._pos().get(int(head))
        if j is None:
            return None
        return f"{prefix}{j}{dot}{tail}"

    def unmap_path(self, path: str) -> str:
        """The full model's path for a reduced copy's module path."""
        return self._shift(self._unmap_layer(path), -1)

    def _unmap_layer(self, path: str) -> str:
        if self.kept_layers is None or self.layer_path is None:
            return path
        prefix = f"{self.layer_path}." if self.layer_path else ""
        if not path.startswith(prefix):
            return path
        rest = path[len(prefix):]
        head, dot, tail = rest.partition(".")
        if not head.isdigit() or int(head) >= len(self.kept_layers):
            return path
        return f"{prefix}{self.kept_layers[int(head)]}{dot}{tail}"

    def _shift(self, path: str, way: int) -> str:
        """A full path's expert index moved to the copy's (`way` 1) or back (-1), in a rank's share of experts."""
        for container, (first, reduced_first, _) in self.shares.items():
            if path.startswith(container + "."):
                head, dot, tail = path[len(container) + 1:].partition(".")
                if head.isdigit():
                    i = int(head) + way * (reduced_first - first)
                    return f"{container}.{i}{dot}{tail}"
        return path

    def share(self, full: ModelRecord, reduced: ModelRecord) -> "Plan":
        """This plan with each experts container's share (a rank's experts under world_size) paired by place:
        the copy's first expert of a container stands for the model's first."""
        shares: dict[str, tuple[int, int, int]] = {}
        rindex, findex = reduced.index(), full.index()
        for container in self.experts:
            f = findex.get(container)
            r = rindex.get(self.map_path(container) or "")
            fi = sorted(int(c.rsplit(".", 1)[-1]) for c in (f.children if f else ()) if c.rsplit(".", 1)[-1].isdigit())
            ri = sorted(int(c.rsplit(".", 1)[-1]) for c in (r.children if r else ()) if c.rsplit(".", 1)[-1].isdigit())
            if fi and ri:
                shares[container] = (fi[0], ri[0], len(ri))
        if not shares:
            return self
        import dataclasses

        return dataclasses.replace(self, shares=shares)

    def absent_reason(self, path: str) -> str | None:
        """Why a full-model module is not in the reduced copy (None: it should be there)."""
        if self.map_path(path) is None:
            return "layer not kept"
        for d in self.dropped:
            if path == d or path.startswith(d + "."):
                return "MTP layer dropped"
        for container, kept in self.experts.items():
            if path.startswith(container + "."):
                head = path[len(container) + 1:].split(".", 1)[0]
                first, _, count = self.shares.get(container, (0, 0, kept))
                if head.isdigit() and int(head) - first >= count:
                    return "routed expert not kept"
        return None

    def dims_agree(self, full: int, reduced: int) -> bool:
        return full == reduced or (full, reduced) in self.pairs

    def as_json(self) -> dict[str, Any]:
        return {"method": self.method, "reductions": [r.as_json() for r in self.reductions],
                "layer_list": self.layer_path, "layers_kept": list(self.kept_layers) if self.kept_layers is not None
                else None, "layers": self.full_layers, "notes": list(self.notes)}


# ---------------------------------------------------------------------------------------------------------------------
# Planning


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(_is_int(x) for x in v)


def _taken(record: ModelRecord, config: dict[str, Any]) -> set[int]:
    taken: set[int] = set()
    for m in record.modules:
        for t in m.tensors:
            taken.update(int(d) for d in t.shape)
    for v in config.values():
        if _is_int(v):
            taken.add(v)
        elif _int_list(v):
            taken.update(v)
    return taken


def layer_kinds(record: ModelRecord) -> tuple[str | None, list[list[int]]]:
    """(path of the main layer list, each kind's layer indices), from `archviz.group.tree` when it is there, else from
    structural signatures (class and tensor shapes of the subtree, numbers of layers left out)."""
    try:
        from ..group import group
    except ImportError:
        group = None  # type: ignore[assignment]
    if group is not None:
        g = record.extra("grouping") or group(record).extra("grouping")
        layers = g.get("layers") if g else None
        if not layers:
            return None, []
        kinds = [sorted(int(i) for i in k["layers"] if isinstance(i, int) or str(i).isdigit()) for k in layers["kinds"]]
        return layers["path"], [k for k in kinds if k]
    return _signature_kinds(record)


def _signature_kinds(record: ModelRecord) -> tuple[str | None, list[list[int]]]:
    index = record.index()
    best: tuple[str, list[str]] | None = None
    for m in record.modules:
        if m.class_name in ("ModuleList", "Sequential") and len(m.children) > 1 and all(
                c.rsplit(".", 1)[-1].isdigit() for c in m.children):
            if best is None or index[m.path].totals.parameters > index[best[0]].totals.parameters:
                best = (m.path, list(m.children))
    if best is None:
        return None, []
    path, items = best
    sigs: dict[tuple, list[int]] = {}
    for item in items:
        cut = len(item)
        parts = []
        for m in record.modules:
            if m.path == item or m.path.startswith(item + "."):
                attrs = tuple((k, v) for k, v in m.attributes if "layer" not in k and "idx" not in k
                              and not isinstance(v, (list, dict)))
                parts.append((m.path[cut:], m.class_name, tuple((t.name, t.shape, t.dtype) for t in m.tensors),
                              attrs))
        sigs.setdefault(tuple(parts), []).append(int(item.rsplit(".", 1)[-1]))
    return path, list(sigs.values())


def _experts(config: dict[str, Any], limits: Limits, world_size: int = 1
             ) -> tuple[dict[str, Any], list[Reduction], list[str]]:
    out: dict[str, Any] = {}
    reds: list[Reduction] = []
    notes: list[str] = []
    for key, value in config.items():
        if not _is_int(value) or value <= 0:
            continue
        name = next((n for n in _EXPERT_FIELDS if key == n or key.endswith("_" + n)), None)
        if name is None:
            continue
        prefix = key[: len(key) - len(name)]
        k = next((config[prefix + t] for t in _TOPK_FIELDS if _is_int(config.get(prefix + t))
                  and config[prefix + t] > 0), None)
        if k is None:
            notes.append(f"{key}: no top-k field found beside it; experts kept")
            continue
        target = max(k, limits.min_experts)
        groups_key = next((prefix + g for g in _GROUP_FIELDS if _is_int(config.get(prefix + g))), None)
        limited_key = next((prefix + g for g in _LIMITED_FIELDS if _is_int(config.get(prefix + g))), None)
        groups = config[groups_key] if groups_key else 1
        if groups > 1:
            limited = config[limited_key] if limited_key else groups
            # Each group keeps >= 2 experts (group scores sum a group's top 2), the limited groups hold >= top-k.
            target = max(target, 2 * groups)
            target = math.ceil(target / groups) * groups
            while limited * (target // groups) < k:
                target += groups
        if world_size > 1 and value % world_size == 0:  # every rank holds a whole share of the kept experts
            step = math.lcm(groups, world_size)
            target = math.ceil(target / step) * step
        if target >= value:
            continue
        out[key] = target
        why = f"routed experts: max(top-k, {limits.min_experts})"
        if groups > 1:
            why += f", {groups} groups of {target // groups} kept"
        reds.append(Reduction(key, value, target, why))
    return out, reds, notes


def _vocab(config: dict[str, Any], limits: Limits, taken: set[int], world_size: int = 1
           ) -> tuple[dict[str, Any], list[Reduction]]:
    out: dict[str, Any] = {}
    reds: list[Reduction] = []
    for key in _VOCAB_FIELDS:
        v = config.get(key)
        if not _is_int(v) or v <= limits.vocab:
            continue
        t0 = limits.vocab_target
        cands = [t0] + [t0 - 24 + 8 * i for i in range(64) if t0 - 24 + 8 * i != t0]
        if world_size > 1 and v % world_size == 0:  # sharded by rows: each rank's share whole, and unmistakable
            cands = [c for c in cands if c % world_size == 0 and c // world_size not in taken] or [t0 * world_size]
        target = next((c for c in cands if c not in taken), cands[0])
        out[key] = target
        reds.append(Reduction(key, v, target, "vocabulary cut (token ids drawn below it)"))
        # Companions: a compressed vocabulary no larger than the vocabulary, token ids inside it.
        for k2, v2 in config.items():
            if k2 == key:
                continue
            if "compressed_vocab_size" in k2 and _is_int(v2) and v2 > target:
                out[k2] = target
                reds.append(Reduction(k2, v2, target, f"follows {key}"))
            elif k2.endswith("token_id") and _is_int(v2) and v2 >= target:
                out[k2] = target - 1
                reds.append(Reduction(k2, v2, target - 1, f"a token id inside the cut {key}"))
            elif k2.endswith("token_id") and _int_list(v2) and any(x >= target for x in v2):
                nv = [x if x < target else target - 1 for x in v2]
                out[k2] = nv
                reds.append(Reduction(k2, v2, nv, f"token ids inside the cut {key}"))
    return out, reds


def _tables(config: dict[str, Any], limits: Limits) -> tuple[dict[str, Any], list[Reduction]]:
    out: dict[str, Any] = {}
    reds: list[Reduction] = []
    rows_keys = [k for k, v in config.items() if _TABLE_ROWS.search(k) and (_is_int(v) or (_int_list(v) and v))]
    big = [k for k in rows_keys if max(config[k] if _int_list(config[k]) else [config[k]]) > limits.table_rows]
    if not big:
        return out, reds
    base_key = next((k for k, v in config.items() if _TABLE_BASE.search(k) and "compressed" not in k and _is_int(v)
                     and v > limits.table_bucket_target), None)
    if base_key is not None:
        old_base = config[base_key]
        new_base = limits.table_bucket_target
        out[base_key] = new_base
        reds.append(Reduction(base_key, old_base, new_base, "n-gram bucket base cut"))
        scale = 2.0 * new_base / old_base  # twice the proportional rows: primes are sparser higher up
    else:
        scale = None
    for k in big:
        v = config[k]
        vals = list(v) if _int_list(v) else [v]
        new = [min(x, math.ceil(x * scale)) if scale is not None else min(x, limits.table_rows) for x in vals]
        nv: Any = new if _int_list(v) else new[0]
        out[k] = nv
        reds.append(Reduction(k, v, nv, "n-gram table rows cut"))
    return out, reds


def _seq(config: dict[str, Any], limits: Limits) -> tuple[dict[str, Any], list[Reduction]]:
    out: dict[str, Any] = {}
    reds: list[Reduction] = []
    for key in _SEQ_FIELDS:
        v = config.get(key)
        if _is_int(v) and v > limits.seq:
            out[key] = limits.seq
            reds.append(Reduction(key, v, limits.seq, "cache length cut (the probe runs a few positions)"))
    return out, reds


def _pairs(reductions: Iterable[Reduction], world_size: int = 1) -> frozenset:
    """(full dim, reduced dim) of every reduction; under `world_size` N, a rank's share of each too (a vocabulary of
    129,280 rows cut to 1,000 is 64,640 and 500 rows at N = 2)."""
    pairs = set()
    for r in reductions:
        if _is_int(r.full) and _is_int(r.reduced):
            pairs.add((r.full, r.reduced))
            if world_size > 1 and r.full % world_size == 0 and r.reduced % world_size == 0:
                pairs.add((r.full // world_size, r.reduced // world_size))
        elif _int_list(r.full) and _int_list(r.reduced) and len(r.full) == len(r.reduced):
            pairs.update(zip(r.full, r.reduced))
    return frozenset(pairs)


def _mtp(config: dict[str, Any], record: ModelRecord) -> tuple[str | None, int, int, tuple[str, ...]]:
    """(MTP count field, its value, value kept, paths dropped): MTP layers the forward never calls are dropped."""
    key = next((k for k, v in config.items() if _MTP_FIELD.search(k) and "layer" in k and _is_int(v) and v > 0),
               None)
    if key is None:
        return None, 0, 0, ()
    n = config[key]
    tops = [m for m in record.modules if m.path and "." not in m.path and _MTP_FIELD.search(m.path)]
    if not tops:
        return None, 0, 0, ()  # no MTP modules built (transformers): nothing to drop
    called = any(m.called for m in record.modules for t in tops if m.path == t.path or m.path.startswith(t.path + "."))
    keep = min(n, 1) if called else 0
    return key, n, keep, tuple(t.path for t in tops) if keep == 0 else ()


def plans(record: ModelRecord, config: dict[str, Any], *, limits: Limits = Limits(),
          kinds: tuple[str | None, list[list[int]]] | None = None, world_size: int = 1) -> list[Plan]:
    """Candidate reduced configs, most reduced first (see the module docstring); the last plan reduces nothing.
    `world_size` N (a rank's records): every sharded count it cuts stays divisible by N (vocabulary rows, routed
    experts), and a rank's share of each maps back to the full model's share."""
    config = dict(config)
    taken = _taken(record, config)
    base: dict[str, Any] = {}
    reds: list[Reduction] = []
    notes: list[str] = []
    ov, rs, ns = _experts(config, limits, world_size)
    base.update(ov)
    reds += rs
    notes += ns
    for fn in (lambda c: _vocab(c, limits, taken, world_size), lambda c: _tables(c, limits),
               lambda c: _seq(c, limits)):
        ov, rs = fn(config)
        base.update(ov)
        reds += rs
    pairs = _pairs((r for r in reds if not r.why.startswith("a token id") and not r.why.startswith("token ids")),
                   world_size)
    mtp_key, mtp_full, mtp_keep, dropped = _mtp(config, record)
    if mtp_key is not None and mtp_keep != mtp_full:
        base[mtp_key] = mtp_keep
        reds.append(Reduction(mtp_key, mtp_full, mtp_keep, "multi-token-prediction layers (never called by forward)"))
    experts = _expert_containers(record, base, config)

    layer_path, kind_lists = kinds if kinds is not None else layer_kinds(record)
    total_key = None
    n_layers = 0
    if layer_path is not None:
        count = sum(1 for m in record.modules if m.parent == layer_path and m.name.isdigit())
        total_key = next((k for k in _TOTAL_LAYER_FIELDS if config.get(k) == count), None)
        n_layers = count
    out: list[Plan] = []
    if total_key is not None and kind_lists and n_layers > 1:
        n_mtp = mtp_full if mtp_key else 0
        keep_mtp = mtp_keep if mtp_key else 0
        reps = sorted({k[0] for k in kind_lists})
        forced = {v for k, v in config.items() if _SCALAR_ID_FIELD.search(k) and "mtp" not in k and _is_int(v)
                  and 0 <= v < n_layers}
        subset = _closure(set(reps) | forced, config, n_layers, n_mtp)
        # A list of layer ids none of which is kept, that the model's code reads (the layers an MTP head reads its
        # input from): kept whole, so the feature it drives stays on at its full width.
        read = _read_fields(record)
        for k, ids in _id_lists(config, n_layers, n_mtp).items():
            members = [s for s in ids if s < n_layers]
            if members and not subset & set(members) and k in read:
                subset = _closure(subset | set(members), config, n_layers, n_mtp)
                notes.append(f"{k}: none of its layers is a kind's first; all of them kept")
        prefix = list(range(max(subset) + 1))
        seen: set[tuple[int, ...]] = set()
        for method, kept in (("layer kinds", sorted(subset)), ("layer prefix", prefix)):
            if tuple(kept) in seen or len(kept) >= n_layers:
                continue
            seen.add(tuple(kept))
            ov, rs = _layer_fields({**config, **base}, total_key, n_layers, n_mtp, keep_mtp, kept)
            overrides = {**base, **ov}
            out.append(Plan(method, overrides, rs + reds, layer_path, tuple(kept), n_layers, pairs, dropped,
                            experts, list(notes)))
    if base:
        out.append(Plan("all layers", dict(base), list(reds), layer_path, None, n_layers, pairs, dropped, experts,
                        list(notes)))
    out.append(Plan("none", {}, [], layer_path, None, n_layers, frozenset(), (), {}, list(notes)))
    return out


def _read_fields(record: ModelRecord) -> set[str]:
    """Config fields the model's source files read as an attribute (`args.name`, `config.name`)."""
    text = []
    for _, path in record.source.files:
        try:
            with open(path, encoding="utf-8") as f:
                text.append(f.read())
        except OSError:
            continue
    return set(re.findall(r"\.([A-Za-z_]\w*)", "\n".join(text)))


def _expert_containers(record: ModelRecord, base: dict[str, Any], config: dict[str, Any]) -> dict[str, int]:
    """Full experts containers whose experts are cut, with the number kept."""
    out: dict[str, int] = {}
    for moe in record.summary.moe:
        for key, new in base.items():
            if any(key == n or key.endswith("_" + n) for n in _EXPERT_FIELDS) and config.get(key) == moe.experts:
                out[moe.path] = new
                break
    return out


def _closure(kept: set[int], config: dict[str, Any], n_layers: int, n_mtp: int) -> set[int]:
    """Add each kept layer's sources: for every list of layer ids, the nearest id at or before it."""
    lists = [v for k, v in _id_lists(config, n_layers, n_mtp).items()]
    kept = set(kept)
    while True:
        add = set()
        for i in kept:
            for ids in lists:
                before = [s for s in ids if s <= i and s < n_layers]
                if before and max(before) not in kept:
                    add.add(max(before))
        if not add:
            return kept
        kept |= add


def _id_lists(config: dict[str, Any], n_layers: int, n_mtp: int) -> dict[str, list[int]]:
    out = {}
    for k, v in config.items():
        if "layer" in k and _int_list(v) and v and list(v) == sorted(set(v)) and all(0 <= x < n_layers + n_mtp
                                                                                     for x in v):
            out[k] = list(v)
    return out


def _layer_fields(config: dict[str, Any], total_key: str, n_layers: int, n_mtp: int, keep_mtp: int,
                  kept: list[int]) -> tuple[dict[str, Any], list[Reduction]]:
    out: dict[str, Any] = {total_key: len(kept)}
    reds = [Reduction(total_key, n_layers, len(kept),
                      f"layers: {fmt.ranges_text(kept)} kept (every kind and its sources)")]
    pos = {i: j for j, i in enumerate(kept)}
    ids = _id_lists(config, n_layers, n_mtp)
    for k, v in config.items():
        if k == total_key:
            continue
        if k in ids:
            new = [pos[s] for s in v if s in pos] + [len(kept) + (s - n_layers) for s in v
                                                     if n_layers <= s < n_layers + keep_mtp]
            if new != list(v):
                out[k] = new
                reds.append(Reduction(k, v, new, "layers: ids renumbered"))
            # Lists running beside an id list (engram_num_embeddings beside engram_layer_ids) follow it.
            stem = k.split("_")[0]
            for k2, v2 in config.items():
                if k2 != k and k2.startswith(stem + "_") and isinstance(v2, (list, tuple)) and len(v2) == len(v) \
                        and k2 not in ids and len(v) not in (n_layers, n_layers + n_mtp):
                    nv = [x for s, x in zip(v, v2) if s in pos]
                    if nv != list(v2):
                        out[k2] = nv
                        reds.append(Reduction(k2, v2, nv, f"layers: follows {k}"))
        elif _is_int(v) and _COUNT_FIELD.search(k) and not _MTP_FIELD.search(k) and 0 < v <= n_layers:
            new = sum(1 for s in kept if s < v)
            if new != v:
                out[k] = new
                reds.append(Reduction(k, v, new, "layers: a prefix count, recounted"))
        elif _is_int(v) and _SCALAR_ID_FIELD.search(k) and 0 <= v < n_layers and v in pos:
            if pos[v] != v:
                out[k] = pos[v]
                reds.append(Reduction(k, v, pos[v], "layers: id renumbered"))
        elif isinstance(v, (list, tuple)) and len(v) in (n_layers, n_layers + n_mtp) and len(v) > 0:
            new = [v[i] for i in kept] + list(v[n_layers:n_layers + keep_mtp])
            if new != list(v):
                out[k] = new
                reds.append(Reduction(k, v, new, "layers: per-layer list cut to the kept layers"))
    return out, reds


# ---------------------------------------------------------------------------------------------------------------------
# Verification


def check_structure(full: ModelRecord, reduced: ModelRecord, plan: Plan, limit: int = 5) -> list[str]:
    """Where the reduced copy is not the full model's structure with the plan's reductions (empty: it is)."""
    problems: list[str] = []
    findex = full.index()
    rpaths = {m.path for m in reduced.modules}
    for m in reduced.modules:
        fp = plan.unmap_path(m.path)
        f = findex.get(fp)
        if f is None:
            problems.append(f"{m.path}: in the reduced copy, not in the model (as {fp})")
        elif f.class_name != m.class_name:
            problems.append(f"{m.path}: {m.class_name} in the reduced copy, {f.class_name} in the model ({fp})")
        else:
            bad = _tensor_mismatch(f, m, plan)
            if bad:
                problems.append(f"{m.path}: {bad}")
        if len(problems) >= limit:
            return problems
    for f in full.modules:
        rp = plan.map_path(f.path)
        if rp is None or rp in rpaths:
            continue
        if plan.absent_reason(f.path) is None:
            problems.append(f"{f.path}: missing from the reduced copy (as {rp})")
            if len(problems) >= limit:
                break
    return problems


def _tensor_mismatch(f: Any, r: Any, plan: Plan) -> str | None:
    ft = {t.name: t for t in f.tensors}
    rt = {t.name: t for t in r.tensors}
    if set(ft) != set(rt):
        return f"tensors {sorted(rt)} vs the model's {sorted(ft)}"
    for name, a in ft.items():
        b = rt[name]
        if a.dtype != b.dtype or len(a.shape) != len(b.shape):
            return f"{name} {b.dtype}{list(b.shape)} vs the model's {a.dtype}{list(a.shape)}"
        if a.kind == BUFFER:
            continue  # caches are sized by max_seq_len / max_batch_size: rank and dtype only
        if not all(plan.dims_agree(x, y) for x, y in zip(a.shape, b.shape)):
            return f"{name} {list(b.shape)} vs the model's {list(a.shape)}"
    return None


__all__ = ["Limits", "Reduction", "Plan", "plans", "check_structure", "layer_kinds"]

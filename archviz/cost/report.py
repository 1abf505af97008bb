"""The cost of a model as small frozen records, derived (a pure function, no torch) from the records' `cost` extra
that `archviz.cost.measure` attaches. Renderers (archviz/render/cost.py, the site) read these, or the extra itself:

    extras["cost"] = {"batch": B, "seq": T, "context": L,
                      "prefill" | "decode": {"B", "T", "start", "flops": {module path: own FLOPs over the pass},
                                             "calls": {path: calls}, "unknown": {path: [reason]}, "notes": [str],
                                             "attended_flops": FLOPs over the positions masks keep,
                                             "masked_flops": {path: FLOPs spent on masked positions}},
                      "kv": {"source": str, "entries": [{"path", "name", "layer", "dtype", "element_bytes", "width",
                                                         "ratio", "slots", "fixed"?, "what"}]},
                      "layer_list": path | None, "layer_kinds": {layer number: kind name},
                      "activation_peak": bytes, "notes": [str]}

A module's FLOPs per call are `flops[path] / calls[path]` (own ops only; its subtree's are the sum over the paths
under it); the site multiplies them by a node's multiplicity as it does parameters.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from ..paths import compress_paths
from .kv import element_bytes, entry_bytes, per_token_bytes
from .memory import stored_weights, training_bytes, weight_bytes
from .provenance import config_said

_ATTENTION = ("attn", "attention", "self_attn", "cross_attn", "mixer", "attn_layer")
_MLP = ("mlp", "ffn", "moe", "experts", "expert", "feed_forward", "block_sparse_moe", "shared_experts",
        "shared_expert", "dense")


def part_of(path: str, layer_list: str | None = None) -> str:
    """attention | mlp | other: the outermost name on the path (below the layer) that says which."""
    rest = path
    if layer_list and path.startswith(layer_list + "."):
        rest = path[len(layer_list) + 1:]
        head, _, tail = rest.partition(".")
        if head.isdigit():  # the layer's number says nothing: every layer's paths share one answer
            rest = tail
    return _part(rest)


@functools.lru_cache(maxsize=1 << 16)
def _part(rest: str) -> str:
    for name in rest.split("."):
        low = name.lower()
        if low in _ATTENTION or low.endswith("attn") or "attention" in low:
            return "attention"
        if low in _MLP or low.endswith("mlp") or "expert" in low or low.startswith("ffn") or low.endswith("moe"):
            return "mlp"
    return "other"


class _Parts:
    """attention | mlp | other of a pass's FLOPs, by the names on the path (`part_of`), else by the ops: products of two
    activations (`mixing_flops`: scores and their weighted sums, retention, linear attention, scans) are attention
    wherever they run; a module the name calls neither is attention when its subtree holds such products, and the
    feed-forward when it holds an expanding Linear and the one contracting back (a Conformer's `ff1`, a ViT
    block's fc1/fc2 pair); a layer's own leaf projections beside its own scores are attention's."""

    def __init__(self, record: Any, layer_list: str | None, stacks: Any, mixing: dict[str, int]):
        self.index = record.index()
        self.layer_list = layer_list
        self.roots = tuple(r + "." for r in (layer_list, *stacks) if r)
        self.mixing = mixing
        self.sub_mix: set[str] = set()
        for path in mixing:
            parts = path.split(".")
            self.sub_mix.update(".".join(parts[:i]) for i in range(len(parts) + 1))
        # outside the layers, only the modules that mix and what they hold (an encoder holding an LSTM is not)
        self.near_mix = set(mixing)
        self._pairs: dict[str, frozenset[str]] = {}

    def split(self, path: str, n: int) -> list[tuple[str, int]]:
        named = part_of(path, self.layer_list)
        if named != "other":  # the code's own name says (an `mlp` whose experts' weights are gathered per token)
            return [(named, n)]
        m = min(self.mixing.get(path, 0), n)
        return [(k, v) for k, v in (("attention", m), (self.part(path), n - m)) if v]

    def part(self, path: str) -> str:
        if not path:
            return "other"
        layer = next((r + path[len(r):].split(".", 1)[0] for r in self.roots if path.startswith(r)), "")
        rel = path[len(layer) + 1:] if layer else path
        parts = rel.split(".") if rel else []
        for depth in range(1, len(parts) + 1):
            q = ".".join(filter(None, (layer, *parts[:depth])))
            if q in (self.sub_mix if layer else self.near_mix):
                return "attention"
            if self.pair(q):
                return "mlp"
        if len(parts) == 1:  # a leaf of the layer's own: its pair, or its projections beside its own scores
            if path in self.pair(layer):
                return "mlp"
            if self.mixing.get(layer):
                return "attention"
        return "other"

    def pair(self, path: str) -> frozenset[str]:
        """The children of `path` that make a feed-forward pair: a Linear-like [h, d] and one [d, h] back, h > d
        (and a third [h, d] of a gated one)."""
        got = self._pairs.get(path)
        if got is None:
            m = self.index.get(path)
            shapes: dict[str, tuple] = {}
            for c in m.children if m is not None else ():
                w = next((t.shape for t in self.index[c].tensors if t.name == "weight" and len(t.shape) == 2), None)
                if w is not None and not self.index[c].children:
                    shapes[c] = tuple(w)
            ups = {c for c, (o, i) in shapes.items() if o > i and any(s == (i, o) for s in shapes.values())}
            downs = {c for c, (o, i) in shapes.items() if i > o and any(s == (i, o) for s in shapes.values())}
            got = self._pairs[path] = frozenset(ups | downs) if ups and downs else frozenset()
        return got


@dataclass(frozen=True, slots=True)
class KindFlops:
    kind: str  # the layer kind (grouping's name), or "outside the layers"
    layers: int
    flops: int  # all layers of the kind together


@dataclass(frozen=True, slots=True)
class ModuleFlops:
    path: str  # a module; in a layer: the first layer of its kind's
    kind: str  # its layer's kind, or "outside the layers"
    count: int  # layers of the kind (1 outside the layers)
    flops: int  # the subtree's over the pass, for this one module (× count for the kind)
    calls: int  # calls of the module itself


@dataclass(frozen=True, slots=True)
class PassCost:
    batch: int
    tokens: int  # new tokens in the pass: T for a prefill, 1 for a decode step
    start: int  # position of the first: 0, or the context L
    flops: int
    attention: int
    mlp: int
    other: int
    by_kind: tuple[KindFlops, ...]
    modules: tuple[ModuleFlops, ...]  # the largest subtrees first (at most 12 shown by renderers)
    unknown: tuple[tuple[str, tuple[str, ...]], ...]  # modules whose FLOPs cannot be known, and why
    notes: tuple[str, ...]
    attended_flops: int | None = None  # over the positions masks keep (archviz/cost/masks.py); None: not measured
    masked_flops: tuple[tuple[str, int], ...] = ()  # FLOPs on masked positions, by module path
    unknown_calls: tuple[tuple[str, int], ...] = ()  # each reason of `unknown` and the calls it was met in

    @property
    def per_token(self) -> float:
        return self.flops / max(1, self.batch * self.tokens)


@dataclass(frozen=True, slots=True)
class KVEntry:
    path: str
    name: str
    layer: int | None
    kind: str  # the layer kind
    dtype: str  # the code's
    what: str
    per_token: float  # bytes a token adds, one sequence
    at_context: float  # bytes at (B, L)


@dataclass(frozen=True, slots=True)
class KVKind:
    kind: str
    layers: int
    per_token: float
    at_context: float


@dataclass(frozen=True, slots=True)
class KVCost:
    source: str | None
    dtypes: tuple[str, ...]  # the code's dtypes of the entries
    asked: str | None  # kv_dtype
    per_token: float  # bytes per token, one sequence
    at_context: float  # bytes at (B, L)
    fixed: float  # of which fixed per sequence (windows, states), at B
    by_kind: tuple[KVKind, ...]
    entries: tuple[KVEntry, ...]


@dataclass(frozen=True, slots=True)
class MemoryCost:
    weights_by_dtype: tuple[tuple[str, int], ...]
    weights: int
    kv: float
    activation_peak: int | None
    serving: float  # weights + kv + activation peak
    training: tuple[tuple[str, Any], ...]  # weights, gradients, optimizer, total, formula
    stored_in: str | None = None  # the checkpoint whose stored bytes (quant mix) the weights are; None: the code's


@dataclass(frozen=True, slots=True)
class Reprojection:
    """Weights the code's decode step applies to every cached position, not to the new token alone: a cache of
    latents expanded again each step (MLA as transformers writes it re-runs kv_b_proj over all L + 1 positions)."""
    paths: tuple[str, ...]  # the modules, compressed (model.layers.{0-60}.self_attn.kv_b_proj)
    positions: int  # positions each runs over in the step (L + 1)
    flops: int  # theirs, in the decode step
    once: int  # theirs for the new tokens alone: what a form that absorbs the weights into the query and the
    #            output (the cache's latents read as they are) spends on them instead


@dataclass(frozen=True, slots=True)
class CostReport:
    name: str
    spec: str
    model_class: str
    batch: int
    seq: int
    context: int
    prefill: PassCost
    decode: PassCost | None
    kv: KVCost
    memory: MemoryCost
    notes: tuple[str, ...]
    dtype: str | None = None  # the dtype the model was counted in (None: as its code builds it)
    dtype_said: str = ""  # where it came from, for a reader: "bfloat16 (the config names none)"
    config_said: str | None = None  # "transformers' default config for TYPE" for hf:TYPE, else None
    reprojection: Reprojection | None = None  # the decode step's re-expansion of cached latents, where there is one
    unit: str = "token"  # what the prefill's figures are per: a token, or an image, denoising step, audio window...
    inputs: str | None = None  # the pass's input shapes where it is not over tokens ("[B, 4, 32, 32], [B], [B]")

    @property
    def decode_absorbed(self) -> int | None:
        """The decode step's FLOPs with the cache's latents read as they are (the re-projection's weights applied
        to the new tokens alone), the wider dot products over the latents that such a form runs not counted: None
        where the code re-projects nothing."""
        if self.decode is None or self.reprojection is None:
            return None
        return self.decode.flops - self.reprojection.flops + self.reprojection.once


def _modules(record: Any, subtree: dict[str, int], calls: dict[str, int], layer_list: str | None,
             kinds: dict[int, str]) -> tuple[ModuleFlops, ...]:
    """Each layer kind's first layer and its children, and the modules outside the layer list, with FLOPs."""
    index = record.index()
    out: list[ModuleFlops] = []
    counts: dict[str, int] = {}
    for k in kinds.values():
        counts[k] = counts.get(k, 0) + 1
    if layer_list and layer_list in index:
        seen: set[str] = set()
        for c in index[layer_list].children:
            head = c.rsplit(".", 1)[-1]
            kind = kinds.get(int(head), "layer") if head.isdigit() else "layer"
            if kind in seen:
                continue
            seen.add(kind)
            n = counts.get(kind, 1)
            out.append(ModuleFlops(c, kind, n, subtree.get(c, 0), calls.get(c, 0)))
            for g in index[c].children:
                if subtree.get(g):
                    out.append(ModuleFlops(g, kind, n, subtree[g], calls.get(g, 0)))
    others = _other_stacks(record, layer_list)
    above = set()
    for lst in (layer_list, *others) if layer_list else ():
        parts = lst.split(".")
        above |= {".".join(parts[:i]) for i in range(len(parts))}
    stack = [""]
    while stack:
        p = stack.pop()
        for c in index[p].children if p in index else ():
            if c == layer_list:
                continue
            if c in others:  # another stack of blocks (Flux's single blocks beside its double ones): its first block
                items = index[c].children
                n = len(items)
                out.append(ModuleFlops(items[0], c, n, subtree.get(items[0], 0), calls.get(items[0], 0)))
                out.extend(ModuleFlops(g, c, n, subtree[g], calls.get(g, 0)) for g in index[items[0]].children
                           if subtree.get(g))
            elif c in above:
                stack.append(c)
            elif subtree.get(c):
                out.append(ModuleFlops(c, "outside the layers", 1, subtree[c], calls.get(c, 0)))
    if not layer_list and subtree.get(""):
        out = [ModuleFlops(c, "outside the layers", 1, subtree[c], calls.get(c, 0))
               for c in index[""].children if subtree.get(c)]
    return tuple(out)


def _other_stacks(record: Any, layer_list: str | None) -> dict[str, int]:
    """{path: blocks} of the stacks of blocks other than the layer list (archviz.group.layers.layer_stacks), each
    a kind of its own in the cost tables, never "outside the layers"."""
    if not layer_list:
        return {}
    from ..group.layers import layer_stacks

    return {m.path: len(m.children) for m in layer_stacks(record)
            if m.path != layer_list and len(m.children) > 1 and m.path}


def _pass_cost(d: dict[str, Any], record: Any, layer_list: str | None, kinds: dict[int, str]) -> PassCost:
    flops: dict[str, int] = d["flops"]
    calls: dict[str, int] = d.get("calls", {})
    parts = {"attention": 0, "mlp": 0, "other": 0}
    by_kind: dict[str, int] = {}
    prefix = (layer_list + ".") if layer_list else None
    others = _other_stacks(record, layer_list)
    split = _Parts(record, layer_list, others, d.get("mixing_flops") or {}).split
    for path, n in flops.items():
        for part, k in split(path, n):
            parts[part] += k
        kind = "outside the layers"
        if prefix and path.startswith(prefix):
            head = path[len(prefix):].split(".", 1)[0]
            kind = kinds.get(int(head), "layer") if head.isdigit() else kind
        else:
            kind = next((o for o in others if path.startswith(o + ".")), kind)
        by_kind[kind] = by_kind.get(kind, 0) + n
    counts: dict[str, int] = {o: n for o, n in others.items()}
    for k in kinds.values():
        counts[k] = counts.get(k, 0) + 1
    subtree: dict[str, int] = {}
    for m in reversed(record.modules):
        subtree[m.path] = flops.get(m.path, 0) + sum(subtree.get(c, 0) for c in m.children)
    modules = _modules(record, subtree, calls, layer_list, kinds)
    return PassCost(batch=d["B"], tokens=d["T"], start=d["start"], flops=sum(flops.values()),
                    attention=parts["attention"], mlp=parts["mlp"], other=parts["other"],
                    by_kind=tuple(KindFlops(k, counts.get(k, 0), n) for k, n in
                                  sorted(by_kind.items(), key=lambda kv: -kv[1])),
                    modules=modules,
                    unknown=tuple((p, tuple(w)) for p, w in sorted(d.get("unknown", {}).items())),
                    notes=tuple(d.get("notes", ())), attended_flops=d.get("attended_flops"),
                    masked_flops=tuple(sorted((d.get("masked_flops") or {}).items())),
                    unknown_calls=tuple(sorted((d.get("unknown_calls") or {}).items())))


def cost_report(record: Any, kv_dtype: str | None = None) -> CostReport:
    """The cost records of `record` (which must carry the `cost` extra); `kv_dtype` (a torch dtype name) asks the
    KV cache's bytes in that dtype instead of the code's."""
    c = record.extra("cost")
    if not c:
        raise ValueError("these records carry no cost (run `archviz cost`)")
    layer_list = c.get("layer_list")
    kinds = {int(k): v for k, v in (c.get("layer_kinds") or {}).items()}
    B, L = c["batch"], c["context"]
    prefill = _pass_cost(c["prefill"], record, layer_list, kinds)
    decode = _pass_cost(c["decode"], record, layer_list, kinds) if c.get("decode") else None
    asked = element_bytes(kv_dtype) if kv_dtype else None
    entries = []
    by_kind: dict[str, list] = {}
    for e in c["kv"]["entries"]:
        layer = e.get("layer")
        kind = kinds.get(layer, "layer") if layer is not None else "outside the layers"
        entry = KVEntry(path=e["path"], name=e["name"], layer=layer, kind=kind, dtype=e["dtype"], what=e["what"],
                        per_token=per_token_bytes(e, asked), at_context=entry_bytes(e, B, L, asked))
        entries.append(entry)
        k = by_kind.setdefault(kind, [set(), 0.0, 0.0])
        k[0].add(layer)
        k[1] += entry.per_token
        k[2] += entry.at_context
    kv = KVCost(source=c["kv"].get("source"), dtypes=tuple(sorted({e.dtype for e in entries})), asked=kv_dtype,
                per_token=sum(e.per_token for e in entries), at_context=sum(e.at_context for e in entries),
                fixed=sum(e.at_context for e in entries if not e.per_token),
                by_kind=tuple(KVKind(k, len(v[0]), v[1], v[2]) for k, v in by_kind.items()),
                entries=tuple(entries))
    stored = stored_weights(record)
    by_type = stored.by_type if stored is not None else None
    wb = by_type if by_type is not None else weight_bytes(record)
    weights = sum(wb.values())
    peak = c.get("activation_peak")
    memory = MemoryCost(weights_by_dtype=tuple(wb.items()), weights=weights, kv=kv.at_context,
                        activation_peak=peak, serving=weights + kv.at_context + (peak or 0),
                        training=tuple(training_bytes(record).items()),
                        stored_in=stored.source if by_type is not None else None)
    notes = tuple(c.get("notes", ()))
    if stored is not None and by_type is None:
        notes += (f"weights counted as the code holds them: the checkpoint check of {stored.source} " + (
            f"is no match ({stored.verdict}), so its stored bytes are not this model's" if stored.verdict != "match"
            else "kept no stored bytes per type (records of an earlier check)"),)
    return CostReport(name=record.source.name, spec=record.source.spec, model_class=record.source.model_class,
                      batch=B, seq=c["seq"], context=L, prefill=prefill, decode=decode, kv=kv, memory=memory,
                      notes=notes, **_provenance(record, c.get("dtype")),
                      reprojection=_reprojection(record, c), unit=(c.get("unit") or {}).get("name", "token"),
                      inputs=(c.get("unit") or {}).get("inputs"))


def _reprojection(record: Any, c: dict[str, Any]) -> Reprojection | None:
    """The modules holding a weight matrix whose decode FLOPs are those of many positions (their FLOPs a token at
    prefill × more than 1.5 per new token): the step runs them over cached positions. None where none does."""
    pre, dec = c["prefill"], c.get("decode")
    if not dec:
        return None
    per_new = max(1, dec["B"] * dec["T"])
    found: dict[str, float] = {}
    index = record.index()
    for path, f in dec["flops"].items():
        pf = pre["flops"].get(path)
        m = index.get(path)
        if not pf or not f or m is None or m.children or \
                not any(t.kind == "weight" and len(t.shape) == 2 for t in m.tensors):
            continue
        positions = f / per_new / (pf / max(1, pre["B"] * pre["T"]))
        if positions > 1.5:
            found[path] = positions
    if not found:
        return None
    flops = sum(dec["flops"][p] for p in found)
    once = sum(round(dec["flops"][p] / found[p]) for p in found)
    return Reprojection(paths=tuple(compress_paths(found)), positions=round(max(found.values())), flops=flops,
                        once=once)


def kv_dtype_text(r: CostReport, asked_by: str = "asked") -> str:
    """The KV cache's dtype and where it came from, for a reader: "in bfloat16 (the config names none)", "in fp8
    (asked)" (`asked_by`: what asked it, the option's token on the terminal), or the code's dtypes."""
    kv = r.kv
    if kv.asked:
        return f"in {kv.asked} ({asked_by})"
    if r.dtype and kv.dtypes == (r.dtype,):
        return f"in {r.dtype_said}"
    return "in " + ", ".join(kv.dtypes) if kv.dtypes else ""


def weights_dtype_text(r: CostReport, bytes_text: Any) -> str:
    """The weights' dtypes and where they came from: "as stored in model.Q8_0.gguf: Q8_0 21.25 KiB, F32 640 B" where
    a checkpoint's quant mix gave them, "in bfloat16 (the config names none)" where the model was counted in one
    dtype, else each dtype with its bytes (`bytes_text`: how the renderer writes bytes)."""
    by = r.memory.weights_by_dtype
    if r.memory.stored_in:
        return f"as stored in {r.memory.stored_in}: " + ", ".join(f"{k} {bytes_text(v)}" for k, v in by)
    if r.dtype and [k for k, _ in by] == [r.dtype]:
        return f"in {r.dtype_said}"
    return " · ".join(f"{k} {bytes_text(v)}" for k, v in by)


def _provenance(record: Any, chosen: Any) -> dict[str, Any]:
    """The report's dtype, where it came from and what built the config (archviz.cost.provenance); records counted
    before the choice was kept say "as the records hold them"."""
    if isinstance(chosen, dict) and isinstance(chosen.get("said"), str):
        dtype, said = chosen.get("dtype"), chosen["said"]
    else:
        dtype, said = None, "as the records hold them"
    return {"dtype": dtype if isinstance(dtype, str) else None, "dtype_said": said,
            "config_said": config_said(record.source.spec)}


def report_json(r: CostReport) -> dict[str, Any]:
    """The report as JSON-able data (what `archviz cost`'s JSON prints), with the derived per-token figures."""
    d = dataclasses.asdict(r)
    for key, p in (("prefill", r.prefill), ("decode", r.decode)):
        if p is not None:
            d[key]["per_token"] = p.per_token
            d[key]["unknown"] = [{"path": path, "why": list(w)} for path, w in p.unknown]
            d[key]["masked_flops"] = dict(p.masked_flops)
            d[key]["unknown_calls"] = dict(p.unknown_calls)
    d["decode_absorbed_flops"] = r.decode_absorbed
    d["memory"]["weights_by_dtype"] = dict(r.memory.weights_by_dtype)
    d["memory"]["training"] = dict(r.memory.training)
    return d

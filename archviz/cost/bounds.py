"""Lower bounds on time per step on real hardware: a pure function (no torch) of records carrying the `cost` extra
and a device of archviz/cost/hardware.py, so that renderers and the site compute them too.

A decode step of B sequences at context L cannot take less than the largest of three terms, each on one of N GPUs:

    memory        bytes moved / memory bandwidth, bytes = weights read + KV cache read at L
    compute       FLOPs / dense peak at the weights' dtype (the attended FLOPs where the pass measured them)
    interconnect  bytes one GPU sends per step / its interconnect bandwidth (N > 1)

Weights read in a step: every stored weight once, except
- routed experts: a collection of E experts with top-k routing reads the experts its B tokens touch, expected
  E·(1 − (1 − k/E)^B) of them under uniform independent routing (k at B = 1, nearly all E at large B), so a
  fraction 1 − (1 − k/E)^B of its bytes;
- the input embedding: B rows, not the table (unless the output head is the same tensor, which reads it whole).
The KV cache read is what the cache holds at (B, L) (archviz/cost/kv.py's entries: a window W slots, a compressed
cache L/r, MLA its latent), the one new token's write aside.

With N GPUs: tensor parallel over everything but the routed experts and expert parallel over those, each GPU
reading 1/N of the weights and the cache and doing 1/N of the FLOPs; each layer's attention output and each dense
FFN's output is all-reduced (a ring sends 2·(N−1)/N · B·H·a bytes per GPU), and each MoE layer dispatches and
combines its B·k (token, expert) pairs with an all-to-all (2 · B·k·H·a·(N−1)/N² bytes per GPU, the tokens spread
over the GPUs), H the hidden width and a = 2 bytes (bf16 activations). Latencies are left out: bandwidth only.

Weight bytes are the checkpoint's where the records were checked against one (cost with a checkpoint: a GGUF's quant
mix, Q4_0 at 18 bytes a block of 32 values), else the code's.

A prefill of B × T tokens is bound the same way: its FLOPs, and the weights read once (experts touched by B·T
tokens) plus the KV cache written.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from .hardware import Hardware, hw_dtype, parse
from .kv import entry_bytes, per_token_bytes
from .memory import stored_tensor_bytes, stored_weights, weight_bytes

ACTIVATION_BYTES = 2  # bf16 activations on the interconnect
_WEIGHT_KINDS = ("weight", "bias", "scale", "table")
_HIDDEN_KEYS = ("hidden_size", "dim", "d_model", "n_embd", "model_dim")


def touched_fraction(experts: int, top_k: int | None, tokens: int) -> float:
    """Expected share of E experts that `tokens` tokens routed top-k each touch: 1 − (1 − k/E)^tokens."""
    if not top_k or not experts or top_k >= experts:
        return 1.0
    return 1.0 - (1.0 - top_k / experts) ** tokens


@dataclass(frozen=True, slots=True)
class ExpertRead:
    path: str
    experts: int
    top_k: int | None
    bytes: int  # the collection's stored bytes
    touched: float  # experts expected touched: E·(1 − (1 − k/E)^B)
    read: float  # bytes read


@dataclass(frozen=True, slots=True)
class WeightRead:
    tokens: int  # tokens in the step (B for a decode step, B·T for a prefill)
    stored: int  # every stored weight
    experts: tuple[ExpertRead, ...]
    embedding_path: str | None
    embedding_bytes: int  # the input table's stored bytes (0 when tied to the head)
    embedding_read: float  # rows read × row bytes
    read: float  # what the step reads

    @property
    def experts_read(self) -> float:
        return sum(e.read for e in self.experts)


def _hidden(record: Any) -> int | None:
    s = record.summary
    if s.input_embedding_path:
        m = record.index().get(s.input_embedding_path)
        w = next((t for t in m.tensors if len(t.shape) == 2), None) if m is not None else None
        if w is not None:
            return int(w.shape[1])
    config = dict(record.source.config)
    for k in _HIDDEN_KEYS:
        v = config.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def _subtree_bytes(record: Any, roots: list[str], stored: dict[str, int] | None) -> dict[str, int]:
    """Stored weight bytes of each root's subtree: as the checkpoint stores each tensor where `stored` (model tensor
    name -> its checkpoint bytes) names it, else as the code holds it."""
    out = {r: 0 for r in roots}
    if not roots:
        return out
    for path, tensors in zip(record.column("path"), record.column("tensors")):
        p = path
        while True:  # the innermost root above the path (or the path itself)
            if p in out:
                out[p] += sum(t.bytes if stored is None else stored.get(f"{path}.{t.name}" if path else t.name,
                                                                        t.bytes)
                              for t in tensors if t.kind in _WEIGHT_KINDS)
                break
            if "." not in p:
                break
            p = p.rsplit(".", 1)[0]
    return out


def stored_total(record: Any) -> int:
    """Every weight's bytes: as the checkpoint the records were checked against stores them (its quant mix, the
    figure cost gives with a checkpoint), else as the code holds them."""
    got = stored_weights(record)
    return sum((got.by_type if got is not None and got.by_type is not None else weight_bytes(record)).values())


def weights_read(record: Any, tokens: int) -> WeightRead:
    """The weights a step of `tokens` tokens reads (see the module's docstring), in the bytes the checkpoint
    stores where the records were checked against one (`stored_total`)."""
    stored = stored_total(record)
    s = record.summary
    sizes = _subtree_bytes(record, [m.path for m in s.moe] + ([s.input_embedding_path] if s.input_embedding_path
                                                              else []), stored_tensor_bytes(record))
    experts = []
    for m in s.moe:
        f = touched_fraction(m.experts, m.top_k, tokens)
        experts.append(ExpertRead(m.path, m.experts, m.top_k, sizes[m.path], m.experts * f, sizes[m.path] * f))
    emb_bytes, emb_read = 0, 0.0
    if s.input_embedding_path and s.input_embedding_parameters:  # a tied table is read whole by the head
        emb_bytes = sizes[s.input_embedding_path]
        mod = record.index()[s.input_embedding_path]
        rows = max((t.shape[0] for t in mod.tensors if t.kind in _WEIGHT_KINDS and t.shape), default=0)
        emb_read = emb_bytes * min(1.0, tokens / rows) if rows else float(emb_bytes)
    read = stored - sum(e.bytes - e.read for e in experts) - (emb_bytes - emb_read)
    return WeightRead(tokens=tokens, stored=stored, experts=tuple(experts), embedding_path=s.input_embedding_path,
                      embedding_bytes=emb_bytes, embedding_read=emb_read, read=read)


def weights_dtype(record: Any) -> str:
    """The dtype holding most of the weights' bytes (the one their matmuls compute in)."""
    wb = weight_bytes(record)
    return max(wb.items(), key=lambda kv: kv[1])[0] if wb else "bfloat16"


def kv_bytes(cost: dict[str, Any], batch: int, context: int, element: float | None = None) -> float:
    """The KV cache at (batch, context): the cost extra's entries (archviz/cost/kv.py)."""
    return sum(entry_bytes(e, batch, context, element) for e in (cost.get("kv") or {}).get("entries") or ())


@dataclass(frozen=True, slots=True)
class Comm:
    what: str  # "all-reduce" | "all-to-all"
    count: int  # collectives per step
    bytes: float  # bytes one GPU sends over them all
    formula: str


@dataclass(frozen=True, slots=True)
class StepBound:
    tokens: int  # new tokens in the step, all sequences
    weights: float  # weight bytes read, all GPUs
    kv: float  # KV bytes read (decode) or written (prefill), all GPUs
    flops: float  # all GPUs
    flops_kind: str  # "attended" | "as written"
    comm: tuple[Comm, ...]
    t_memory: float  # seconds
    t_compute: float | None  # None: the device publishes no peak
    t_interconnect: float | None  # None: one GPU

    @property
    def time(self) -> float:
        return max(t for t in (self.t_memory, self.t_compute, self.t_interconnect) if t is not None)

    @property
    def binds(self) -> str:
        terms = {"memory": self.t_memory, "compute": self.t_compute, "interconnect": self.t_interconnect}
        return max((k for k, v in terms.items() if v is not None), key=lambda k: terms[k] or 0.0)


@dataclass(frozen=True, slots=True)
class Fit:
    serving: float  # weights + KV + activation peak
    capacity: float  # N GPUs' memory
    fits: bool
    min_gpus: int  # the fewest GPUs whose memory holds it (split evenly)


@dataclass(frozen=True, slots=True)
class HardwareBound:
    hardware: Hardware
    gpus: int
    batch: int
    context: int
    seq: int
    dtype: str  # the weights'
    compute_dtype: str | None  # the peak used
    peak: float | None  # FLOP/s of one GPU
    decode: StepBound | None
    prefill: StepBound
    fit: Fit
    decode_weights: WeightRead | None
    notes: tuple[str, ...]

    @property
    def tokens_per_s_sequence(self) -> float | None:
        return 1.0 / self.decode.time if self.decode is not None and self.decode.time else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.batch / self.decode.time if self.decode is not None and self.decode.time else None


def comms(record: Any, cost: dict[str, Any], gpus: int, tokens: int) -> tuple[Comm, ...]:
    """Bytes one of `gpus` GPUs sends in a step of `tokens` tokens: all-reduces of tensor parallelism, all-to-alls
    of expert parallelism (see the module's docstring)."""
    if gpus <= 1:
        return ()
    H = _hidden(record)
    if not H:
        return ()
    a = ACTIVATION_BYTES
    layers = len(cost.get("layer_kinds") or {}) or 1
    moe = [m for m in record.summary.moe if m.top_k]
    dense = max(0, layers - len(moe))
    n = gpus
    ring = 2 * (n - 1) / n * tokens * H * a
    out = [Comm("all-reduce", layers + dense, (layers + dense) * ring,
                f"(attention of {layers} layers + {dense} dense FFNs) × 2·(N−1)/N·B·H·a, H = {H:,}, a = {a} B")]
    if moe:
        k = moe[0].top_k
        per = 2 * tokens * k * H * a * (n - 1) / (n * n)
        out.append(Comm("all-to-all", 2 * len(moe), len(moe) * per,
                        f"{len(moe)} MoE layers × dispatch and combine of B·k pairs, 2·B·k·H·a·(N−1)/N², k = {k}"))
    return tuple(out)


@dataclass(frozen=True)
class StepWork:
    """What one step moves and computes, all GPUs together (the fields of StepBound it is timed into)."""
    weights: float  # weight bytes read
    kv: float  # KV bytes read (decode) or written (prefill)
    flops: float
    flops_kind: str  # "attended" | "as written" | ""
    comm: tuple[Comm, ...]
    tokens: int  # new tokens in the step, all sequences


def step_bound(hw: Hardware, gpus: int, peak: float | None, work: StepWork) -> StepBound:
    """The three terms of one step on `gpus` GPUs of `hw`."""
    weights, kv, flops, flops_kind, comm, tokens = (work.weights, work.kv, work.flops, work.flops_kind, work.comm,
                                                    work.tokens)
    t_memory = (weights + kv) / gpus / hw.bandwidth
    t_compute = flops / gpus / peak if peak else None
    t_inter = None
    if gpus > 1:
        sent = sum(c.bytes for c in comm)
        t_inter = sent / hw.interconnect if hw.interconnect else (math.inf if sent else 0.0)
    return StepBound(tokens=tokens, weights=weights, kv=kv, flops=flops, flops_kind=flops_kind, comm=comm,
                     t_memory=t_memory, t_compute=t_compute, t_interconnect=t_inter)


def _flops(p: dict[str, Any]) -> tuple[float, str]:
    if p.get("attended_flops") is not None:
        return float(p["attended_flops"]), "attended"
    return float(sum(p["flops"].values())), "as written"


def bound(record: Any, hw: Hardware, gpus: int = 1, kv_element: float | None = None) -> HardwareBound:
    """The decode and prefill bounds of `record` (with the cost extra, at its B, T and L) on `gpus` of `hw`."""
    cost = record.extra("cost")
    if not cost:
        raise ValueError("these records carry no cost (run `archviz cost`)")
    B, T, L = cost["batch"], cost["seq"], cost["context"]
    dtype = weights_dtype(record)
    got = hw.peak(dtype)
    compute_dtype, peak = got if got else (None, None)
    notes = []
    if got is None:
        notes.append(f"{hw.name}: no published peak FLOP/s, so no compute bound (memory only)")
    elif compute_dtype != hw_dtype(dtype):
        notes.append(f"{hw.name}: no {hw_dtype(dtype)} peak for the {dtype} weights: computed at its {compute_dtype} "
                     "peak")
    held = stored_weights(record)
    if held is not None and held.by_type is not None:
        notes.append(f"weights read as {held.source} stores them ({', '.join(held.by_type)})")
    decode = None
    dw = None
    if cost.get("decode"):
        dw = weights_read(record, B)
        flops, kind = _flops(cost["decode"])
        decode = step_bound(hw, gpus, peak, StepWork(dw.read, kv_bytes(cost, B, L, kv_element), flops, kind,
                                                     comms(record, cost, gpus, B), B))
    pw = weights_read(record, B * T)
    written = B * T * sum(per_token_bytes(e, kv_element) for e in (cost.get("kv") or {}).get("entries") or ())
    flops, kind = _flops(cost["prefill"])
    prefill = step_bound(hw, gpus, peak, StepWork(pw.read, written, flops, kind, comms(record, cost, gpus, B * T),
                                                  B * T))
    serving = stored_total(record) + kv_bytes(cost, B, L, kv_element) + (cost.get("activation_peak")
                                                                                       or 0)
    fit = Fit(serving=serving, capacity=gpus * hw.memory, fits=serving <= gpus * hw.memory,
              min_gpus=max(1, math.ceil(serving / hw.memory)))
    return HardwareBound(hardware=hw, gpus=gpus, batch=B, context=L, seq=T, dtype=dtype, compute_dtype=compute_dtype,
                         peak=peak, decode=decode, prefill=prefill, fit=fit, decode_weights=dw, notes=tuple(notes))


def site_devices(cost: dict[str, Any]) -> tuple[list[Hardware], int]:
    """The devices the site's build with hardware put in the cost extra (`"hardware": {"devices": {key: table},
    "gpus": N}`), and N."""
    h = cost.get("hardware") or {}
    return [parse(k, v, "extras.cost.hardware") for k, v in (h.get("devices") or {}).items()], int(h.get("gpus") or 1)


def tokens_per_s_curve(record: Any, hw: Hardware, gpus: int, points: list[tuple[int, float | None, float | None]]
                       ) -> list[tuple[int, float]]:
    """Tokens per second (all B sequences) against L, from (L, decode FLOPs (attended where measured), KV bytes)
    points of the curve."""
    cost = record.extra("cost")
    B = cost["batch"]
    got = hw.peak(weights_dtype(record))
    peak = got[1] if got else None
    w = weights_read(record, B).read
    comm = comms(record, cost, gpus, B)
    out = []
    for L, flops, kv in points:
        if flops is None:
            continue
        s = step_bound(hw, gpus, peak, StepWork(w, kv or 0.0, flops, "", comm, B))
        if s.time:
            out.append((L, B / s.time))
    return out


def bound_json(b: HardwareBound) -> dict[str, Any]:
    """A bound as JSON-able data (`archviz cost`'s JSON with hardware), with the derived figures."""
    d = dataclasses.asdict(b)
    d["hardware"]["peaks"] = dict(b.hardware.peaks)
    for key, s in (("decode", b.decode), ("prefill", b.prefill)):
        if s is not None:
            d[key]["time"] = s.time
            d[key]["binds"] = s.binds
    d["tokens_per_s_sequence"] = b.tokens_per_s_sequence
    d["tokens_per_s"] = b.tokens_per_s
    return d


__all__ = ["bound_json", "touched_fraction", "weights_read", "weights_dtype", "kv_bytes", "comms", "step_bound", "bound",
           "tokens_per_s_curve", "site_devices", "HardwareBound", "StepBound", "WeightRead", "ExpertRead", "Comm", "Fit",
           "ACTIVATION_BYTES"]

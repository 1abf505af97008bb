"""Cost against context length: the context lengths a curve is drawn at, each decode pass summed to a point, and the
points of a record (decode FLOPs measured at each L, KV-cache bytes from the cache entries at every L). Pure: no
torch, so renderers read it.

    extras["cost"]["curve"] = [{"L": context, "flops": decode FLOPs of B new tokens, "attention", "mlp", "other",
                                "unknown": [module paths whose FLOPs cannot be known],
                                "attended": the FLOPs over the positions masks keep}, ...]   (ascending L)

Records written by `archviz cost -o` carry no curve: their one decode step (at `context`) is its only measured
point, and the KV cache, which is a formula of L once its entries are read, is drawn at every L.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .kv import entry_bytes
from .report import part_of

K, M = 1 << 10, 1 << 20
STANDARD = (K, 4 * K, 16 * K, 64 * K, 128 * K, 256 * K, M)  # the lengths context claims are quoted at
_MAX_KEYS = ("max_position_embeddings", "max_seq_len", "n_positions", "max_sequence_length", "seq_length",
             "block_size", "n_ctx", "ctx_len", "context_length", "sequence_len", "max_sequence_len",
             "max_context_length")


def max_positions(config: Any) -> int | None:
    """The longest context the config says the model takes (max_position_embeddings, max_seq_len, ...), or None;
    `config` a dict or the records' (key, value) pairs."""
    if isinstance(config, (tuple, list)):
        config = dict(x for x in config if isinstance(x, (tuple, list)) and len(x) == 2)
    if not isinstance(config, dict):
        return None
    for key in _MAX_KEYS:
        v = config.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    text = config.get("text_config")
    return max_positions(text) if isinstance(text, dict) else None


def curve_contexts(longest: int | None) -> list[int]:
    """The standard lengths up to `longest` (and `longest` itself when it is not one); 1K .. 1M when unknown."""
    if longest is None:
        return list(STANDARD)
    out = [L for L in STANDARD if L <= longest]
    if longest not in out and longest <= 16 * M:
        out.append(longest)
    return out


def decoded_at(decode: dict[str, Any]) -> int:
    """The context a decode pass ran at: one token at `start`, or a recompute of T tokens, the last at T - 1."""
    return decode["start"] if decode["T"] == 1 else decode["T"] - 1


def point(decode: dict[str, Any], layer_list: str | None) -> dict[str, Any]:
    """One decode pass (as `extras["cost"]["decode"]` holds it) summed to a curve point."""
    parts = {"attention": 0, "mlp": 0, "other": 0}
    mixing = decode.get("mixing_flops") or {}
    for path, n in decode["flops"].items():
        named = part_of(path, layer_list)
        m = min(mixing.get(path, 0), n) if named == "other" else 0  # products of two activations, names silent
        parts["attention"] += m
        parts[named] += n - m
    return {"L": decode["start"], "flops": sum(decode["flops"].values()), **parts,
            "unknown": sorted(decode.get("unknown") or {}),
            **({"attended": decode["attended_flops"]} if decode.get("attended_flops") is not None else {})}


@dataclass(frozen=True, slots=True)
class CurvePoint:
    context: int
    decode_flops: int | None  # None where no decode step was measured at this L
    attention: int | None
    mlp: int | None
    kv_bytes: float | None  # at (B, L), the code's dtypes; None when no cache was found
    unknown: tuple[str, ...]
    attended: int | None = None  # decode FLOPs over the positions masks keep


def curve_points(cost: dict[str, Any], extra_contexts: Iterable[int] = ()) -> list[CurvePoint]:
    """The points of a record's cost extra: every measured L (the curve, or the one decode step), and the KV cache
    also at `extra_contexts` (a records file with one decode step still shows its cache against L)."""
    measured: dict[int, dict[str, Any]] = {p["L"]: p for p in cost.get("curve") or ()}
    layer_list = cost.get("layer_list")
    if cost.get("decode") and cost["decode"]["start"] not in measured:
        measured[cost["decode"]["start"]] = point(cost["decode"], layer_list)
    entries = (cost.get("kv") or {}).get("entries") or []
    has_kv = bool((cost.get("kv") or {}).get("source")) and bool(entries)
    B = cost["batch"]
    out = []
    for L in sorted(set(measured) | {int(x) for x in extra_contexts}):
        p = measured.get(L)
        out.append(CurvePoint(context=L, decode_flops=p["flops"] if p else None,
                              attention=p["attention"] if p else None, mlp=p["mlp"] if p else None,
                              kv_bytes=sum(entry_bytes(e, B, L) for e in entries) if has_kv else None,
                              unknown=tuple(p["unknown"]) if p else (), attended=p.get("attended") if p else None))
    return out


__all__ = ["STANDARD", "max_positions", "curve_contexts", "decoded_at", "point", "curve_points", "CurvePoint"]

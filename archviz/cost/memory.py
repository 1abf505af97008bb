"""Memory to serve and to train: weights, KV cache, the activation peak of one prefill chunk, and Adam states.

The activation peak is measured, not guessed (archviz.cost.activations): during the prefill pass on meta every
tensor an aten op makes (not a view, not an in-place result, not a gather of a weight) adds its bytes to a running
total until the tensor is freed, and the peak of that total is the chunk's activation peak -- what a forward under
`torch.no_grad()` holds at once at (B, T), beside the weights and caches (which exist before the pass and are not
counted). Blocks answered from the memo make only their outputs;
their insides peak as the block they were answered from did, one at a time. Allocator padding and fused kernels'
workspace are not seen; an eager attention's [B, H, T, T] scores are.

Training (`training_bytes`): mixed-precision Adam, the formula of the ZeRO paper (Rajbhandari et al., 2020): the
weights as stored, gradients of the same size, and 12 bytes a parameter of fp32 optimizer state (a master copy and
two moments) -- 16 bytes a parameter for bf16 weights; activations (which depend on batch, length and checkpointing)
are not included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..paths import bounded_names


def weight_bytes(record: Any) -> dict[str, int]:
    """Stored bytes of weights, biases, scales and tables (buffers and second names of tied tensors left out),
    by dtype."""
    out: dict[str, int] = {}
    for m in record.modules:
        for t in m.tensors:
            if t.kind in ("weight", "bias", "scale", "table"):
                out[t.dtype] = out.get(t.dtype, 0) + t.bytes
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class StoredWeights:
    """What the checkpoint the records were checked against stores for the weights."""

    source: str  # its file name (`model.Q8_0.gguf`)
    verdict: str  # the check's: "match" or "mismatch"
    by_type: dict[str, int] | None  # bytes per stored type (its quant mix); None where the check is no match


def stored_weights(record: Any) -> StoredWeights | None:
    """The weights' bytes per stored type as the checkpoint the records were checked against holds them: the bytes
    of its tensors that match the model's weights, biases, scales and tables (``extra("checkpoint")["summary"]
    ["stored"]``); None where the records carry no check. A check that is no match gives no bytes (the file does
    not hold this model: its bytes are not this model's)."""
    ck = record.extra("checkpoint")
    if not isinstance(ck, dict):
        return None
    source = str(ck.get("source") or "the checkpoint")
    name = source.rstrip("/").rsplit("/", 1)[-1] or source
    verdict = str(ck.get("verdict"))
    summary = ck.get("summary")
    stored = summary.get("stored") if verdict == "match" and isinstance(summary, dict) else None
    types = stored.get("types") if isinstance(stored, dict) else None
    if not isinstance(types, list) or not all(isinstance(t, dict) and isinstance(t.get("type"), str)
                                              and type(t.get("bytes")) is int for t in types):
        return StoredWeights(name, verdict, None)
    by: dict[str, int] = {}
    for t in types:
        by[t["type"]] = by.get(t["type"], 0) + t["bytes"]
    return StoredWeights(name, verdict, by)


def stored_tensor_bytes(record: Any) -> dict[str, int] | None:
    """Model tensor name (`model.layers.0.mlp.experts.gate_up_proj`) -> the bytes the checkpoint stores for it (its
    quant type's blocks, its scales with it), from the matched entries of the check's tensor list; None where
    `stored_weights` gives no bytes (no check, or one that is no match). A tensor the list names no bytes for is
    absent: the caller counts it as the code holds it."""
    stored = stored_weights(record)
    if stored is None or stored.by_type is None:
        return None
    out: dict[str, int] = {}
    for e in record.extra("checkpoint").get("tensors") or ():
        b = e.get("checkpoint_bytes") if isinstance(e, dict) else None
        model = e.get("model") if isinstance(e, dict) else None
        if type(b) is not int or not isinstance(model, str) or e.get("verdict") != "match":
            continue
        out.update((n, b) for n in bounded_names(model))
    return out


def training_bytes(record: Any) -> dict[str, Any]:
    """Weights + gradients + Adam states (see the module's docstring)."""
    weights = sum(weight_bytes(record).values())
    params = 0
    grads = 0
    for m in record.modules:
        for t in m.tensors:
            if t.kind in ("weight", "bias"):
                params += t.elements
                grads += t.bytes
    optimizer = 12 * params
    return {"weights": weights, "gradients": grads, "optimizer": optimizer, "total": weights + grads + optimizer,
            "formula": "weights as stored + gradients (same size as the parameters) + 12 B × parameters of fp32 "
                       "Adam state (master copy, two moments): ZeRO's mixed-precision Adam; activations not "
                       "included"}

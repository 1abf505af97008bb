"""Memory to serve and to train: weights, KV cache, the activation peak of one prefill chunk, and Adam states.

The activation peak is measured, not guessed: during the prefill pass on meta every tensor an aten op makes (not a
view, not an in-place result) adds its bytes to a running total until the tensor is freed, and the peak of that total
is the chunk's activation peak -- what a forward under `torch.no_grad()` holds at once at (B, T), beside the weights
and caches (which exist before the pass and are not counted). Blocks answered from the memo make only their outputs;
their insides peak as the block they were answered from did, one at a time. Allocator padding and fused kernels'
workspace are not seen; an eager attention's [B, H, T, T] scores are.

Training (`training_bytes`): mixed-precision Adam, the formula of the ZeRO paper (Rajbhandari et al., 2020): the
weights as stored, gradients of the same size, and 12 bytes a parameter of fp32 optimizer state (a master copy and
two moments) -- 16 bytes a parameter for bf16 weights; activations (which depend on batch, length and checkpointing)
are not included.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

_MUTABLE: dict[Any, bool] = {}


class ActivationPeak:
    """An op observer (see archviz.shapes.trace_shapes' op_observer) that tracks live bytes of the tensors ops make."""

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0

    def _free(self, n: int) -> None:
        self.live -= n

    def observe(self, func: Any, args: tuple, kwargs: dict, out: Any, path: str) -> None:
        mutable = _MUTABLE.get(func)
        if mutable is None:
            schema = getattr(func, "_schema", None)
            mutable = _MUTABLE[func] = bool(schema is not None and (schema.is_mutable or any(
                r.alias_info is not None for r in schema.returns)))
        if mutable:
            return
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for t in outs:
            if not isinstance(t, torch.Tensor) or t._is_view():
                continue
            n = t.numel() * t.element_size()
            if not n:
                continue
            self.live += n
            if self.live > self.peak:
                self.peak = self.live
            weakref.finalize(t, self._free, n)


def weight_bytes(record: Any) -> dict[str, int]:
    """Stored bytes of weights, biases, scales and tables (buffers and second names of tied tensors left out),
    by dtype."""
    out: dict[str, int] = {}
    for m in record.modules:
        for t in m.tensors:
            if t.kind in ("weight", "bias", "scale", "table"):
                out[t.dtype] = out.get(t.dtype, 0) + t.bytes
    return dict(sorted(out.items()))


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

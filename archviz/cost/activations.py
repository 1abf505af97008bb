"""The activation peak of a forward pass on meta: live bytes of the tensors its ops make (see archviz.cost.memory)."""

from __future__ import annotations

import weakref
from typing import Any

import torch

_MUTABLE: dict[Any, bool] = {}
_INDEX = torch.ops.aten.index.Tensor


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
        if func is _INDEX and isinstance(args[0], torch.nn.Parameter):
            # weights gathered per token (transformers' batched_mm experts: gate_up_proj[expert_ids]) are how the
            # meta pass traces experts, not memory a grouped GEMM needs: it reads the weights in place
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

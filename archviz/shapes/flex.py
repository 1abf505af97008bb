"""Flex attention on meta: the `BlockMask` a forward takes (made causal over the pass's T, where the forward's
annotation asks for one and none is given), and `flex_attention` run by torch's own reference implementation on
meta tensors (its compiled kernels run on CUDA and CPU only, and `torch.compile` of it compiles nothing on meta)."""

from __future__ import annotations

import contextlib
import inspect
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import torch


def _flex() -> Any:
    """torch's flex attention module where the model's code imported it (else nothing to answer, nothing
    imported)."""
    return sys.modules.get("torch.nn.attention.flex_attention")


def block_mask_arguments(model: Any) -> list[str]:
    """The forward's arguments whose annotation names a BlockMask (alone, optional, or in a union or mapping of mask
    kinds) and that have a default: the pass gives each a causal one."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.default is not inspect.Parameter.empty and "BlockMask" in _text(p.annotation)]


def _text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "") + str(annotation)


def causal_block_mask(B: int, T: int) -> Any:
    """A causal BlockMask [B, 1, T, T] made on meta (its block tables are meta tensors too)."""
    import torch.nn.attention.flex_attention as fa
    return fa.create_block_mask(lambda b, h, q, kv: q >= kv, B, None, T, T, device="meta")


@contextlib.contextmanager
def flex_on_meta() -> Iterator[None]:
    """flex_attention (however the code holds it: imported, or compiled once as a class variable) run on meta by
    torch's reference implementation for the passes inside: the device check lets meta through, the compile path is
    off, and torch.compile'd functions run eagerly."""
    fa = _flex()
    if fa is None or not hasattr(fa, "_validate_device"):
        yield
        return
    validate, debug = fa._validate_device, getattr(fa, "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG", False)

    def on_meta(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> None:
        if not any(isinstance(t, torch.Tensor) and t.is_meta for t in (query, key, value)):
            validate(query, key, value, *args, **kwargs)

    _answer_under_the_policy()
    fa._validate_device = on_meta
    fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
    dynamo = sys.modules.get("torch._dynamo")  # imported where the code compiles something
    try:
        with dynamo.config.patch(disable=True) if dynamo is not None else contextlib.nullcontext():
            yield
    finally:
        fa._validate_device = validate
        fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = debug


_REGISTERED: list[bool] = []


@dataclass(frozen=True, slots=True)
class FlexCall:
    """One flex_attention call running: its query and key lengths and its BlockMask's `mask_mod` (the function
    of (b, h, q_idx, kv_idx) the mask was made from; torch's no-op mask where none was given)."""

    tq: int
    tk: int
    mask_mod: Any


_CALLS: list[FlexCall] = []  # the flex_attention calls running now, innermost last


def flex_call() -> FlexCall | None:
    """The flex_attention call whose dense reference is running (its ops are the scores and weighted sums), or
    None."""
    return _CALLS[-1] if _CALLS else None


def _answer_under_the_policy() -> None:
    """The flex_attention operator answered under the pass's dispatch mode by torch's dense reference, its ops
    seen by the mode (shapes traced, FLOPs counted as the scores and weighted sums they are)."""
    if _REGISTERED:
        return
    try:
        from torch._higher_order_ops.flex_attention import flex_attention as hop, sdpa_dense
    except ImportError:
        return
    from .policy import DispatchPolicy

    if DispatchPolicy in getattr(hop, "python_key_table", {}):
        _REGISTERED.append(True)
        return

    @hop.py_impl(DispatchPolicy)
    def _dense(mode: Any, *args: Any) -> Any:
        _CALLS.append(FlexCall(int(args[0].shape[-2]), int(args[1].shape[-2]), args[4][-1]))
        try:
            with mode:
                return sdpa_dense(*args)
        finally:
            _CALLS.pop()

    _REGISTERED.append(True)


__all__ = ["FlexCall", "block_mask_arguments", "causal_block_mask", "flex_call", "flex_on_meta"]

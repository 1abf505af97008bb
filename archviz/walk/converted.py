"""Weights that torch.ao.quantization's converted modules hold packed, not as nn.Parameters, counted.

A converted module (`torch.ao.nn.quantized`: Linear, Conv*, their fused and dynamic kin) keeps its weight and bias in
packed params that `_weight_bias()` reads back, so a converted model has no nn.Parameter at all. Its weight counts the
values it holds (one per int8 value) and its bias counts as a bias; the weight's scale and zero point (one each per
tensor, or one per output channel) and, for a statically quantized module, its output's scale and zero point are
quantization scales, reported apart. A converted QuantStub (`Quantize`) keeps its scale and zero point as buffers:
scales too. A module converted on meta (sources/quantized_conversion) answers the same calls with meta tensors and
says what its weight's dtype (`weight_dtype`) and scales (`_weight_qparams()`) are.
"""

from __future__ import annotations

from typing import Any

from ..sources.quantized_conversion import CONVERTED_NAMESPACES as _NAMESPACES
from ..sources.quantized_conversion import is_converted

__all__ = ["QPARAM_BUFFERS", "is_converted", "packed_tensors"]
#: A converted QuantStub's buffers that are its quantization parameters.
QPARAM_BUFFERS = ("scale", "zero_point")


def _is_dynamic(module: Any) -> bool:
    return any(".dynamic." in c.__module__ for c in type(module).__mro__ if c.__module__.startswith(_NAMESPACES))


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _weight_qparams(module: Any, weight: Any) -> tuple[tuple[str, tuple, str], ...]:
    """(name, shape, dtype) of the weight's scales and zero points."""
    own = getattr(module, "_weight_qparams", None)
    if callable(own):
        return tuple(own())
    if not getattr(weight, "is_quantized", False):
        return ()  # a float16 dynamic weight: no scales
    if "per_channel" in str(weight.qscheme()):
        s, z = weight.q_per_channel_scales(), weight.q_per_channel_zero_points()
        return (("weight_scale", tuple(s.shape), _dtype_name(s.dtype)),
                ("weight_zero_point", tuple(z.shape), _dtype_name(z.dtype)))
    return ("weight_scale", (), "float64"), ("weight_zero_point", (), "int64")


def packed_tensors(module: Any) -> tuple[tuple[str, str, tuple, str, int, int], ...]:
    """A converted module's packed tensors as (name, kind, shape, dtype, elements, bytes); kind is "weight", "bias"
    or "scale". Empty for any other module."""
    weight_bias = getattr(module, "_weight_bias", None)
    # the packed-params holder inside a converted Linear answers `_weight_bias()` too, but not `weight()`: its
    # tensors count once, on the module that owns them
    if not callable(weight_bias) or not callable(getattr(module, "weight", None)) or not is_converted(module):
        return ()
    weight, bias = weight_bias()
    dtype = getattr(module, "weight_dtype", None) or _dtype_name(weight.dtype)  # on meta: the dtype it stands for
    out = [("weight", "weight", tuple(weight.shape), dtype, weight.numel(),
            weight.numel() * weight.element_size())]
    if bias is not None:
        out.append(("bias", "bias", tuple(bias.shape), _dtype_name(bias.dtype), bias.numel(),
                    bias.numel() * bias.element_size()))
    qparams = list(_weight_qparams(module, weight))
    if qparams and not _is_dynamic(module):
        qparams += [("scale", (), "float64"), ("zero_point", (), "int64")]  # the output's
    for name, shape, dtype in qparams:
        n = 1
        for d in shape:
            n *= d
        out.append((name, "scale", shape, dtype, n, n * 8))
    return tuple(out)

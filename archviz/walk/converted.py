"""Weights that torch.ao.quantization's converted modules hold packed, not as nn.Parameters, counted.

A converted module (`torch.ao.nn.quantized`: Linear, Conv*, their fused and dynamic kin) keeps its weight and bias in
packed params that `_weight_bias()` reads back, so a converted model has no nn.Parameter at all. Its weight counts the
values it holds (one per int8 value) and its bias counts as a bias; the weight's scale and zero point (one each per
tensor, or one per output channel) and, for a statically quantized module, its output's scale and zero point are
quantization scales, reported apart. A converted QuantStub (`Quantize`) keeps its scale and zero point as buffers:
scales too. A module converted on meta (sources/quantized_conversion) answers the same calls with meta tensors and
says what its weight's dtype (`weight_dtype`) and scales (`_weight_qparams(name)`) are, and whether its output is
quantized (`output_qparams`).
"""

from __future__ import annotations

from typing import Any

from ..sources.quantized_names import CONVERTED_NAMESPACES as _NAMESPACES
from ..sources.quantized_names import is_converted

__all__ = ["QPARAM_BUFFERS", "is_converted", "packed_tensors"]
_ITEMSIZE = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2}
#: A converted QuantStub's buffers that are its quantization parameters.
QPARAM_BUFFERS = ("scale", "zero_point")


def _is_dynamic(module: Any) -> bool:
    return any(".dynamic." in c.__module__ for c in type(module).__mro__ if c.__module__.startswith(_NAMESPACES))


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _weight_qparams(module: Any, name: str, weight: Any) -> tuple[tuple[str, tuple, str], ...]:
    """(name, shape, dtype) of the scales and zero points of the weight `name`."""
    own = getattr(module, "_weight_qparams", None)
    if callable(own):
        return tuple(own(name))  # a module converted on meta
    if not getattr(weight, "is_quantized", False):
        return ()  # a float16 dynamic weight: no scales
    if "per_channel" in str(weight.qscheme()):
        s, z = weight.q_per_channel_scales(), weight.q_per_channel_zero_points()
        return ((f"{name}_scale", tuple(s.shape), _dtype_name(s.dtype)),
                (f"{name}_zero_point", tuple(z.shape), _dtype_name(z.dtype)))
    return (f"{name}_scale", (), "float64"), (f"{name}_zero_point", (), "int64")


def _weights_and_biases(module: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A converted module's packed weights and biases by name; None for any other module."""
    if not is_converted(module):
        return None
    weight_bias = getattr(module, "_weight_bias", None)
    if not callable(weight_bias):
        if callable(getattr(module, "weight", None)):  # an Embedding, an EmbeddingBag: a weight, no bias
            return {"weight": module.weight()}, {}
        return None
    if callable(getattr(module, "weight", None)):  # Linear, Conv and their kin: one weight
        weight, bias = weight_bias()
        return {"weight": weight}, ({} if bias is None else {"bias": bias})
    got = weight_bias()
    if isinstance(got, dict):  # a dynamic RNN: a weight and a bias per gate set and layer
        return dict(got.get("weight") or {}), dict(got.get("bias") or {})
    return None  # the packed-params holder inside a converted Linear: counted on the module that owns it


def _elements(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def packed_tensors(module: Any) -> tuple[tuple[str, str, tuple, str, int, int, str | None], ...]:
    """A converted module's packed tensors as (name, kind, shape, dtype, elements, bytes, the weight a scale
    scales); kind is "weight", "bias" or "scale". Empty for any other module."""
    found = _weights_and_biases(module)
    if found is None:
        return ()
    weights, biases = found
    out, qparams = [], []
    for name, w in weights.items():
        dtype = getattr(module, "weight_dtype", None) or _dtype_name(w.dtype)  # on meta: the dtype it stands for
        out.append((name, "weight", tuple(w.shape), dtype, w.numel(), w.numel() * w.element_size(), None))
        qparams += [(*q, name) for q in _weight_qparams(module, name, w)]
    for name, b in biases.items():
        if b is not None:
            out.append((name, "bias", tuple(b.shape), _dtype_name(b.dtype), b.numel(), b.numel() * b.element_size(),
                        None))
    # a static Linear or Conv quantizes its output too (an embedding's output is float, a dynamic module's too)
    outputs = getattr(module, "output_qparams", callable(getattr(module, "_weight_bias", None)))
    if qparams and outputs and not _is_dynamic(module):
        qparams += [("scale", (), "float64", None), ("zero_point", (), "int64", None)]  # the output's
    out += [(name, "scale", shape, dtype, _elements(shape), _elements(shape) * _ITEMSIZE[dtype], of)
            for name, shape, dtype, of in qparams]
    return tuple(out)

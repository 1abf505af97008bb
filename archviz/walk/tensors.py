"""Every tensor of a module classified and counted by the accounting rules.

Accounting rules (see docs/guide.md, "Counting"):
- parameters are logical learned weights (kind weight or bias). A packed sub-byte dtype counts the values it holds:
  `float4_e2m1fn_x2` holds 2 per element; an int8/uint8 weight whose module declares `in_features`/`out_features`
  twice its stored size holds fp4 pairs, 2 per byte.
- quantization scales pair with a quantized (fp8 / fp4) weight of the same module: any `float8_e8m0fnu` tensor, or a
  float tensor attached to the weight (`weight.scale`) or named after it (`scale`, `weight_scale_inv`, ...) whose
  shape divides the weight's into blocks. A name alone decides nothing: a `scale` beside an unquantized weight is a
  learned weight.
- a module converted by torch.ao.quantization holds its weight packed, not as a parameter (walk/converted.py): the
  weight counts one parameter per int8 value, the bias as a bias; its scales and zero points, and a converted
  QuantStub's scale and zero point buffers, are quantization scales.
- integer tensors held as parameters (hash-routing tables) are kind `table`; buffers are kind `buffer`; neither is a
  parameter.
- a tensor reachable under several names counts once, where first seen in module order; later names are `alias`.
"""

from __future__ import annotations

from typing import Any

from ..records import (
    ALIAS,
    BIAS,
    BUFFER,
    SCALE,
    TABLE,
    WEIGHT,
    TensorRecord,
    Totals,
)

from .converted import QPARAM_BUFFERS, is_converted, packed_tensors

_FP8 = {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}


_E8M0 = {"float8_e8m0fnu"}


_PACKED_X2 = {"float4_e2m1fn_x2"}


_INT = {"int8", "uint8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "bool"}


_SCALE_NAMES = ("scale", "weight_scale_inv", "weight_scale", "scale_inv", "scales", "weight_scales")


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _is_packed_int_fp4(module: Any, t: Any) -> bool:
    """An int8/uint8 weight holding fp4 pairs: the module declares a logical size twice the stored one."""
    inf, outf = getattr(module, "in_features", None), getattr(module, "out_features", None)
    if isinstance(inf, int) and isinstance(outf, int) and t.dim() == 2:
        if t.shape[0] == outf and t.shape[1] * 2 == inf:
            return True
    return bool(getattr(t, "fp4", False) or getattr(t, "packed_fp4", False))


def _block_compatible(scale_shape: tuple, weight_shape: tuple) -> bool:
    if len(scale_shape) != len(weight_shape) or not scale_shape:
        return False
    return all(0 < s <= w for s, w in zip(scale_shape, weight_shape))


def classify_module(module: Any, path: str, seen: dict[int, str],
                    made: dict[tuple, Any] | None = None) -> tuple[TensorRecord, ...]:
    """Records for one module's own parameters and buffers. `seen` maps id(tensor) -> first full name. `made`: a dict
    the caller passes for every module of one model, in which equal records (and tuples of them) are made once and
    shared -- the walk's 256 experts of a layer hold the same objects, which the records writer finds by identity."""
    params = [(n, p) for n, p in module._parameters.items() if p is not None]
    buffers = [(n, b) for n, b in module._buffers.items() if b is not None]
    packed = packed_tensors(module)
    if not params and not buffers and not packed:
        return ()
    dtypes, quantized, scale_of = _quantized_weights(module, params)
    if made is None:
        made = {}

    def record(*fields: Any, persistent: bool | None = None, packing: str | None = None, alias_of: str | None = None,
               scales: str | None = None, logical_shape: tuple | None = None, note: str | None = None) -> TensorRecord:
        key = (*fields, persistent, packing, alias_of, scales, logical_shape, note)
        hit = made.get(key)
        if hit is None:
            hit = made[key] = TensorRecord(*key)
        return hit

    out = []
    prefix = f"{path}." if path else ""
    for n, t in params:
        dn = dtypes[n]
        key = id(t)
        full = prefix + n
        numel = t.numel()
        nbytes = numel * t.element_size()
        first = seen.get(key)
        if first is not None:
            out.append(record(n, ALIAS, tuple(t.shape), dn, 0, numel, 0, alias_of=first))
            continue
        seen[key] = full
        if n in quantized:
            logical, packing = quantized[n]
            elements = numel * 2 if packing else numel
            out.append(record(n, WEIGHT, tuple(t.shape), dn, elements, numel, nbytes, packing=packing,
                              logical_shape=logical if packing else None))
            continue
        scaled = scale_of.get(key)
        if scaled is None and quantized:
            if dn in _E8M0:
                scaled = _pair_by_shape(tuple(t.shape), quantized) or next(iter(quantized))
            elif n in _SCALE_NAMES or any(n == f"{w}_{s}" or n == f"{w}.{s}" for w in quantized for s in _SCALE_NAMES):
                scaled = _pair_by_shape(tuple(t.shape), quantized)
        if scaled is not None:
            out.append(record(n, SCALE, tuple(t.shape), dn, numel, numel, nbytes, scales=scaled))
        elif dn in _E8M0:
            out.append(record(n, SCALE, tuple(t.shape), dn, numel, numel, nbytes,
                              note="e8m0 exponent scale with no quantized weight beside it"))
        elif dn in _INT:
            out.append(record(n, TABLE, tuple(t.shape), dn, numel, numel, nbytes))
        elif n == "bias" or n.endswith("_bias"):
            out.append(record(n, BIAS, tuple(t.shape), dn, numel, numel, nbytes))
        else:
            out.append(record(n, WEIGHT, tuple(t.shape), dn, numel, numel, nbytes))
    for n, kind, shape, dn, elements, nbytes, of in packed:  # a converted module's packed weights and their scales
        out.append(record(n, kind, shape, dn, elements, elements, nbytes, scales=of))
    qparams = QPARAM_BUFFERS if is_converted(module) else ()
    _buffer_records(buffers, module._non_persistent_buffers_set, (prefix, seen, quantized, qparams), record, out)
    key = tuple(map(id, out))  # ints, unlike a record's key; the records are made's own, so their ids stay theirs
    hit = made.get(key)
    if hit is None:
        hit = made[key] = tuple(out)
    return hit


def _quantized_weights(module: Any, params: list) -> tuple[dict[str, str], dict, dict[int, str]]:
    """Of one module's parameters: their dtype names; its quantized weights, local name -> (logical shape, packing
    or None); and the scales attached to them (`weight.scale`), id -> the weight's local name."""
    quantized: dict[str, tuple[tuple[int, ...], str | None]] = {}
    dtypes = {}
    for n, p in params:
        dn = dtypes[n] = _dtype_name(p.dtype)
        if dn in _FP8:
            quantized[n] = (tuple(p.shape), None)
        elif dn in _PACKED_X2:
            shape = tuple(p.shape)
            quantized[n] = (shape[:-1] + (shape[-1] * 2,), "fp4 ×2 per float4_e2m1fn_x2")
        elif dn in ("int8", "uint8") and _is_packed_int_fp4(module, p):
            shape = tuple(p.shape)
            quantized[n] = (shape[:-1] + (shape[-1] * 2,), f"fp4 ×2 per {dn}")
    scale_of: dict[int, str] = {}
    for wn in quantized:
        w = module._parameters[wn]
        attached = getattr(w, "scale", None)
        if attached is not None:
            scale_of[id(attached)] = wn
    return dtypes, quantized, scale_of


def _buffer_records(buffers: list, non_persistent: set, where: tuple[str, dict, dict, tuple], record: Any,
                    out: list) -> None:
    """One module's buffers appended to `out` as records (`record` makes them); `where` is (the module's path
    prefix, the walk's id -> first full name, its quantized weights, the names of its buffers that are quantization
    parameters: a converted QuantStub's scale and zero point)."""
    prefix, seen, quantized, qparams = where
    for n, t in buffers:
        key = id(t)
        dn = _dtype_name(t.dtype)
        numel = t.numel()
        persistent = n not in non_persistent
        first = seen.get(key)
        if first is not None:
            out.append(record(n, ALIAS, tuple(t.shape), dn, 0, numel, 0, persistent=persistent,
                              alias_of=first))
            continue
        seen[key] = prefix + n
        if dn in _E8M0 and quantized:
            out.append(record(n, SCALE, tuple(t.shape), dn, numel, numel, numel * t.element_size(),
                              persistent=persistent, scales=_pair_by_shape(tuple(t.shape), quantized)))
            continue
        if n in qparams:
            out.append(record(n, SCALE, tuple(t.shape), dn, numel, numel, numel * t.element_size(),
                              persistent=persistent, note="the quantized input's scale and zero point"))
            continue
        out.append(record(n, BUFFER, tuple(t.shape), dn, numel, numel, numel * t.element_size(),
                          persistent=persistent))


def _pair_by_shape(shape: tuple, quantized: dict[str, tuple]) -> str | None:
    for wn, (logical, _) in quantized.items():
        if _block_compatible(shape, logical):
            return wn
    return None


def own_totals(tensors: tuple[TensorRecord, ...]) -> Totals:
    p = s = tb = b = pb = nbytes = 0
    for t in tensors:
        k = t.kind
        if k == WEIGHT or k == BIAS:
            p += t.elements
        elif k == SCALE:
            s += t.elements
        elif k == TABLE:
            tb += t.elements
        elif k == BUFFER:
            b += t.elements
            if t.persistent:
                pb += t.elements
        nbytes += t.bytes
    return Totals(p, s, tb, b, pb, nbytes)

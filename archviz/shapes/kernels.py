"""Kernels: plain-torch implementations of the DeepSeek reference kernels, and a way to declare your own.

Each implementation here is written from the kernel's documented semantics (quantize, GEMM by dequantizing, sparse
attention by gather and softmax, hyper-connection split), using only data-independent torch ops. So the same code
serves twice: on meta tensors it is the kernel's shape rule for the meta forward pass; on CPU it is the fallback the
execution probe runs when the real kernel (tilelang, triton) cannot import.

Declare a rule for your own kernel (a function your model imports from a module that cannot import here):

    import archviz.kernels

    @archviz.kernels.shape_rule("my_kernels.fused_rope")
    def fused_rope(x, freqs):
        return torch.empty_like(x)          # anything with the right shape and dtype; runs on meta

and pass the file with `kernel_rules my_rules.py`. A custom op registered with `torch.library` and a fake
(meta) implementation needs nothing: it already runs on meta.
"""

from __future__ import annotations

import contextlib
import math
import re
from typing import Any, Callable, Iterator

import torch
from ..errors import option

_RULES: dict[str, Callable[..., Any]] = {}
# Rules of the DeepSeek reference kernels answer for these names in any stubbed module (`kernel`, `kernel_cpu`, ...).
_GENERIC: dict[str, Callable[..., Any]] = {}


def shape_rule(*names: str, flops: Callable[..., int] | None = None, mixing: bool = False,
               attends: Callable[..., Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `fn` as the implementation (and so the shape rule) of the stubbed kernel(s) `names`
    (qualified: `module.function`). `flops`, called with the kernel's own arguments, gives its FLOPs per call
    (`archviz cost`; without it a module calling the kernel has FLOPs that are named unknown). `mixing`: its FLOPs
    are attention-like work (scores and their weighted sums, a recurrent cell's or a scan's state products), which
    `cost`'s split counts as attention whatever the module is named. `attends`, called with the kernel's own
    arguments, says which (query, key) pairs an attention kernel's mask keeps: a list of bands (queries, keys, lo,
    hi), pairs lo ≤ j − i ≤ hi of each block counted (causal: hi = keys − queries, aligned at the last key), so
    that `cost` gives its FLOPs attended beside those as written; None: every pair."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for n in names:
            _RULES[n] = fn
            if flops is not None:
                _FLOPS[n] = flops
            if mixing:
                _MIXING.add(n)
            if attends is not None:
                _ATTENDS[n] = attends
        return fn

    return deco


_ATTENDS: dict[str, Callable[..., Any]] = {}  # attention kernels' masks as bands


def attends_formula(qualname: str) -> Callable[..., Any] | None:
    """The bands of (query, key) pairs an attention kernel keeps (`shape_rule(..., attends=...)`), or None."""
    return _ATTENDS.get(qualname)


_MIXING: set[str] = set()  # kernels whose FLOPs are attention-like


def is_mixing(qualname: str) -> bool:
    """The kernel's FLOPs are attention-like (its rule says so)."""
    return qualname in _MIXING


_FLOPS: dict[str, Callable[..., int]] = {}  # qualname or generic kernel name -> FLOPs formula


def flops_formula(qualname: str) -> Callable[..., int] | None:
    """The FLOPs formula of a stubbed kernel: its exact registration's, then a DeepSeek kernel's of the same name,
    then, for a kernel the model's code defines (`triton.jit(pkg._layer_norm_fwd_kernel)`), what its name says it
    computes where that is plain (`by_what_it_is`)."""
    return _FLOPS.get(qualname) or (_FLOPS.get(qualname.rsplit(".", 1)[-1]) if qualname not in _RULES else None) \
        or by_what_it_is(qualname)


# A kernel of the model's own code whose name says it normalises (layer norm, RMS norm, group norm), forward only.
_NORM_KERNEL = re.compile(r"(layer|rms|group|batch|instance)_?norm", re.I)
_BACKWARD = re.compile(r"(bwd|backward|grad)", re.I)
NORM_FLOPS_PER_ELEMENT = 5  # the statistics (sum, sum of squares), the normalisation, the scale and the shift


def by_what_it_is(qualname: str) -> Callable[..., int] | None:
    """The FLOPs formula of a kernel the model's code defines, by what its name says it is: a normalisation kernel's
    (a few operations an element of its input: `NORM_FLOPS_PER_ELEMENT` × the first tensor it is given). None for
    any other kernel, and for a backward kernel (a forward pass never launches one)."""
    if not qualname.endswith(")"):
        return None
    name = own_name(qualname).rsplit(".", 1)[-1]
    if _NORM_KERNEL.search(name) and not _BACKWARD.search(name):
        return _norm_kernel_flops
    return None


def _norm_kernel_flops(*args: Any, **kwargs: Any) -> int:
    """`NORM_FLOPS_PER_ELEMENT` for each element of the kernel's input (its first tensor argument)."""
    first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
    return NORM_FLOPS_PER_ELEMENT * first.numel() if first is not None else 0


_META: dict[str, Callable[..., Any]] = {}


def _generic(fn: Callable[..., Any] | None = None, *, flops: Callable[..., int] | None = None) -> Any:
    """A DeepSeek kernel answering for its name in any stubbed module; `flops`: its FLOPs per call (`archviz cost`)."""

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        _GENERIC[f.__name__] = f
        if flops is not None:
            _FLOPS[f.__name__] = flops
        return f

    return deco(fn) if fn is not None else deco


def _gemm_flops(a: torch.Tensor, a_s: Any, b: torch.Tensor, *rest: Any, **kw: Any) -> int:
    """c[..., N] = a[..., K] @ b[N, K]ᵀ: 2·(rows of a)·K·N (K from a: a packed fp4 b holds K/2 bytes a row)."""
    return 2 * a.numel() * b.shape[0]


def _sparse_attn_flops(q: torch.Tensor, kv: torch.Tensor, attn_sink: Any, topk_idxs: torch.Tensor,
                       *rest: Any, **kw: Any) -> int:
    """q [b, m, h, d] against the k listed rows of kv [b, n, d]: scores 2·b·m·h·k·d, and as many for p @ v (every
    listed slot, -1 ones included: the kernel computes them masked)."""
    b, m, h, d = q.shape
    return 4 * b * m * h * topk_idxs.shape[-1] * d


def _no_flops(*args: Any, **kwargs: Any) -> int:
    """Element-wise (quantization, dequantization, Sinkhorn): no multiply-accumulate, as FLOP counters count."""
    return 0


def _meta_of(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A shape-only twin of a generic kernel, used when every tensor argument is on meta (fast: no arithmetic)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        _META[name] = fn
        return fn

    return deco


def own_name(qualname: str) -> str:
    """The kernel a stub call names: `pkg._fwd_kernel` of `triton.jit(pkg._fwd_kernel)` (the model's own kernel,
    asked as its decorator's kind), else the name itself."""
    return qualname.split("(", 1)[1][:-1] if qualname.endswith(")") and "(" in qualname else qualname


def lookup(qualname: str, *, meta: bool = False) -> tuple[Callable[..., Any], str] | None:
    """The rule for a stubbed callable: its exact registration first, then (for a kernel the model's code defines,
    asked as `decorator(name)`) its decorator's rule, then a DeepSeek kernel of the same name (its shape-only twin
    when `meta`)."""
    fn = _RULES.get(qualname)
    if fn is not None:
        return fn, qualname
    kind = qualname.split("(", 1)[0] if qualname.endswith(")") else None  # `triton.jit(model._fwd_kernel)`
    if kind is not None and kind in _RULES:
        return _RULES[kind], kind
    name = qualname.rsplit(".", 1)[-1]
    fn = (_META.get(name) if meta else None) or _GENERIC.get(name)
    if fn is not None:
        return fn, f"archviz.kernels.{name}"
    return None


def known() -> list[str]:
    return sorted(set(_RULES) | {f"*.{n}" for n in _GENERIC})


# ---------------------------------------------------------------------------------------------------------------------
# Helpers


def _expand_blocks(s: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Broadcast a block-scale tensor over the full tensor shape (each scale covers a block of the last dims)."""
    out = s.float()
    for dim in range(-1, -len(s.shape) - 1, -1):
        full = shape[dim]
        blocks = out.shape[dim]
        if blocks == full:
            continue
        block = math.ceil(full / blocks)
        out = out.repeat_interleave(block, dim=dim).narrow(dim, 0, full)
    return out


# E2M1 code -> value (sign in bit 3).
_FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def unpack_fp4(b: torch.Tensor) -> torch.Tensor:
    """[..., K/2] of packed pairs (float4_e2m1fn_x2 or int8/uint8, low nibble first) -> [..., K] float32."""
    u = b.view(torch.uint8) if b.dtype != torch.uint8 else b
    lut = torch.tensor(_FP4_VALUES, dtype=torch.float32, device=b.device)
    lo = (u & 0x0F).long()
    hi = (u >> 4).long()
    return torch.stack([lut[lo], lut[hi]], dim=-1).flatten(-2)


def pack_fp4(v: torch.Tensor, dtype: torch.dtype = torch.float4_e2m1fn_x2) -> torch.Tensor:
    """Round float values (already within ±6) to the nearest E2M1 code and pack pairs, low nibble first."""
    grid = torch.tensor(_FP4_VALUES[:8], dtype=torch.float32, device=v.device)
    mag = v.abs().unsqueeze(-1)
    code = (mag - grid).abs().argmin(-1).to(torch.uint8)
    code = code | ((v < 0).to(torch.uint8) << 3)
    pairs = code.unflatten(-1, (-1, 2))
    packed = pairs[..., 0] | (pairs[..., 1] << 4)
    return packed.view(dtype) if dtype != torch.uint8 else packed


def _pow2_ceil(s: torch.Tensor) -> torch.Tensor:
    return torch.pow(2.0, torch.ceil(torch.log2(s)))


# ---------------------------------------------------------------------------------------------------------------------
# The DeepSeek reference kernels (V3: triton; V4-Flash / V4.1-Flash: tilelang)


@_generic(flops=_no_flops)
def act_quant(x: torch.Tensor, block_size: int = 128, scale_fmt: Any = None, scale_dtype: torch.dtype = torch.float32,
              inplace: bool = False) -> Any:
    """Block-wise fp8 (e4m3) quantization of activations along the last dim: (y fp8 like x, s [..., K/block])."""
    xb = x.float().unflatten(-1, (-1, block_size))
    amax = xb.abs().amax(-1).clamp(min=1e-4)
    s = amax / 448.0
    if scale_fmt:
        s = _pow2_ceil(s)
    q = (xb / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    if inplace:
        x.copy_((q.float() * s.unsqueeze(-1)).flatten(-2).to(x.dtype))
        return x
    return q.flatten(-2), s.to(scale_dtype)


@_generic(flops=_no_flops)
def fp4_act_quant(x: torch.Tensor, block_size: int = 32, inplace: bool = False,
                  scale_dtype: torch.dtype = torch.float8_e8m0fnu) -> Any:
    """Block-wise fp4 (e2m1) quantization along the last dim: (packed [..., K/2], s [..., K/block])."""
    xb = x.float().unflatten(-1, (-1, block_size))
    if scale_dtype == torch.float8_e4m3fn:
        amax = xb.abs().amax(-1).clamp(min=6 * 2.0**-9)
        s = (amax / 6.0).to(torch.float8_e4m3fn).float()
    else:
        amax = xb.abs().amax(-1).clamp(min=6 * 2.0**-126)
        s = _pow2_ceil(amax / 6.0)
    v = (xb / s.unsqueeze(-1)).clamp(-6.0, 6.0)
    grid = torch.tensor(_FP4_VALUES[:8], dtype=torch.float32, device=x.device)
    rounded = grid[(v.abs().unsqueeze(-1) - grid).abs().argmin(-1)] * torch.sign(v)
    if inplace:
        x.copy_((rounded * s.unsqueeze(-1)).flatten(-2).to(x.dtype))
        return x
    return pack_fp4(rounded.flatten(-2)), s.to(scale_dtype)


@_generic(flops=_no_flops)
def weight_dequant(x: torch.Tensor, s: torch.Tensor, block_size: int = 128) -> torch.Tensor:
    """fp8 weight [M, N] with block scales -> weight in the default dtype."""
    return (x.float() * _expand_blocks(s, tuple(x.shape))).to(torch.get_default_dtype())


_DEQUANT_CACHE: dict[tuple, torch.Tensor] | None = None


@contextlib.contextmanager
def dequantized_once() -> Iterator[None]:
    """Within this block the GEMM implementations dequantize each distinct weight once and reuse it (weights do not
    change during a forward pass): the probe of a large quantized model then spends seconds, not minutes, there."""
    global _DEQUANT_CACHE
    previous, _DEQUANT_CACHE = _DEQUANT_CACHE, {}
    try:
        yield
    finally:
        _DEQUANT_CACHE = previous


def _dequant_weight(b: torch.Tensor, b_s: torch.Tensor) -> torch.Tensor:
    cache = _DEQUANT_CACHE
    key = None
    if cache is not None and not b.is_meta:
        key = (b.data_ptr(), tuple(b.shape), b.stride(), b.dtype, b_s.data_ptr(), tuple(b_s.shape), b_s.stride(),
               b_s.dtype)
        hit = cache.get(key)
        if hit is not None:
            return hit
    if b.dtype in (torch.float4_e2m1fn_x2, torch.int8, torch.uint8):
        w = unpack_fp4(b)
    else:
        w = b.float()
    w = w * _expand_blocks(b_s, tuple(w.shape))
    if key is not None:
        cache[key] = w
    return w


@_generic(flops=_gemm_flops)
def fp8_gemm(a: torch.Tensor, a_s: torch.Tensor, b: torch.Tensor, b_s: torch.Tensor,
             scale_dtype: torch.dtype = torch.float32, block_size: int = 128) -> torch.Tensor:
    """c[..., N] = dequant(a)[..., K] @ dequant(b)[N, K]ᵀ, in the default dtype."""
    a_deq = a.float() * _expand_blocks(a_s, tuple(a.shape))
    return (a_deq @ _dequant_weight(b, b_s).t()).to(torch.get_default_dtype())


@_generic(flops=_gemm_flops)
def fp4_gemm(a: torch.Tensor, a_s: torch.Tensor, b: torch.Tensor, b_s: torch.Tensor,
             scale_dtype: torch.dtype = torch.float32, act_block_size: int = 128) -> torch.Tensor:
    """c[..., N] = dequant(a fp8)[..., K] @ dequant(b fp4 packed [N, K/2])ᵀ, in the default dtype."""
    a_deq = a.float() * _expand_blocks(a_s, tuple(a.shape))
    return (a_deq @ _dequant_weight(b, b_s).t()).to(torch.get_default_dtype())


@_generic(flops=_sparse_attn_flops)
def sparse_attn(q: torch.Tensor, kv: torch.Tensor, attn_sink: torch.Tensor, topk_idxs: torch.Tensor,
                softmax_scale: float) -> torch.Tensor:
    """Attention of q [b, m, h, d] over the kv rows [b, n, d] listed in topk_idxs [b, m, k] (-1: none), with a
    learned per-head sink in the softmax denominator. Returns [b, m, h, d] in q's dtype."""
    b, m, h, d = q.shape
    idx = topk_idxs.long()
    valid = idx >= 0
    gathered = torch.gather(kv.unsqueeze(1).expand(b, m, kv.shape[1], kv.shape[-1]), 2,
                            idx.clamp(min=0).unsqueeze(-1).expand(b, m, idx.shape[-1], kv.shape[-1]))
    scores = torch.einsum("bmhd,bmkd->bmhk", q.float(), gathered.float()) * softmax_scale
    scores = scores.masked_fill(~valid.unsqueeze(2), float("-inf"))
    sink = attn_sink.float().view(1, 1, h, 1).expand(b, m, h, 1)
    p = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    p = torch.nan_to_num(p)
    return torch.einsum("bmhk,bmkd->bmhd", p.to(q.dtype).float(), gathered.float()).to(q.dtype)


def _fp8_index_flops(q: torch.Tensor, q_s: Any, k: torch.Tensor, *rest: Any, **kw: Any) -> int:
    """q [b, m, h, d] against every row of k [b, n, d]: 2·b·m·h·n·d (the ReLU, weighting and head sum add no
    multiply-accumulate of that order)."""
    b, m, h, d = q.shape
    return 2 * b * m * h * k.shape[1] * d


@_generic(flops=_fp8_index_flops)
def fp8_index(q: torch.Tensor, q_s: torch.Tensor, k: torch.Tensor, k_s: torch.Tensor) -> torch.Tensor:
    """DeepSeek-V3.2's lightning indexer score: relu(q [b, m, h, d] · k [b, n, d]) weighted by q_s [b, m, h(, 1)],
    summed over heads, times k_s [b, n(, 1)]: [b, m, n] float32."""
    b, m, h, _ = q.shape
    n = k.shape[1]
    logits = torch.einsum("bmhd,bnd->bmhn", q.float(), k.float()).clamp(min=0) * q_s.float().reshape(b, m, h, 1)
    return logits.sum(2) * k_s.float().reshape(b, 1, n)


@_generic(flops=_no_flops)
def hc_split_sinkhorn(mixes: torch.Tensor, hc_scale: torch.Tensor, hc_base: torch.Tensor, hc_mult: int = 4,
                      sinkhorn_iters: int = 20, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Split hyper-connection mixes [..., (2+hc)·hc] into pre [..., hc], post [..., hc] and a Sinkhorn-normalised
    combination [..., hc, hc]."""
    hc = hc_mult
    m = mixes.float()
    base = hc_base.float()
    scale = hc_scale.float()
    pre = torch.sigmoid(m[..., :hc] * scale[0] + base[:hc]) + eps
    post = 2 * torch.sigmoid(m[..., hc:2 * hc] * scale[1] + base[hc:2 * hc])
    comb = (m[..., 2 * hc:] * scale[2] + base[2 * hc:]).unflatten(-1, (hc, hc))
    comb = torch.softmax(comb, dim=-1) + eps
    comb = comb / (comb.sum(-2, keepdim=True) + eps)
    for _ in range(sinkhorn_iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + eps)
        comb = comb / (comb.sum(-2, keepdim=True) + eps)
    return pre.to(mixes.dtype), post.to(mixes.dtype), comb.to(mixes.dtype)


# ---------------------------------------------------------------------------------------------------------------------
# Shape-only twins (the tests check each against its implementation run on CPU)


def _empty(shape: Any, dtype: torch.dtype, like: torch.Tensor) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device=like.device)


@_meta_of("act_quant")
def _act_quant_meta(x, block_size=128, scale_fmt=None, scale_dtype=torch.float32, inplace=False):
    if inplace:
        return x
    return (_empty(x.shape, torch.float8_e4m3fn, x),
            _empty((*x.shape[:-1], x.shape[-1] // block_size), scale_dtype, x))


@_meta_of("fp4_act_quant")
def _fp4_act_quant_meta(x, block_size=32, inplace=False, scale_dtype=torch.float8_e8m0fnu):
    if inplace:
        return x
    return (_empty((*x.shape[:-1], x.shape[-1] // 2), torch.float4_e2m1fn_x2, x),
            _empty((*x.shape[:-1], x.shape[-1] // block_size), scale_dtype, x))


@_meta_of("weight_dequant")
def _weight_dequant_meta(x, s, block_size=128):
    return _empty(x.shape, torch.get_default_dtype(), x)


@_meta_of("fp8_gemm")
def _fp8_gemm_meta(a, a_s, b, b_s, scale_dtype=torch.float32, block_size=128):
    return _empty((*a.shape[:-1], b.shape[0]), torch.get_default_dtype(), a)


@_meta_of("fp4_gemm")
def _fp4_gemm_meta(a, a_s, b, b_s, scale_dtype=torch.float32, act_block_size=128):
    return _empty((*a.shape[:-1], b.shape[0]), torch.get_default_dtype(), a)


@_meta_of("sparse_attn")
def _sparse_attn_meta(q, kv, attn_sink, topk_idxs, softmax_scale):
    return _empty(q.shape, q.dtype, q)


@_meta_of("fp8_index")
def _fp8_index_meta(q, q_s, k, k_s):
    return _empty((q.shape[0], q.shape[1], k.shape[1]), torch.float32, q)


@_meta_of("hc_split_sinkhorn")
def _hc_split_sinkhorn_meta(mixes, hc_scale, hc_base, hc_mult=4, sinkhorn_iters=20, eps=1e-6):
    lead = tuple(mixes.shape[:-1])
    return (_empty((*lead, hc_mult), mixes.dtype, mixes), _empty((*lead, hc_mult), mixes.dtype, mixes),
            _empty((*lead, hc_mult, hc_mult), mixes.dtype, mixes))


@_generic(flops=lambda x, scale=1.0: x.numel() * max(1, (x.shape[-1] - 1).bit_length()))  # n·log2 n a row
def hadamard_transform(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """fast_hadamard_transform.hadamard_transform: x @ H_n · scale over the last dim (n a power of two)."""
    n = x.shape[-1]
    h = torch.ones((1, 1), dtype=torch.float32, device=x.device)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (x.float() @ h * scale).to(x.dtype)


@_meta_of("hadamard_transform")
def _hadamard_transform_meta(x, scale=1.0):
    return _empty(x.shape, x.dtype, x)


def load_rules_file(path: str) -> None:
    """Import a user file that registers rules with `@archviz.kernels.shape_rule(...)`."""
    import importlib.util
    import os

    from ..errors import ShapeError

    if not os.path.isfile(path):
        raise ShapeError(f"{option('kernel-rules')} {path}: no such file", hint="give the .py file that declares the "
                                                                                "rules")
    spec = importlib.util.spec_from_file_location(f"archviz_user_rules_{abs(hash(path))}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001
        raise ShapeError(f"{option('kernel-rules')} {path}: raised {type(e).__name__}: {e}", hint="fix the rules "
                                                                                                  "file") from e

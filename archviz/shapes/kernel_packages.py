"""Rules for the commonly used entry points of CUDA-only kernel packages a model may import (stubbed here, as they
cannot install without a GPU toolchain): flash_attn, xformers (its attention and block-diagonal masks), mamba_ssm's
selective scan (its compiled `selective_scan_cuda.fwd` too), fused Mamba block and triton norms (`RMSNorm`: a
stand-in module holding its weight), causal_conv1d, deep_gemm, and a launch of a `@triton.jit` kernel of the model's
own code. fast_hadamard_transform's `hadamard_transform` is a DeepSeek kernel rule (archviz/shapes/kernels.py).

As the DeepSeek rules are, each is written from the kernel's documented semantics in plain torch, so one function
serves as the meta pass's shape rule (on meta it only makes the outputs) and as the probe's CPU stand-in; each has
its FLOPs per call for `archviz cost`. A rule answers for the kernel's public import paths, listed with it."""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch
import torch.nn.functional as F

from ..sources.stubs import stand_in, through_rule
from .kernels import _expand_blocks, _no_flops, shape_rule


def _meta(*tensors: Any) -> bool:
    return any(isinstance(t, torch.Tensor) and t.is_meta for t in tensors)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None, causal: bool,
               window: Any = (-1, -1), bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """q [b, s, h, d], k [b, t, hk, d], v [b, t, hk, dv] (hk divides h: grouped heads) -> (out [b, s, h, dv] in q's
    dtype, log-sum-exp [b, h, s] float32). Causal and window masks align the last query with the last key, as
    flash-attn 2.1+ does."""
    b, s, h, d = q.shape
    t = k.shape[1]
    if _meta(q, k, v):
        return (torch.empty((b, s, h, v.shape[-1]), dtype=q.dtype, device=q.device),
                torch.empty((b, h, s), dtype=torch.float32, device=q.device))
    group = h // k.shape[2]
    kk = k.repeat_interleave(group, dim=2).float()
    vv = v.repeat_interleave(group, dim=2).float()
    scores = torch.einsum("bshd,bthd->bhst", q.float(), kk) * (scale if scale is not None else d ** -0.5)
    if bias is not None:
        scores = scores + bias.float()
    i = torch.arange(s, device=q.device).unsqueeze(-1) + (t - s)
    j = torch.arange(t, device=q.device).unsqueeze(0)
    left, right = (window if window is not None else (-1, -1))
    masked = torch.zeros((s, t), dtype=torch.bool, device=q.device)
    if causal:
        masked |= j > i
    if left >= 0:
        masked |= j < i - left
    if right >= 0:
        masked |= j > i + right
    scores = scores.masked_fill(masked, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    p = torch.nan_to_num(torch.exp(scores - lse.unsqueeze(-1)))
    return torch.einsum("bhst,bthd->bshd", p, vv).to(q.dtype).contiguous(), lse  # as the kernels write it: .view


def _attention_flops(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *rest: Any, **kw: Any) -> int:
    """Scores and weighted values over every key: 2·b·s·h·t·(d + dv), as torch's FLOP counter counts SDPA."""
    if q.dim() == 3:  # xformers' [B, M, K] without heads
        q, k, v = q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)
    b, s, h, d = q.shape[0], q.shape[1], q.shape[-2], q.shape[-1]
    return 2 * b * s * h * k.shape[1] * (d + v.shape[-1])


def _band(s: int, t: int, causal: bool, window: Any) -> tuple[int, int, float, float]:
    """The (query, key) pairs a causal or windowed mask keeps of s queries and t keys aligned at the last key, as
    a band lo ≤ j − i ≤ hi (flash-attn 2.1+'s alignment)."""
    left, right = (window if window is not None else (-1, -1))
    lo = (t - s) - left if left >= 0 else -math.inf
    hi = min(t - s if causal else math.inf, (t - s) + right if right >= 0 else math.inf)
    return s, t, lo, hi


def _flash_attends(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), *rest: Any,
                   **kw: Any) -> list[tuple[int, int, float, float]]:
    return [_band(q.shape[1], k.shape[1], causal, window_size)]


# ---------------------------------------------------------------------------------------------------------------------
# flash_attn


@shape_rule("flash_attn.flash_attn_func", "flash_attn.flash_attn_interface.flash_attn_func",
            "flash_attn_interface.flash_attn_func", flops=_attention_flops, mixing=True, attends=_flash_attends)
def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False, **kwargs):
    """q [b, s, h, d], k and v [b, t, hk, d(v)] -> [b, s, h, dv] (with return_attn_probs: and the log-sum-exp)."""
    out, lse = _attention(q, k, v, softmax_scale, causal, window_size)
    return (out, lse, None) if return_attn_probs else out


def _varlen_flops(q, k, v, cu_seqlens_q, cu_seqlens_k, *rest: Any, **kw: Any) -> int:
    """Each query against the keys of its own sequence: 2·total_q·h·(total_k / sequences)·(d + dv)."""
    n = max(1, cu_seqlens_k.shape[0] - 1)
    return int(2 * q.shape[0] * q.shape[1] * (k.shape[0] / n) * (q.shape[-1] + v.shape[-1]))


@shape_rule("flash_attn.flash_attn_varlen_func", "flash_attn.flash_attn_interface.flash_attn_varlen_func",
            "flash_attn_interface.flash_attn_varlen_func", flops=_varlen_flops, mixing=True)
def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, **kwargs):
    """Sequences packed along the first dim: q [total_q, h, d], k and v [total_k, hk, d(v)], cu_seqlens the
    boundaries -> [total_q, h, dv]."""
    if _meta(q, k, v):
        out = torch.empty((q.shape[0], q.shape[1], v.shape[-1]), dtype=q.dtype, device=q.device)
        lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    else:
        parts, lses = [], []
        bq, bk = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        for i in range(len(bq) - 1):
            o, lse_i = _attention(q[bq[i]:bq[i + 1]].unsqueeze(0), k[bk[i]:bk[i + 1]].unsqueeze(0),
                                  v[bk[i]:bk[i + 1]].unsqueeze(0), softmax_scale, causal, window_size)
            parts.append(o[0])
            lses.append(lse_i[0])
        out, lse = torch.cat(parts), torch.cat(lses, dim=-1)
    return (out, lse, None) if return_attn_probs else out


def _kvcache_flops(q, k_cache, v_cache, *rest: Any, cache_seqlens: Any = None, **kw: Any) -> int:
    """Against the keys held (cache_seqlens where an int, else the cache's length) and the new ones."""
    held = cache_seqlens if isinstance(cache_seqlens, int) else k_cache.shape[1]
    b, s, h, d = q.shape
    return 2 * b * s * h * min(k_cache.shape[1], held + s) * (d + v_cache.shape[-1])


def _kvcache_attends(*args: Any, **kwargs: Any) -> list[tuple[int, int, float, float]]:
    """The new queries against the keys `_kvcache_flops` counts, masked as flash_attn_func masks (the kernel's
    arguments bound as its signature binds them)."""
    bound = inspect.signature(flash_attn_with_kvcache).bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    q, k_cache, held = a["q"], a["k_cache"], a["cache_seqlens"]
    held = held if isinstance(held, int) else k_cache.shape[1]
    s = q.shape[1]
    return [_band(s, min(k_cache.shape[1], held + s), a["causal"], a["window_size"])]


@shape_rule("flash_attn.flash_attn_with_kvcache", "flash_attn.flash_attn_interface.flash_attn_with_kvcache",
            "flash_attn_interface.flash_attn_with_kvcache", flops=_kvcache_flops, mixing=True,
            attends=_kvcache_attends)
def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False,
                            **kwargs):
    """q [b, s, h, d] against k_cache/v_cache [b, t, hk, d(v)] (k, v [b, s, hk, d] written in place at
    cache_seqlens first) -> [b, s, h, dv]. Rotary embedding and paged caches (block_table) are not applied."""
    b, s = q.shape[0], q.shape[1]
    if _meta(q, k_cache, v_cache):
        out, lse = _attention(q, k_cache[:b], v_cache[:b], softmax_scale, causal, window_size)
        return (out, lse) if return_softmax_lse else out
    lengths = [cache_seqlens] * b if isinstance(cache_seqlens, int) else \
        (cache_seqlens.tolist() if cache_seqlens is not None else [k_cache.shape[1] - (s if k is not None else 0)] * b)
    outs, lses = [], []
    for i in range(b):
        n = int(lengths[i])
        if k is not None:
            k_cache[i, n:n + s] = k[i]
            v_cache[i, n:n + s] = v[i]
        end = n + (s if k is not None else 0)
        o, lse = _attention(q[i:i + 1], k_cache[i:i + 1, :end], v_cache[i:i + 1, :end], softmax_scale, causal,
                            window_size)
        outs.append(o)
        lses.append(lse)
    out, lse = torch.cat(outs), torch.cat(lses)
    return (out, lse) if return_softmax_lse else out


# ---------------------------------------------------------------------------------------------------------------------
# triton's host-side helpers: plain integer arithmetic that launch code runs before a kernel


@shape_rule("triton.next_power_of_2", flops=_no_flops)
def triton_next_power_of_2(n: int) -> int:
    return 1 << (int(n) - 1).bit_length() if int(n) > 0 else 0  # as triton's bit-twiddling gives


@shape_rule("triton.cdiv", flops=_no_flops)
def triton_cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


@shape_rule("triton.jit")
def triton_launch(*args: Any, **kwargs: Any) -> None:
    """A launch of a kernel the model's code defines with `@triton.jit` (`_fwd_kernel[grid](x, y, ...)`): a triton
    kernel returns nothing and writes into the tensors it is given, which the launching code allocated with their
    shapes, so on meta a launch has nothing to do. Its values cannot be made on the CPU (its FLOPs are unknown)."""
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if tensors and not _meta(*tensors):
        from ..errors import ShapeError

        raise ShapeError("a @triton.jit kernel of the model's code cannot run on the CPU",
                         hint="its shapes come from the meta pass; values need a GPU with triton")
    return None


@shape_rule("torch.utils.cpp_extension.load")
def extension_call(*args: Any, **kwargs: Any) -> None:
    """A call of a C++/CUDA extension the model's code compiles at import (`torch.ops.wkv6.forward(B, T, C, H, r, k,
    v, w, u, y)`, `wkv_cuda.forward(...)`) that no rule names: answered as research code's kernels are written, a
    launch that writes into the output tensors its caller allocated and returns nothing; its FLOPs are unknown."""
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if tensors and not _meta(*tensors):
        from ..errors import ShapeError

        raise ShapeError("a C++/CUDA extension of the model's code cannot run here (it was never compiled)",
                         hint="its shapes come from the meta pass")
    return None


# ---------------------------------------------------------------------------------------------------------------------
# xformers


class LowerTriangularMask:
    """xformers' causal mask object (`xformers.ops.LowerTriangularMask()`), as the rules below read it."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass


shape_rule("xformers.ops.LowerTriangularMask", "xformers.ops.fmha.LowerTriangularMask",
           "xformers.ops.fmha.attn_bias.LowerTriangularMask")(LowerTriangularMask)


class BlockDiagonalMask:
    """xformers' block-diagonal bias (`fmha.attn_bias.BlockDiagonalMask` and its kin, made by `from_seqlens`):
    sequences packed along one axis, each query attending to the keys of its own sequence only -- all of them, or
    (causal) those up to its own position, aligned at the block's first query and key (`BlockDiagonalCausalMask`) or
    at its last (`..._from_bottomright`, `BlockDiagonalCausalWithOffsetPaddedKeysMask`), within the last
    `window` keys (`make_local_attention`). Keys may sit in blocks of `kv_padding` slots, the first kv_seqlen[i] of
    block i held (the padded-keys mask of a decode step)."""

    def __init__(self, q_seqlen: Any, kv_seqlen: Any = None, *, causal: bool = False, bottom_right: bool = False,
                 window: int | None = None, kv_padding: int | None = None):
        self.q_seqlen = [int(n) for n in q_seqlen]
        self.kv_seqlen = [int(n) for n in kv_seqlen] if kv_seqlen is not None else list(self.q_seqlen)
        if len(self.kv_seqlen) != len(self.q_seqlen):
            raise ValueError(f"{len(self.q_seqlen)} query sequences but {len(self.kv_seqlen)} key sequences")
        self.causal, self.bottom_right, self.window, self.kv_padding = causal, bottom_right, window, kv_padding

    def _with(self, **changes: Any) -> "BlockDiagonalMask":
        fields = dict(causal=self.causal, bottom_right=self.bottom_right, window=self.window,
                      kv_padding=self.kv_padding)
        return BlockDiagonalMask(self.q_seqlen, self.kv_seqlen, **{**fields, **changes})

    def make_causal(self) -> "BlockDiagonalMask":
        return self._with(causal=True, bottom_right=False)

    def make_causal_from_bottomright(self) -> "BlockDiagonalMask":
        return self._with(causal=True, bottom_right=True)

    def make_local_attention(self, window_size: int) -> "BlockDiagonalMask":
        return self._with(causal=True, window=int(window_size))

    def make_local_attention_from_bottomright(self, window_size: int) -> "BlockDiagonalMask":
        return self._with(causal=True, bottom_right=True, window=int(window_size))

    def pairs(self) -> int:
        """The (query, key) pairs of every sequence's block: Σ q_i·k_i (a causal or local block counted whole, as
        torch's FLOP counter counts causal attention)."""
        return sum(q * k for q, k in zip(self.q_seqlen, self.kv_seqlen))

    def materialize(self, shape: tuple, dtype: torch.dtype = torch.float32, device: Any = "cpu") -> torch.Tensor:
        """The additive bias [..., queries, keys]: 0 where a query attends, -inf elsewhere."""
        s, t = shape[-2], shape[-1]
        keep = torch.zeros((s, t), dtype=torch.bool, device=device)
        q0 = 0
        for i, (q, k) in enumerate(zip(self.q_seqlen, self.kv_seqlen)):
            k0 = i * self.kv_padding if self.kv_padding is not None else sum(self.kv_seqlen[:i])
            qi = torch.arange(q, device=device).unsqueeze(-1) + ((k - q) if self.bottom_right else 0)
            kj = torch.arange(k, device=device).unsqueeze(0)
            block = torch.ones((q, k), dtype=torch.bool, device=device)
            if self.causal:
                block &= kj <= qi
            if self.window is not None:
                block &= kj > qi - self.window
            keep[q0:q0 + q, k0:k0 + k] = block
            q0 += q
        bias = torch.zeros((s, t), dtype=dtype, device=device).masked_fill(~keep, float("-inf"))
        return bias.expand(*shape)


def _mask_maker(**kind: Any) -> Any:
    def from_seqlens(q_seqlen: Any, kv_seqlen: Any = None, *, kv_padding: Any = None, device: Any = None,
                     **kwargs: Any) -> BlockDiagonalMask:
        return BlockDiagonalMask(q_seqlen, kv_seqlen, kv_padding=kv_padding, **kind)

    return from_seqlens


for _name, _kind in (("BlockDiagonalMask", {}), ("BlockDiagonalCausalMask", {"causal": True}),
                     ("BlockDiagonalCausalFromBottomRightMask", {"causal": True, "bottom_right": True}),
                     ("BlockDiagonalCausalWithOffsetPaddedKeysMask", {"causal": True, "bottom_right": True}),
                     ("BlockDiagonalPaddedKeysMask", {})):
    shape_rule(*(f"{where}.{_name}.from_seqlens" for where in ("xformers.ops", "xformers.ops.fmha",
                                                               "xformers.ops.fmha.attn_bias")),
               flops=_no_flops)(_mask_maker(**_kind))


def _mea_flops(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_bias: Any = None, *rest: Any,
               **kw: Any) -> int:
    """As `_attention_flops`; with a block-diagonal bias only each sequence's own block: 2·b·h·Σ q_i·k_i·(d + dv)."""
    if not isinstance(attn_bias, BlockDiagonalMask):
        return _attention_flops(query, key, value)
    h = query.shape[-2] if query.dim() == 4 else 1
    return 2 * query.shape[0] * h * attn_bias.pairs() * (query.shape[-1] + value.shape[-1])


def _mea_attends(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_bias: Any = None, *rest: Any,
                 **kw: Any) -> list[tuple[int, int, float, float]] | None:
    """A causal mask object (aligned at the first key), or each block of a block-diagonal one, as bands."""
    if isinstance(attn_bias, LowerTriangularMask):
        return [(query.shape[1], key.shape[1], -math.inf, 0)]
    if not isinstance(attn_bias, BlockDiagonalMask) or not attn_bias.causal:
        return None
    bands = []
    for q, k in zip(attn_bias.q_seqlen, attn_bias.kv_seqlen):
        hi = (k - q) if attn_bias.bottom_right else 0
        bands.append((q, k, hi - attn_bias.window + 1 if attn_bias.window is not None else -math.inf, hi))
    return bands


@shape_rule("xformers.ops.memory_efficient_attention", "xformers.ops.fmha.memory_efficient_attention",
            flops=_mea_flops, mixing=True, attends=_mea_attends)
def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *, op=None,
                               output_dtype=None, **kwargs):
    """query [B, M, H, K] (or [B, M, K]), key and value [B, N, H(k), K(v)] -> [B, M, H, Kv]. attn_bias: a tensor
    added to the scores, a causal mask object (LowerTriangularMask), or a block-diagonal one (BlockDiagonalMask and
    its kin: sequences packed along M and N)."""
    three = query.dim() == 3
    if three:
        query, key, value = query.unsqueeze(2), key.unsqueeze(2), value.unsqueeze(2)
    bias = attn_bias if isinstance(attn_bias, torch.Tensor) else None
    if isinstance(attn_bias, BlockDiagonalMask) and not _meta(query, key, value):
        bias = attn_bias.materialize((query.shape[1], key.shape[1]), device=query.device)
    causal = attn_bias is not None and isinstance(attn_bias, LowerTriangularMask)
    out, _ = _attention(query, key, value, scale, bool(causal), bias=bias)
    out = out.to(output_dtype) if output_dtype is not None else out
    return out[:, :, 0] if three else out


# ---------------------------------------------------------------------------------------------------------------------
# mamba_ssm, causal_conv1d


def _scan_flops(u, delta, A, *rest: Any, **kw: Any) -> int:
    """9·b·d·l·n, as the Mamba paper counts its selective scan."""
    b, d, length = u.shape
    return 9 * b * d * length * A.shape[-1]


@shape_rule("mamba_ssm.ops.selective_scan_interface.selective_scan_fn", "mamba_ssm.selective_scan_fn",
            "selective_scan_cuda.selective_scan_fn", flops=_scan_flops, mixing=True)
def selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                      return_last_state=False):
    """u, delta [b, d, l], A [d, n], B and C [b, n, l] (or [b, g, n, l]: g groups of d / g channels) ->
    y [b, d, l] in u's dtype (and the last state [b, d, n])."""
    b, d, length = u.shape
    n = A.shape[-1]
    if _meta(u, delta, A, B, C):
        y = torch.empty((b, d, length), dtype=u.dtype, device=u.device)
        last = torch.empty((b, d, n), dtype=torch.float32, device=u.device)
        return (y, last) if return_last_state else y
    dt = delta.float() + (delta_bias.float()[..., None] if delta_bias is not None else 0)
    if delta_softplus:
        dt = F.softplus(dt)

    def per_channel(m: torch.Tensor) -> torch.Tensor:  # [b, n, l] or [b, g, n, l] -> [b, d, n, l]
        m = m.float()
        if m.dim() == 3:
            return m.unsqueeze(1).expand(b, d, n, length)
        return m.repeat_interleave(d // m.shape[1], dim=1)

    Bc, Cc = per_channel(B), per_channel(C)
    state = torch.zeros((b, d, n), dtype=torch.float32, device=u.device)
    ys = []
    for t in range(length):
        state = torch.exp(dt[:, :, t, None] * A.float()) * state + dt[:, :, t, None] * Bc[..., t] * \
            u.float()[:, :, t, None]
        ys.append((state * Cc[..., t]).sum(-1))
    y = torch.stack(ys, dim=-1)
    if D is not None:
        y = y + u.float() * D.float()[..., None]
    if z is not None:
        y = y * F.silu(z.float())
    y = y.to(u.dtype)
    return (y, state) if return_last_state else y


@shape_rule("selective_scan_cuda.fwd", flops=_scan_flops, mixing=True)
def selective_scan_cuda_fwd(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    """mamba_ssm's compiled scan, as its wrapper calls it: [out, x] (and out_z where z is given): out the scan
    [b, d, l] in delta's dtype before the gate, x the states at the end of each 2048-token chunk [b, d, chunks, 2n]
    in A's dtype (the state at the odd indices of the last chunk), out_z = out · silu(z)."""
    b, d, length = u.shape
    n = A.shape[-1]
    x = torch.zeros((b, d, -(-length // 2048), 2 * n), dtype=A.dtype, device=u.device)
    if _meta(u, delta, A, B, C):
        out = torch.empty_like(delta)
        return [out, x] + ([torch.empty_like(z)] if z is not None else [])
    out, last = selective_scan_fn(u, delta, A, B, C, D, None, delta_bias, delta_softplus, return_last_state=True)
    x[:, :, -1, 1::2] = last.to(x.dtype)
    out = out.to(delta.dtype)
    return [out, x] + ([(out.float() * F.silu(z.float())).to(z.dtype)] if z is not None else [])


def _conv_flops(x, weight, *rest: Any, **kw: Any) -> int:
    """A depthwise causal convolution of width w: 2·b·d·l·w."""
    return 2 * x.numel() * weight.shape[-1]


@shape_rule("causal_conv1d.causal_conv1d_fn", "causal_conv1d.causal_conv1d_interface.causal_conv1d_fn",
            flops=_conv_flops)
def causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
                     final_states_out=None, activation=None):
    """x [b, d, l], weight [d, w] -> [b, d, l]: each channel convolved with its own w taps over the past (and the
    last w - 1 inputs as the final state [b, d, w - 1])."""
    b, d, length = x.shape
    w = weight.shape[-1]
    if _meta(x, weight):
        y = torch.empty_like(x)
        final = torch.empty((b, d, w - 1), dtype=x.dtype, device=x.device)
        return (y, final) if return_final_states else y
    past = initial_states if initial_states is not None else x.new_zeros((b, d, w - 1))
    full = torch.cat([past, x], dim=-1)
    y = F.conv1d(full, weight.unsqueeze(1), bias, groups=d)
    if activation in ("silu", "swish"):
        y = F.silu(y)
    y = y.to(x.dtype)
    return (y, full[..., -(w - 1):]) if return_final_states else y


@shape_rule("causal_conv1d.causal_conv1d_update", "causal_conv1d.causal_conv1d_interface.causal_conv1d_update",
            flops=_conv_flops)
def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None, **kwargs):
    """One decode step: x [b, d] (or [b, d, l]) pushed into conv_state [b, d, s] in place -> the convolved x."""
    two = x.dim() == 2
    xs = x.unsqueeze(-1) if two else x
    if _meta(x, conv_state, weight):
        return torch.empty_like(x)
    w = weight.shape[-1]
    full = torch.cat([conv_state, xs], dim=-1)
    conv_state.copy_(full[..., -conv_state.shape[-1]:])
    y = F.conv1d(full[..., -(xs.shape[-1] + w - 1):], weight.unsqueeze(1), bias, groups=xs.shape[1])
    if activation in ("silu", "swish"):
        y = F.silu(y)
    y = y.to(x.dtype)
    return y[..., 0] if two else y


def _inner_flops(xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight, out_proj_weight, *rest: Any,
                 **kw: Any) -> int:
    """The convolution, x_proj, dt_proj, the scan and out_proj of one Mamba block: 2·b·l·d·(w + (r + 2n) + r +
    out) + 9·b·d·l·n (r = dt rank, n = state size, from x_proj's rows r + 2n)."""
    b, _, length = xz.shape
    d, w = conv1d_weight.shape[0], conv1d_weight.shape[-1]
    r = delta_proj_weight.shape[1]
    n = (x_proj_weight.shape[0] - r) // 2
    return 2 * b * length * d * (w + x_proj_weight.shape[0] + r + out_proj_weight.shape[0]) + 9 * b * d * length * n


@shape_rule("mamba_ssm.ops.selective_scan_interface.mamba_inner_fn", "mamba_ssm.mamba_inner_fn",
            flops=_inner_flops)
def mamba_inner_fn(xz, conv1d_weight, conv1d_bias, x_proj_weight, delta_proj_weight, out_proj_weight,
                   out_proj_bias, A, B=None, C=None, D=None, delta_bias=None, B_proj_bias=None, C_proj_bias=None,
                   delta_softplus=True, **kwargs):
    """A whole Mamba block after in_proj: xz [b, 2d, l] split into x and the gate z; x convolved (causal, SiLU),
    projected to dt (through dt_proj), B and C (where not given), scanned, gated by z and projected out ->
    [b, l, out]."""
    b, _, length = xz.shape
    if _meta(xz, x_proj_weight, out_proj_weight):
        return torch.empty((b, length, out_proj_weight.shape[0]), dtype=xz.dtype, device=xz.device)
    x, z = xz.chunk(2, dim=1)
    r, n = delta_proj_weight.shape[1], A.shape[-1]
    u = causal_conv1d_fn(x, conv1d_weight.reshape(conv1d_weight.shape[0], -1), conv1d_bias, activation="silu")
    x_dbl = F.linear(u.transpose(1, 2), x_proj_weight)  # [b, l, r + 2n]
    delta = F.linear(x_dbl[..., :r], delta_proj_weight).transpose(1, 2)  # [b, d, l]
    if B is None:
        B = (x_dbl[..., r:r + n] + (B_proj_bias if B_proj_bias is not None else 0)).transpose(1, 2)
    if C is None:
        C = (x_dbl[..., r + n:r + 2 * n] + (C_proj_bias if C_proj_bias is not None else 0)).transpose(1, 2)
    y = selective_scan_fn(u, delta, A, B, C, D, z=z, delta_bias=delta_bias, delta_softplus=delta_softplus)
    return F.linear(y.transpose(1, 2), out_proj_weight, out_proj_bias)


def _norm_flops(x, weight, *rest: Any, **kw: Any) -> int:
    """About 5 operations an element (the residual add, the statistics, the scale and shift) for each output."""
    weight1 = kw.get("weight1", rest[3] if len(rest) > 3 else None)
    return 5 * x.numel() * (2 if weight1 is not None else 1)


_LAYER_NORM_PATHS = ("mamba_ssm.ops.triton.layer_norm", "mamba_ssm.ops.triton.layernorm")


@shape_rule(*(f"{m}.layer_norm_fn" for m in _LAYER_NORM_PATHS), flops=_norm_flops)
def layer_norm_fn(x, weight, bias, residual=None, x1=None, weight1=None, bias1=None, eps=1e-6, dropout_p=0.0,
                  rowscale=None, prenorm=False, residual_in_fp32=False, is_rms_norm=False,
                  return_dropout_mask=False):
    """mamba_ssm's fused add + norm: h = x·rowscale + x1 + residual (in residual's dtype, float32 where
    `residual_in_fp32`, else x's), normalised over the last dim (RMS where `is_rms_norm`) with weight and bias ->
    y in x's shape and dtype; with weight1 a second output y1 of h; with `prenorm` h is returned after them (the
    residual stream), with `return_dropout_mask` the dropout masks (bool, x's shape) last. Dropout is not applied
    (the shapes and an eval pass are the same)."""
    res_dtype = residual.dtype if residual is not None else (torch.float32 if residual_in_fp32 else x.dtype)
    h = x.float() * (rowscale.float().reshape(*x.shape[:-1], 1) if rowscale is not None else 1)
    for more in (x1, residual):
        h = h + more.float() if more is not None else h

    def normed(w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        if is_rms_norm:
            y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()
        else:
            y = F.layer_norm(h, (h.shape[-1],), w.float(), None, eps)
        return (y + b.float() if b is not None else y).to(x.dtype)

    outs = [normed(weight, bias)]
    if weight1 is not None:
        outs.append(normed(weight1, bias1))
    if prenorm:
        outs.append(h.to(res_dtype))
    if return_dropout_mask:
        outs += [torch.ones(x.shape, dtype=torch.bool, device=x.device), None if x1 is None else
                 torch.ones(x.shape, dtype=torch.bool, device=x.device)]
    return outs[0] if len(outs) == 1 else tuple(outs)


@shape_rule(*(f"{m}.rms_norm_fn" for m in _LAYER_NORM_PATHS), flops=_norm_flops)
def rms_norm_fn(x, weight, bias, residual=None, x1=None, weight1=None, bias1=None, eps=1e-6, dropout_p=0.0,
                rowscale=None, prenorm=False, residual_in_fp32=False, return_dropout_mask=False):
    """`layer_norm_fn` with `is_rms_norm`."""
    return layer_norm_fn(x, weight, bias, residual, x1, weight1, bias1, eps, dropout_p, rowscale, prenorm,
                         residual_in_fp32, True, return_dropout_mask)


@stand_in(*(f"{m}.RMSNorm" for m in _LAYER_NORM_PATHS))
class RMSNorm(torch.nn.Module):
    """mamba_ssm's triton RMSNorm(hidden_size, eps=1e-5, dropout_p=0.0, device=None, dtype=None): a weight of
    hidden_size (ones), no bias; forward(x, residual=None, prenorm=False, residual_in_fp32=False) is
    `rms_norm_fn`."""

    def __init__(self, hidden_size: int, eps: float = 1e-5, dropout_p: float = 0.0, device: Any = None,
                 dtype: Any = None):
        super().__init__()
        self.eps = eps
        self.drop = torch.nn.Dropout(dropout_p) if dropout_p > 0.0 else None
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None, prenorm: bool = False,
                residual_in_fp32: bool = False) -> Any:
        return through_rule(f"{_LAYER_NORM_PATHS[0]}.rms_norm_fn", rms_norm_fn, x, self.weight, self.bias,
                            residual=residual, eps=self.eps, prenorm=prenorm, residual_in_fp32=residual_in_fp32)


def _state_update_flops(state: torch.Tensor, *rest: Any, **kw: Any) -> int:
    """A decode step of the scan: per state element dA = exp(dt·A), dA·state, dt·B·x, their sum and its product
    with C summed (9 FLOPs an element, as `selective_state_update`'s rule counts)."""
    return 9 * state.numel()


@shape_rule("triton.jit(mamba_ssm.ops.triton.selective_state_update._selective_scan_update_kernel)",
            flops=_state_update_flops, mixing=True)
def selective_scan_update_kernel(*args: Any, **kwargs: Any) -> None:
    """The triton kernel that the package's own `selective_state_update` launches where its module imports (the
    package is the model's code): it writes into the `out` it is given, so on meta nothing is done."""
    return triton_launch(*args, **kwargs)


@shape_rule("mamba_ssm.ops.triton.selective_state_update.selective_state_update", flops=_state_update_flops,
            mixing=True)
def selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, **kwargs):
    """One decode step of the scan: state [b, d, n] updated in place with x, dt [b, d], A [d, n], B, C [b, n] ->
    y [b, d]."""
    if _meta(state, x, dt):
        return torch.empty_like(x)
    step = dt.float() + (dt_bias.float() if dt_bias is not None else 0)
    if dt_softplus:
        step = F.softplus(step)
    new = torch.exp(step[..., None] * A.float()) * state.float() + step[..., None] * B.float()[:, None] * \
        x.float()[..., None]
    state.copy_(new.to(state.dtype))
    y = (new * C.float()[:, None]).sum(-1)
    if D is not None:
        y = y + x.float() * D.float()
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(x.dtype)


# ---------------------------------------------------------------------------------------------------------------------
# deep_gemm: fp8 GEMMs that write into the `out` they are given (scales: per 128-wide group of K for the left
# operand's rows, per 128 × 128 block for the right one's)


def _dequant(pair: Any) -> torch.Tensor:
    x, s = pair if isinstance(pair, (tuple, list)) else (pair, None)
    x = x.float()
    return x if s is None else x * _expand_blocks(s, tuple(x.shape))


def _gemm_nt_flops(a: Any, b: Any, out: torch.Tensor, *rest: Any, **kw: Any) -> int:
    """out [m, n] = a [m, k] · b [n, k]ᵀ: 2·m·n·k."""
    lhs = a[0] if isinstance(a, (tuple, list)) else a
    return 2 * out.numel() * lhs.shape[-1]


@shape_rule("deep_gemm.gemm_fp8_fp8_bf16_nt", "deep_gemm.fp8_gemm_nt", flops=_gemm_nt_flops)
def gemm_fp8_fp8_bf16_nt(a, b, out, *args, **kwargs):
    """out [m, n] = dequant(a)[m, k] @ dequant(b)[n, k]ᵀ, written into `out`."""
    lhs = a[0] if isinstance(a, (tuple, list)) else a
    if not _meta(lhs, out):
        out.copy_((_dequant(a) @ _dequant(b).t()).to(out.dtype))


@shape_rule("deep_gemm.m_grouped_gemm_fp8_fp8_bf16_nt_contiguous", "deep_gemm.m_grouped_fp8_gemm_nt_contiguous",
            flops=_gemm_nt_flops)
def m_grouped_gemm_fp8_fp8_bf16_nt_contiguous(a, b, out, m_indices, *args, **kwargs):
    """Rows of a [m, k] each multiplied by its group's b [g, n, k] (m_indices [m]; -1: padding), into out [m, n]."""
    lhs = a[0] if isinstance(a, (tuple, list)) else a
    if _meta(lhs, out):
        return
    x, w = _dequant(a), _dequant(b)
    idx = m_indices.long()
    res = torch.einsum("mk,mnk->mn", x, w[idx.clamp(min=0)]) * (idx >= 0).unsqueeze(-1)
    out.copy_(res.to(out.dtype))


def _masked_flops(a: Any, b: Any, out: torch.Tensor, masked_m: Any, expected_m: int, *rest: Any, **kw: Any) -> int:
    """Each of g groups computes about expected_m rows: 2·g·expected_m·n·k."""
    lhs = a[0] if isinstance(a, (tuple, list)) else a
    g, _, n = out.shape
    return 2 * g * int(expected_m) * n * lhs.shape[-1]


@shape_rule("deep_gemm.m_grouped_gemm_fp8_fp8_bf16_nt_masked", "deep_gemm.m_grouped_fp8_gemm_nt_masked",
            flops=_masked_flops)
def m_grouped_gemm_fp8_fp8_bf16_nt_masked(a, b, out, masked_m, expected_m, *args, **kwargs):
    """Per group g: out[g, :masked_m[g]] = a[g, :masked_m[g]] @ b[g]ᵀ (a [g, m, k], b [g, n, k], out [g, m, n])."""
    lhs = a[0] if isinstance(a, (tuple, list)) else a
    if _meta(lhs, out):
        return
    res = torch.einsum("gmk,gnk->gmn", _dequant(a), _dequant(b))
    rows = torch.arange(out.shape[1], device=out.device)
    keep = rows.unsqueeze(0) < masked_m.long().unsqueeze(-1)
    out.copy_((res * keep.unsqueeze(-1)).to(out.dtype))


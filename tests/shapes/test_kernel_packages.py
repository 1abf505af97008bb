"""Shape rules and FLOPs for the entry points of CUDA-only kernel packages (issue 29): each rule's CPU result agrees
with torch's own ops computing the same thing, its meta result has the CPU result's shapes and dtypes, and a model
importing the packages (none installed here) traces on meta with every call answered and costed."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch
import torch.nn.functional as F

import archviz
from archviz.cost.masks import band_count
from archviz.cost.measure import measure
from archviz.cost.options import CostOptions
from archviz.sources import BuildOptions
from archviz.shapes import kernel_packages as kp
from archviz.shapes import kernels, trace_shapes
from archviz.walk import walk

FIX = pathlib.Path(__file__).parent.parent / "fixtures" / "cudakernels"
G = torch.Generator().manual_seed(0)


def _randn(*shape):
    return torch.randn(*shape, generator=G)


def _sdpa(q, k, v, causal):  # [b, s, h, d] layout, kv heads repeated for grouped attention
    group = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          is_causal=causal).transpose(1, 2)


def _sig(o):
    if isinstance(o, torch.Tensor):
        return (tuple(o.shape), o.dtype)
    if o is None:
        return None
    return tuple(_sig(t) for t in o)


def _on_meta(fn, *args, **kwargs):
    return fn(*(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args), **kwargs)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_func_is_attention(causal):
    q, k, v = _randn(2, 5, 4, 8), _randn(2, 5, 2, 8), _randn(2, 5, 2, 8)
    fn, _ = kernels.lookup("flash_attn.flash_attn_func")
    out = fn(q, k, v, causal=causal)
    assert torch.allclose(out, _sdpa(q, k, v, causal), atol=1e-5)
    assert _sig(_on_meta(fn, q, k, v, causal=causal)) == _sig(out)
    assert kernels.flops_formula("flash_attn.flash_attn_func")(q, k, v) == 2 * 2 * 5 * 4 * 5 * (8 + 8)


def test_flash_attn_varlen_func_attends_within_each_sequence():
    lengths = [3, 5]
    q, k, v = _randn(8, 4, 8), _randn(8, 2, 8), _randn(8, 2, 8)
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    out = kp.flash_attn_varlen_func(q, k, v, cu, cu, 5, 5, causal=True)
    want = torch.cat([_sdpa(q[a:b][None], k[a:b][None], v[a:b][None], True)[0]
                      for a, b in zip([0, 3], [3, 8])])
    assert torch.allclose(out, want, atol=1e-5) and sum(lengths) == out.shape[0]
    assert _sig(_on_meta(kp.flash_attn_varlen_func, q, k, v, cu, cu, 5, 5, causal=True)) == _sig(out)


def test_flash_attn_with_kvcache_writes_the_new_keys_and_attends_to_what_is_held():
    b, t, n = 2, 10, 6
    k_cache, v_cache = torch.zeros(b, t, 2, 8), torch.zeros(b, t, 2, 8)
    old_k, old_v = _randn(b, n, 2, 8), _randn(b, n, 2, 8)
    k_cache[:, :n], v_cache[:, :n] = old_k, old_v
    q, k, v = _randn(b, 1, 4, 8), _randn(b, 1, 2, 8), _randn(b, 1, 2, 8)
    out = kp.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=n, causal=True)
    assert torch.equal(k_cache[:, n], k[:, 0]) and torch.equal(v_cache[:, n], v[:, 0])
    want = _sdpa(q, torch.cat([old_k, k], 1), torch.cat([old_v, v], 1), False)  # one query sees every key
    assert torch.allclose(out, want, atol=1e-5)
    assert _sig(_on_meta(kp.flash_attn_with_kvcache, q, k_cache, v_cache, k, v, cache_seqlens=n)) == _sig(out)


def test_xformers_memory_efficient_attention_with_a_causal_mask():
    q, k, v = _randn(2, 5, 4, 8), _randn(2, 5, 4, 8), _randn(2, 5, 4, 8)
    mask, _ = kernels.lookup("xformers.ops.LowerTriangularMask")
    fn, _ = kernels.lookup("xformers.ops.memory_efficient_attention")
    out = fn(q, k, v, attn_bias=mask())
    assert torch.allclose(out, _sdpa(q, k, v, True), atol=1e-5)
    assert torch.allclose(fn(q, k, v), _sdpa(q, k, v, False), atol=1e-5)
    assert _sig(_on_meta(fn, q, k, v)) == _sig(out)


def test_causal_conv1d_fn_is_a_causal_depthwise_convolution():
    x, w, bias = _randn(2, 6, 7), _randn(6, 4), _randn(6)
    out = kp.causal_conv1d_fn(x, w, bias)
    want = torch.zeros_like(x)
    for t in range(7):
        for i in range(4):
            src = t - 3 + i
            if src >= 0:
                want[:, :, t] += w[:, i] * x[:, :, src]
    assert torch.allclose(out, want + bias[:, None], atol=1e-5)
    assert _sig(_on_meta(kp.causal_conv1d_fn, x, w, bias, return_final_states=True)) == \
        _sig(kp.causal_conv1d_fn(x, w, bias, return_final_states=True))


def test_selective_scan_fn_recurrence():
    """With A = 0 the state only accumulates: h_t = Σ_{s ≤ t} δ_s·B_s·u_s, y_t = Σ_n C_t·h_t + D·u_t."""
    b, d, n, length = 2, 3, 4, 5
    u, delta = _randn(b, d, length), torch.rand(b, d, length, generator=G)
    Bm, Cm, D = _randn(b, n, length), _randn(b, n, length), _randn(d)
    y = kp.selective_scan_fn(u, delta, torch.zeros(d, n), Bm, Cm, D)
    h = torch.cumsum(delta[:, :, None, :] * Bm[:, None] * u[:, :, None, :], dim=-1)  # [b, d, n, l]
    assert torch.allclose(y, (h * Cm[:, None]).sum(2) + D[:, None] * u, atol=1e-5)
    A = -torch.rand(d, n, generator=G)
    assert _sig(_on_meta(kp.selective_scan_fn, u, delta, A, Bm, Cm, D, return_last_state=True)) == \
        _sig(kp.selective_scan_fn(u, delta, A, Bm, Cm, D, return_last_state=True))


def test_deep_gemm_fp8_gemm_writes_its_output():
    a, b = _randn(6, 256).to(torch.float8_e4m3fn), _randn(5, 256).to(torch.float8_e4m3fn)
    out = torch.empty(6, 5, dtype=torch.bfloat16)
    kp.gemm_fp8_fp8_bf16_nt((a, torch.ones(6, 2)), (b, torch.ones(1, 2)), out)
    assert torch.allclose(out.float(), (a.float() @ b.float().t()).bfloat16().float())
    assert kernels.flops_formula("deep_gemm.gemm_fp8_fp8_bf16_nt")((a, None), (b, None), out) == 2 * 6 * 5 * 256


def test_a_model_importing_the_packages_traces_and_costs_on_meta():
    cfg = json.loads((FIX / "config.json").read_text())
    built = archviz.build(str(FIX / "model.py"), config=str(FIX / "config.json"))
    record = trace_shapes(built, walk(built))
    mixer = next(m for m in record.modules if m.path == "mixer")
    assert mixer.calls[0].outputs[0] == ("B", "T", cfg["dim"])
    assert set(mixer.kernels) == {"flash_attn.flash_attn_func", "causal_conv1d.causal_conv1d_fn",
                                  "mamba_ssm.selective_scan_fn", "deep_gemm.gemm_fp8_fp8_bf16_nt"}
    B, T = 1, 16
    cost = measure(str(FIX / "model.py"), BuildOptions(config=str(FIX / "config.json")),
                   CostOptions(batch=B, seq=T, context=64))
    prefill = cost.extra("cost")["prefill"]
    assert not prefill["unknown"].get("mixer")
    d, h = cfg["dim"], cfg["n_heads"]
    kernel_flops = (2 * B * T * h * T * 2 * (d // h) + 2 * B * d * T * cfg["d_conv"] +
                    9 * B * d * T * cfg["d_state"] + 2 * B * T * d * d)
    assert prefill["flops"]["mixer"] == kernel_flops  # its own ops besides the kernels are element-wise
    # flash_attn_func(causal=True): its scores and weighted sums attended over the T(T+1)/2 pairs its mask keeps
    assert prefill["flops"]["mixer"] - prefill["masked_flops"]["mixer"] == \
        kernel_flops - 2 * B * h * 2 * (d // h) * (T * T - T * (T + 1) // 2)


def _mask_rule(name: str):
    fn, _ = kernels.lookup(f"xformers.ops.fmha.attn_bias.{name}.from_seqlens")
    return fn


def test_xformers_block_diagonal_causal_local_mask_attends_within_each_sequence():
    """Sequences of 3 and 5 packed along one axis: each query sees its own sequence's keys up to itself, and (local
    attention, window 2) only the last 2 of them; computed here per sequence with an explicit mask."""
    lengths, window = [3, 5], 2
    q, k, v = _randn(1, 8, 4, 8), _randn(1, 8, 4, 8), _randn(1, 8, 4, 8)
    mask = _mask_rule("BlockDiagonalCausalMask")(lengths).make_local_attention(window)
    fn, _ = kernels.lookup("xformers.ops.fmha.memory_efficient_attention")
    out = fn(q, k, v, mask)
    parts, start, kept = [], 0, 0
    for n in lengths:
        i, j = torch.arange(n)[:, None], torch.arange(n)[None]
        allowed = (j <= i) & (j > i - window)
        kept += int(allowed.sum())
        qs, ks, vs = (x[:, start:start + n].transpose(1, 2) for x in (q, k, v))
        parts.append(F.scaled_dot_product_attention(qs, ks, vs, attn_mask=allowed).transpose(1, 2))
        start += n
    assert torch.allclose(out, torch.cat(parts, dim=1), atol=1e-5)
    assert _sig(_on_meta(fn, q, k, v, mask)) == _sig(out)
    flops = kernels.flops_formula("xformers.ops.fmha.memory_efficient_attention")
    assert flops(q, k, v, mask) == 2 * 1 * 4 * (3 * 3 + 5 * 5) * (8 + 8)  # each sequence's own block
    bands = kernels.attends_formula("xformers.ops.fmha.memory_efficient_attention")(q, k, v, mask)
    assert sum(band_count(*b) for b in bands) == kept  # the pairs `cost` counts attended: the explicit mask's
    assert kernels.flops_formula("xformers.ops.fmha.attn_bias.BlockDiagonalCausalMask.from_seqlens")(lengths) == 0


def test_xformers_padded_keys_mask_of_a_decode_step():
    """One new query per sequence against keys held in blocks of 6 slots, the first 4 and 2 of them filled: each
    query sees its own block's filled keys (causal from the bottom right: the query is the last of them)."""
    q, k, v = _randn(1, 2, 2, 8), _randn(1, 12, 2, 8), _randn(1, 12, 2, 8)
    mask = _mask_rule("BlockDiagonalCausalWithOffsetPaddedKeysMask")(q_seqlen=[1, 1], kv_padding=6, kv_seqlen=[4, 2])
    out = kp.memory_efficient_attention(q, k, v, mask)
    want = torch.cat([_sdpa(q[:, :1], k[:, 0:4], v[:, 0:4], False), _sdpa(q[:, 1:], k[:, 6:8], v[:, 6:8], False)], 1)
    assert torch.allclose(out, want, atol=1e-5)


def test_mamba_inner_fn_is_the_whole_block():
    """xz [b, 2d, l] -> conv (causal, SiLU), x_proj to dt/B/C, dt_proj, the scan gated by z, out_proj; with A = 0
    the scan is a running sum, written here with plain torch ops."""
    b, d, length, n, r, w, out_dim = 2, 6, 5, 3, 2, 4, 7
    xz = _randn(b, 2 * d, length)
    conv_w, conv_b = _randn(d, 1, w), _randn(d)
    x_proj, dt_proj, out_proj, out_b = _randn(r + 2 * n, d), _randn(d, r), _randn(out_dim, d), _randn(out_dim)
    A, D, dt_bias = torch.zeros(d, n), _randn(d), _randn(d)
    got = kp.mamba_inner_fn(xz, conv_w, conv_b, x_proj, dt_proj, out_proj, out_b, A, D=D, delta_bias=dt_bias)
    x, z = xz[:, :d], xz[:, d:]
    u = F.silu(F.conv1d(F.pad(x, (w - 1, 0)), conv_w, conv_b, groups=d))  # [b, d, l]
    dbl = torch.einsum("bdl,ed->ble", u, x_proj)
    delta = F.softplus(torch.einsum("blr,dr->bdl", dbl[..., :r], dt_proj) + dt_bias[:, None])
    Bm, Cm = dbl[..., r:r + n], dbl[..., r + n:]  # [b, l, n]
    h = torch.cumsum(delta[:, :, :, None] * Bm[:, None] * u[..., None], dim=2)  # [b, d, l, n]
    y = ((h * Cm[:, None]).sum(-1) + D[:, None] * u) * F.silu(z)
    assert torch.allclose(got, y.transpose(1, 2) @ out_proj.t() + out_b, atol=1e-4)
    assert _sig(_on_meta(kp.mamba_inner_fn, xz, conv_w, conv_b, x_proj, dt_proj, out_proj, out_b, A)) == _sig(got)
    flops = kernels.flops_formula("mamba_ssm.ops.selective_scan_interface.mamba_inner_fn")
    assert flops(xz, conv_w, conv_b, x_proj, dt_proj, out_proj) == \
        2 * b * length * d * (w + (r + 2 * n) + r + out_dim) + 9 * b * d * length * n


def test_flash_attn_masks_attend_the_pairs_its_kernel_keeps():
    """Causal and windowed masks aligned at the last key (3 new queries over 7 keys): the bands `cost` counts
    attended hold the pairs an explicit mask keeps."""
    s, t = 3, 7
    q, k = _randn(1, s, 2, 4), _randn(1, t, 2, 4)
    i, j = torch.arange(s)[:, None] + (t - s), torch.arange(t)[None]
    attends = kernels.attends_formula("flash_attn.flash_attn_func")
    for causal, window, allowed in ((True, (-1, -1), j <= i), (True, (2, 0), (j <= i) & (j >= i - 2)),
                                    (False, (1, 1), (j >= i - 1) & (j <= i + 1))):
        bands = attends(q, k, k, 0.0, None, causal, window)
        assert sum(band_count(*b) for b in bands) == int(allowed.sum()), (causal, window)

"""`archviz cost --hardware` (issue 35): lower bounds on a decode step's time, worked out here from figures written in
the test -- a checkpoint's published total size in bytes, the config's KV formula, the spec sheet's bandwidth and
peak -- and compared with archviz's.

The published sizes are the `metadata.total_size` of each model's `model.safetensors.index.json` on the Hub (bf16):
Llama-3-8B 16,060,522,496 B (8,030,261,248 parameters), Mixtral-8x7B-v0.1 93,405,585,408 B (46,702,792,704),
Mistral-7B-v0.1 14,483,464,192 B (7,241,732,096). H200 SXM: 4.8 TB/s, 989.5 dense BF16 TFLOP/s, NVLink 900 GB/s
both ways (NVIDIA's H200 datasheet).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from archviz.cli import app

TESTS = Path(__file__).resolve().parent.parent
DSV3 = TESTS / "fixtures" / "dsv3like"

H200_BANDWIDTH = 4.8e12
H200_BF16 = 989.5e12
H200_LINK = 450e9  # one direction
BF16 = 2


def _sets(cfg: dict) -> list[str]:
    out = []
    for k, v in cfg.items():
        out += ["--set", f"{k}={json.dumps(v, separators=(',', ':'))}"]
    return out


def _cost(*args: object) -> dict:
    result = CliRunner().invoke(app, ["cost", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _decode(d: dict, key: str = "h200") -> dict:
    (b,) = [b for b in d["hardware"] if b["hardware"]["key"] == key]
    return b


LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256, dtype="bfloat16")
MIXTRAL = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=32000, num_local_experts=8, num_experts_per_tok=2,
               dtype="bfloat16")
MISTRAL_7B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=8, vocab_size=32000, sliding_window=4096, dtype="bfloat16")


def _kv_per_token(cfg: dict) -> int:
    """K and V of every layer: 2 × layers × KV heads × head_dim × 2 bytes."""
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * BF16


def test_dense_llama3_8b_decode_bound_on_h200():
    """B = 1 at L = 8K: every weight once but the input table (one row of it), and the whole cache."""
    published = 16_060_522_496
    L = 8192
    d = _cost("hf:llama", *_sets(LLAMA3_8B), "--seq", 16, "--context", "8K", "--hardware", "h200")
    h = _decode(d)
    table = 128256 * 4096 * BF16
    weights = published - table + 4096 * BF16
    kv = _kv_per_token(LLAMA3_8B) * L
    assert h["decode"]["weights"] == weights
    assert h["decode"]["kv"] == kv
    assert h["decode"]["t_memory"] == pytest.approx((weights + kv) / H200_BANDWIDTH, rel=1e-12)
    assert h["peak"] == H200_BF16 and h["compute_dtype"] == "bf16"
    assert h["decode"]["binds"] == "memory"
    assert h["decode"]["time"] == h["decode"]["t_memory"]
    assert h["tokens_per_s_sequence"] == pytest.approx(H200_BANDWIDTH / (weights + kv), rel=1e-12)
    # the compute term is the attended FLOPs over the dense peak (these FLOPs are checked in tests/cost/test_measure.py)
    assert h["decode"]["flops_kind"] == "attended"
    assert h["decode"]["t_compute"] == pytest.approx(d["decode"]["attended_flops"] / H200_BF16, rel=1e-12)
    # fits: weights + KV + activation peak in 141 GB
    assert h["fit"]["fits"] and h["fit"]["min_gpus"] == 1


@pytest.mark.parametrize("B", [1, 256])
def test_mixtral_decode_reads_the_experts_its_tokens_touch(B):
    """E = 8 experts, top-2: B tokens touch E·(1 − (1 − k/E)^B) of them, expected (2 at B = 1, all but a 1e-32
    share at B = 256); the input table is read B rows of it."""
    published = 93_405_585_408
    L = 4096
    E, k, layers, H, F = 8, 2, 32, 4096, 14336
    d = _cost("hf:mixtral", *_sets(MIXTRAL), "--seq", 16, "--context", L, "--batch", B, "--hardware", "h200",
              "--gpus", 8)
    h = _decode(d)
    experts = layers * E * 3 * H * F * BF16
    share = 1 - (1 - k / E) ** B
    table = 32000 * H * BF16
    weights = published - experts * (1 - share) - table + B * H * BF16
    kv = _kv_per_token(MIXTRAL) * L * B
    assert h["decode"]["weights"] == pytest.approx(weights, rel=1e-12)
    assert h["decode_weights"]["experts"][0]["touched"] == pytest.approx(E * share, rel=1e-12)
    if B == 1:
        assert h["decode_weights"]["experts"][0]["touched"] == pytest.approx(k)
    assert h["decode"]["kv"] == kv
    N = 8  # tensor parallel attention, expert parallel experts: each GPU reads and computes an eighth
    assert h["decode"]["t_memory"] == pytest.approx((weights + kv) / N / H200_BANDWIDTH, rel=1e-12)
    # interconnect: an all-reduce of B·H bf16 values per layer's attention (a ring sends 2·(N−1)/N of it), and
    # each MoE layer's dispatch and combine of the B·k pairs, (N−1)/N of them to other GPUs, tokens spread N ways
    all_reduce = layers * 2 * (N - 1) / N * B * H * BF16
    all_to_all = layers * 2 * B * k * H * BF16 * (N - 1) / N ** 2
    assert h["decode"]["t_interconnect"] == pytest.approx((all_reduce + all_to_all) / H200_LINK, rel=1e-12)
    assert h["decode"]["time"] == max(h["decode"]["t_memory"], h["decode"]["t_compute"],
                                      h["decode"]["t_interconnect"])
    assert h["tokens_per_s"] == pytest.approx(B / h["decode"]["time"], rel=1e-12)


def test_sliding_window_mistral_reads_its_window_not_the_context():
    """Mistral-7B's layers slide a 4096 window: transformers' cache keeps the last W − 1 tokens (the new one makes
    W), so at L = 32K a step reads W − 1 slots of each layer, not 32K."""
    published = 14_483_464_192
    L, W = 32768, 4096
    d = _cost("hf:mistral", *_sets(MISTRAL_7B), "--seq", 16, "--context", "32K", "--hardware", "h200")
    h = _decode(d)
    weights = published - 32000 * 4096 * BF16 + 4096 * BF16
    kv = _kv_per_token(MISTRAL_7B) * (W - 1)
    assert h["decode"]["kv"] == kv
    assert h["decode"]["t_memory"] == pytest.approx((weights + kv) / H200_BANDWIDTH, rel=1e-12)
    assert h["decode"]["binds"] == "memory"
    assert L > W


def _dsv3like_on_meta(cfg: dict) -> torch.nn.Module:
    """The fixture's own code, built by torch here (its kernels stubbed by hand): what its tensors take."""
    kernel = types.ModuleType("kernel")
    for name in ("act_quant", "fp4_act_quant", "fp4_gemm", "fp8_gemm", "weight_dequant"):
        setattr(kernel, name, lambda *a, **k: None)
    saved = sys.modules.get("kernel")
    sys.modules["kernel"] = kernel
    try:
        spec = importlib.util.spec_from_file_location("dsv3like_for_bounds", DSV3 / "model.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if saved is None:
            sys.modules.pop("kernel", None)
        else:
            sys.modules["kernel"] = saved
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("meta"):
            return mod.Transformer(mod.ModelArgs(**cfg))
    finally:
        torch.set_default_dtype(before)


def test_mla_decode_reads_the_latent_and_the_routed_experts():
    """DeepSeek-style MLA caches the kv_lora_rank latent and the rope key, (512 + 64 at V3's size) a token a layer,
    not heads × head_dim; its routed experts (fp4 here) read top-k of E at B = 1."""
    cfg = json.loads((DSV3 / "config.json").read_text())
    L = 1000
    d = _cost(DSV3 / "model.py", "--config", DSV3 / "config.json", "--seq", 16, "--context", L,
              "--hardware", "h200")
    h = _decode(d)
    model = _dsv3like_on_meta(cfg)
    stored = sum(p.nbytes for p in model.parameters())
    E, k = cfg["n_routed_experts"], cfg["n_activated_experts"]
    experts = sum(p.nbytes for layer in model.layers if hasattr(layer.ffn, "experts")
                  for p in layer.ffn.experts.parameters())
    table = model.embed.weight.nbytes
    weights = stored - experts * (1 - k / E) - table + table // cfg["vocab_size"]
    kv = (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * cfg["n_layers"] * BF16 * L
    assert h["decode"]["kv"] == kv
    assert h["decode"]["weights"] == pytest.approx(weights, rel=1e-12)
    assert h["decode"]["t_memory"] == pytest.approx((weights + kv) / H200_BANDWIDTH, rel=1e-12)
    assert h["decode"]["binds"] == "memory"

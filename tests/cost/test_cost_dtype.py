"""What `archviz cost` counts bytes in, and says so (issue 44): a transformers config that names no dtype is counted in
bfloat16, as the gallery counts it; a config's own dtype and an override win; `hf:TYPE` is said to be transformers'
default config for TYPE. Expected bytes are worked out here from the config."""

from __future__ import annotations

import json
from pathlib import Path


def _cost(cli, *args) -> dict:
    p = cli("cost", *map(str, args), "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_hf_deepseek_v3_is_counted_in_bfloat16_by_default_and_says_so(archviz_cli) -> None:
    from transformers import AutoConfig

    cfg = AutoConfig.for_model("deepseek_v3")
    assert getattr(cfg, "dtype", None) is None  # the default config names no dtype
    # MLA caches one latent a token and layer: kv_lora_rank values and the shared rope key, 2 bytes each in bf16
    per_token = (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * cfg.num_hidden_layers * 2
    assert per_token == 70_272
    c = _cost(archviz_cli, "hf:deepseek_v3")
    assert c["kv"]["per_token"] == per_token
    assert list(c["memory"]["weights_by_dtype"]) == ["bfloat16"]
    assert c["dtype"] == "bfloat16" and c["dtype_said"] == "bfloat16 (the config names none)"
    assert c["config_said"] == "transformers' default config for deepseek_v3"
    # transformers' MLA expands every cached latent through kv_b_proj each decode step (L + 1 positions); the
    # absorbed form applies those weights to the new token alone: both figures, the second derived here
    expand = 2 * cfg.kv_lora_rank * cfg.num_attention_heads * (cfg.qk_nope_head_dim + cfg.v_head_dim)  # a position
    positions = c["context"] + 1
    code = cfg.num_hidden_layers * positions * expand
    assert c["decode_absorbed_flops"] == c["decode"]["flops"] - code + cfg.num_hidden_layers * expand
    given = _cost(archviz_cli, "hf:deepseek_v3", "--set", "dtype=bfloat16")  # as the gallery builds it: one entry
    assert given == c
    text = archviz_cli("cost", "hf:deepseek_v3").stdout  # the records cache's entry: nothing counted again
    assert f"kv_b_proj over all {positions:,} positions" in text and f"{c['decode_absorbed_flops']:,}" in text
    assert "transformers' default config for deepseek_v3" in text
    assert text.count("in bfloat16 (the config names none)") == 2  # KV per token and weights
    assert "70,272 B" in text or "68.62 KiB" in text


def test_a_configs_own_dtype_and_an_override_are_kept(archviz_cli, tmp_path: Path) -> None:
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128,
           "torch_dtype": "float32"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    head = cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = 2 * cfg["num_key_value_heads"] * head * cfg["num_hidden_layers"]  # K and V values a token
    c = _cost(archviz_cli, tmp_path / "config.json")
    assert c["dtype"] == "float32" and c["dtype_said"] == "float32 (the config's)" and c["config_said"] is None
    assert c["kv"]["per_token"] == kv * 4 and list(c["memory"]["weights_by_dtype"]) == ["float32"]
    assert c["decode_absorbed_flops"] is None  # keys and values cached as the step uses them: nothing re-projected
    c = _cost(archviz_cli, tmp_path / "config.json", "--set", "dtype=float16")
    assert c["dtype"] == "float16" and c["dtype_said"].startswith("float16 (")
    assert c["kv"]["per_token"] == kv * 2 and list(c["memory"]["weights_by_dtype"]) == ["float16"]


def test_summary_and_site_say_what_built_an_hf_config_and_its_dtype(archviz_cli) -> None:
    """`hf:TYPE` is transformers' default config for TYPE, which names no dtype: summary (terminal and JSON) and the
    site's overview say both, beside the bytes."""
    import archviz
    from archviz.render.site import CodeBank, ModelSite

    args = ("hf:llama", "--set", "num_hidden_layers=1")
    s = json.loads(archviz_cli("summary", *args, "--json").stdout)
    assert s["config_said"] == "transformers' default config for llama"
    assert s["dtype_said"].startswith("the config names no dtype") and list(s["bytes_by_dtype"]) == ["float32"]
    text = archviz_cli("summary", *args).stdout
    assert "transformers' default config for llama" in text and "the config names no dtype" in text
    assert "config: transformers' default config for llama" in archviz_cli("inspect", *args).stdout
    assert json.loads(archviz_cli("inspect", *args, "--json").stdout)["config_said"] == s["config_said"]
    o = ModelSite(archviz.load("hf:llama", overrides={"num_hidden_layers": 1}), "m", CodeBank(), None,
                  None).overview_context()
    assert o["config_said"] == s["config_said"] and o["dtype_said"] == s["dtype_said"]

"""archviz/sources/hf.py: `--set` on a transformers type whose config holds its text config as an AutoConfig entry
of `sub_configs` (fuyu, got_ocr2: AutoConfig cannot be made by itself) is checked against the text config the default
config holds. The gallery sets dtype=bfloat16 on every type whose config names no dtype: these types failed there."""

from __future__ import annotations

import json

from typer.testing import CliRunner


def _summary(*args: str) -> dict:
    from archviz.cli import app

    r = CliRunner().invoke(app, ["summary", "hf:fuyu", *args, "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_set_on_a_config_whose_text_config_is_an_auto_config():
    from transformers import FuyuConfig

    assert FuyuConfig.sub_configs["text_config"].__name__ == "AutoConfig"
    # dtype: a field of FuyuConfig itself; num_hidden_layers: of its text config (Persimmon), not of FuyuConfig
    assert not hasattr(FuyuConfig(), "num_hidden_layers")
    two = _summary("--set", "num_hidden_layers=2", "--set", "dtype=bfloat16")
    three = _summary("--set", "num_hidden_layers=3", "--set", "dtype=bfloat16")
    assert two["bytes"] == 2 * two["parameters"]  # every weight in bfloat16
    text = FuyuConfig().text_config
    h, inter = text.hidden_size, text.intermediate_size
    # one Persimmon decoder layer: fused qkv and dense with biases, q/k layernorms of head_dim, two layernorms,
    # an MLP of two biased linears
    head = h // text.num_attention_heads
    layer = (h * 3 * h + 3 * h) + (h * h + h) + 2 * (2 * head) + 2 * (2 * h) + (h * inter + inter) + (inter * h + h)
    assert three["parameters"] - two["parameters"] == layer

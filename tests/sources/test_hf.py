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


def test_a_field_unset_in_the_default_config_is_named_by_the_name_it_is_stored_under():
    """dots1's default config leaves n_routed_experts None; its experts read it by the alias num_local_experts
    (the config's attribute_map) into `torch.empty(num_experts, ...)`, whose TypeError says nothing of a None
    ("empty() takes 1 positional argument but 3 were given"). The build's line names the field to set, by both names.
    """
    from archviz.errors import SourceError
    from archviz.sources import BuildOptions, build
    from transformers import Dots1Config

    config = Dots1Config()
    assert config.n_routed_experts is None and Dots1Config.attribute_map["num_local_experts"] == "n_routed_experts"
    try:
        build("hf:dots1", BuildOptions())
    except SourceError as e:
        line = e.line()
    else:
        raise AssertionError("hf:dots1 built from a default config that leaves n_routed_experts None")
    assert "TypeError: empty() takes 1 positional argument" in line, line
    assert ("takes it from config.num_local_experts (n_routed_experts), which this config leaves unset; give it with "
            "--set n_routed_experts=VALUE") in line, line

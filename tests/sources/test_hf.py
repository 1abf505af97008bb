"""archviz/sources/hf.py: `--set` on a transformers type whose config holds its text config as an AutoConfig entry
of `sub_configs` (fuyu, got_ocr2: AutoConfig cannot be made by itself) is checked against the text config the default
config holds. The gallery sets dtype=bfloat16 on every type whose config names no dtype: these types failed there."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner
from archviz.cli.flags import cli_text


def _summary(*args: str, source: str = "hf:fuyu") -> dict:
    from archviz.cli import app

    r = CliRunner().invoke(app, ["summary", source, *args, "--json"], catch_exceptions=False)
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
    from archviz.sources import BuildOptions
    from archviz.sources.dispatch import build
    from transformers import Dots1Config

    config = Dots1Config()
    assert config.n_routed_experts is None and Dots1Config.attribute_map["num_local_experts"] == "n_routed_experts"
    with pytest.raises(SourceError) as e:
        build("hf:dots1", BuildOptions())
    line = cli_text(e.value.line())  # as the CLI prints it
    assert "TypeError: empty() takes 1 positional argument" in line, line
    assert ("takes it from config.num_local_experts (n_routed_experts), which this config leaves unset; give it with "
            "--set n_routed_experts=VALUE") in line, line


def test_a_causal_lm_whose_config_is_a_sub_config_of_the_default_is_built_from_it():
    """musicgen's default config is the composite MusicgenConfig (text encoder, audio encoder, decoder); its causal
    LM, MusicgenForCausalLM, takes the `decoder` sub-config (transformers' AutoModelForCausalLM.from_config hands it
    the whole and dies on `config.dropout`). Built from the decoder, its count is the decoder's, from its fields:
    one embedding of V + 1 rows per codebook, per layer self- and cross-attention (4 h² each, no biases), fc1 and
    fc2 (no biases) and three LayerNorms, a final LayerNorm, one LM head per codebook."""
    from transformers import MusicgenConfig, MusicgenForCausalLM

    assert MusicgenForCausalLM.config_class is MusicgenConfig.sub_configs["decoder"]
    d = MusicgenConfig().decoder
    h, V, F, C, L = d.hidden_size, d.vocab_size, d.ffn_dim, d.num_codebooks, d.num_hidden_layers
    layer = 2 * 4 * h * h + 2 * h * F + 3 * 2 * h
    got = _summary(source="hf:musicgen")
    assert got["model_class"].endswith(".MusicgenForCausalLM")
    assert got["parameters"] == C * (V + 1) * h + L * layer + 2 * h + C * h * V


def test_a_table_the_default_config_leaves_empty_is_named():
    """cohere_compass_text's default config has an empty rope_parameters, which its rotary embedding looks up by
    layer type: the KeyError's line names the field and what it lacks."""
    from archviz.errors import SourceError
    from archviz.sources import BuildOptions
    from archviz.sources.dispatch import build
    from transformers import AutoConfig

    config = AutoConfig.for_model("cohere_compass_text")
    assert config.rope_parameters == {} and "full_attention" in config.layer_types
    with pytest.raises(SourceError) as e:
        build("hf:cohere_compass_text", BuildOptions())
    assert cli_text(e.value.line()).endswith("KeyError: 'full_attention' — config.rope_parameters has no "
                                             "'full_attention' entry in this config (it is empty); give it with --set "
                                             "rope_parameters=VALUE"), e.value.line()


def test_set_on_a_type_whose_default_config_fails_its_own_validation_says_it_is_transformers():
    """gemma4_assistant's default config fails transformers' own validator, so the gallery's dtype=bfloat16 (or
    any --set) cannot be checked against it: the line says so and quotes transformers."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from archviz.errors import SourceError, one_line
    from archviz.sources import BuildOptions
    from archviz.sources.dispatch import build

    with pytest.raises(Exception) as own:
        CONFIG_MAPPING["gemma4_assistant"]()
    with pytest.raises(SourceError) as e:
        build("hf:gemma4_assistant", BuildOptions(overrides=(("dtype", "bfloat16"),)))
    line = e.value.line()
    assert "transformers' own default Gemma4AssistantConfig fails its validation" in line, line
    assert one_line(str(own.value)) in line


def test_a_field_a_sub_config_lacks_is_named_with_the_set_that_gives_it():
    """dbrx's attention reads `attn_config.rope_theta`, which transformers' own DbrxAttentionConfig does not have:
    the line names the sub-config and the field, and the --set it says builds the model."""
    from transformers import DbrxConfig

    from archviz.errors import SourceError
    from archviz.sources import BuildOptions
    from archviz.sources.dispatch import build

    assert not hasattr(DbrxConfig().attn_config, "rope_theta")
    with pytest.raises(SourceError) as e:
        build("hf:dbrx", BuildOptions())
    line = cli_text(e.value.line())
    assert line.endswith("config.attn_config (DbrxAttentionConfig) has no field 'rope_theta' in this config; give it "
                         "with --set 'attn_config={\"rope_theta\": VALUE}'"), line
    built = build("hf:dbrx", BuildOptions(overrides=(("attn_config", {"rope_theta": 500000}),)))
    assert built.model.config.attn_config.rope_theta == 500000

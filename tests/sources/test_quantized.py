"""`--quantized`: a transformers config.json's quantization_config laid out as from_pretrained lays it out before it
loads the weights (transformers' own quantizer, on meta): fp8 weights with their block scales. Checked against the
real DeepSeek-V3 checkpoint's headers (the manifest in tests/data)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
import transformers

import archviz
from archviz.errors import SourceError
from archviz.shapes import trace_shapes
from archviz.walk import walk
from archviz.errors import PYTHON_WORDS, option
from helpers import TESTS

V3_MANIFEST = TESTS / "data" / "checkpoints" / "deepseek-v3.manifest.json.gz"
FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}


def v3_config(tmp_path: Path, **fields) -> Path:
    """transformers' default DeepSeek-V3 config (the released model's sizes) with the Hub config's
    quantization_config, as a model folder's config.json."""
    c = transformers.AutoConfig.for_model("deepseek_v3", **fields).to_dict()
    c["architectures"] = ["DeepseekV3ForCausalLM"]
    c["quantization_config"] = FP8
    path = tmp_path / "config.json"
    path.write_text(json.dumps(c))
    return path


def test_fp8_layout_matches_the_real_checkpoint(tmp_path):
    """Every fp8 element and every scale of the real checkpoint's 61 layers (layer 61, the MTP block transformers
    does not build, aside) is in the quantized layout; the parameters are the unquantized build's."""
    manifest = json.loads(gzip.decompress(V3_MANIFEST.read_bytes()))
    tensors = manifest["tensors"].items()
    kept = [(n, t) for n, t in tensors if not n.startswith("model.layers.61.")]
    fp8 = sum(math.prod(t["shape"]) for _, t in kept if t["dtype"] == "F8_E4M3")
    scales = sum(math.prod(t["shape"]) for n, t in kept if n.endswith(".weight_scale_inv"))
    config = v3_config(tmp_path)
    quantized = archviz.load(str(config), quantized=True)
    plain = archviz.load(str(config))
    assert dict(quantized.summary.bytes_by_dtype)["float8_e4m3fn"] == fp8  # one byte per fp8 element
    assert quantized.summary.scale_elements == scales
    assert quantized.summary.parameters == plain.summary.parameters
    assert plain.summary.scale_elements == 0 and "float8_e4m3fn" not in dict(plain.summary.bytes_by_dtype)
    q = {t.name: t for t in quantized.module("model.layers.0.self_attn.q_a_proj").tensors}
    c = transformers.AutoConfig.for_model("deepseek_v3")
    assert q["weight"].dtype == "float8_e4m3fn" and q["weight"].elements == c.q_lora_rank * c.hidden_size
    assert q["weight_scale_inv"].kind == "scale" and q["weight_scale_inv"].shape == (
        math.ceil(c.q_lora_rank / 128), math.ceil(c.hidden_size / 128))
    # named as a Python caller gives the option (archviz.load's records: archviz.records.words)
    assert any(PYTHON_WORDS["quantized"] in n and 'quant_method "fp8"' in n for n in quantized.source.notes)


def test_meta_pass_runs_through_the_unquantized_modules(tmp_path):
    config = v3_config(tmp_path, num_hidden_layers=4)
    built = archviz.build(str(config), quantized=True)
    rec = trace_shapes(built, walk(built))
    c = transformers.AutoConfig.for_model("deepseek_v3")
    q = rec.module("model.layers.0.self_attn.q_a_proj")
    assert q.class_name == "FP8Linear" and q.calls[0].outputs == (("B", "T", c.q_lora_rank),)
    assert all(m.calls for m in rec.modules if m.called)
    assert any(f"unquantized modules that {option('quantized')} replaced" in n for n in rec.extra("shapes")["notes"])
    # the quantized modules are back in place after the pass
    assert type(built.model.model.layers[0].self_attn.q_a_proj).__name__ == "FP8Linear"


def test_check_with_quantized_has_no_dequantized_notes(tmp_path, archviz_cli):
    config = v3_config(tmp_path)
    r = archviz_cli("check", config, "--quantized", "-k", V3_MANIFEST, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["verdict"] == "match"
    notes = json.dumps(out)
    assert "dequantized at load" not in notes


def test_quantized_needs_a_quantization_config_and_a_transformers_source():
    with pytest.raises(SourceError) as e:
        archviz.build("hf:llama", overrides={"num_hidden_layers": 1}, quantized=True)
    assert "no quantization_config" in str(e.value)
    fixture = TESTS / "fixtures" / "dsv3like"
    with pytest.raises(SourceError) as e:
        archviz.build(str(fixture / "model.py"), config=str(fixture / "config.json"), quantized=True)
    assert "`quantized=True` applies to a transformers model" in str(e.value)  # as a Python caller gives it
    assert e.value.options == ("quantized",)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="on a GPU the mxfp4 quantizer wants its kernels")
def test_a_quantizer_that_dequantizes_here_says_so(tmp_path):
    """gpt-oss's mxfp4 quantizer dequantizes on a machine without its GPU kernels, as from_pretrained does there:
    --quantized has nothing to lay out, and says why instead of building the same model again."""
    c = transformers.AutoConfig.for_model("gpt_oss", num_hidden_layers=2).to_dict()
    c["architectures"] = ["GptOssForCausalLM"]
    c["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (tmp_path / "config.json").write_text(json.dumps(c))
    with pytest.raises(SourceError) as e:
        archviz.build(str(tmp_path / "config.json"), quantized=True)
    assert "'mxfp4' quantizer dequantizes on a machine without its GPU kernels" in str(e.value)
    assert archviz.load(str(tmp_path / "config.json")).summary.scale_elements == 0  # without the flag: builds

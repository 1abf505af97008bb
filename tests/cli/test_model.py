"""The `summary`, `inspect` and `walk` commands, run as real processes, checked against figures worked out here.

The commands are independent, so one module-scoped fixture runs them side by side; each test reads its own result.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import transformers

from archviz.cli import atomic_write
from archviz.records import SCHEMA, loads, to_json_dict
from archviz.records import SCHEMA_V3
from helpers import TESTS

DSV3 = TESTS / "fixtures" / "dsv3like"
DSV41 = TESTS / "fixtures" / "dsv41like"


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("walk")
    (d / "out.json").write_text("an older file that the walk replaces\n")
    return d


@pytest.fixture(scope="module")
def results(archviz_cli, out_dir):
    return archviz_cli.many({
        "summary_llama": ["summary", "hf:llama", "--set", "num_hidden_layers=2", "--json"],
        "inspect_layer": ["inspect", "hf:deepseek_v3", "--set", "num_hidden_layers=4", "layer", "3"],
        "inspect_wo_b": ["inspect", DSV41, "layers.1.attn.wo_b", "--json"],
        "walk": ["walk", DSV3, "-o", out_dir / "out.json"],
        "walk_shapes": ["walk", DSV3, "--shapes", "-o", out_dir / "shapes.json"],
        "walk_every_block": ["walk", DSV3, "--shapes", "--every-block", "-o", out_dir / "every.json"],
        "help": ["--help"],
        "version": ["--version"],
        "help_summary": ["summary", "--help"],
        "help_inspect": ["inspect", "--help"],
        "help_walk": ["walk", "--help"],
    })


def ok(r):
    assert r.returncode == 0, r.stderr
    return r


def test_summary_json_llama(results):
    out = json.loads(ok(results["summary_llama"]).stdout)
    c = transformers.AutoConfig.for_model("llama", num_hidden_layers=2)
    h, i, v, layers = c.hidden_size, c.intermediate_size, c.vocab_size, c.num_hidden_layers
    hd = c.head_dim
    kv = c.num_key_value_heads * hd
    assert not c.attention_bias and not c.mlp_bias and not c.tie_word_embeddings
    layer = (h * c.num_attention_heads * hd + 2 * h * kv + c.num_attention_heads * hd * h  # q, k, v, o
             + 3 * h * i + 2 * h)  # gate, up, down; two RMSNorms
    params = v * h + layers * layer + h + v * h  # embed, layers, final norm, lm_head
    assert isinstance(out["parameters"], int) and out["parameters"] == params
    assert out["active_parameters"] is None  # dense
    assert out["scale_elements"] == 0 and out["table_elements"] == 0
    # LlamaRotaryEmbedding: inv_freq and original_inv_freq, head_dim // 2 each, not saved
    assert out["buffer_elements"] == 2 * (hd // 2)
    assert out["persistent_buffer_elements"] == 0
    assert out["bytes_by_dtype"] == {"float32": 4 * params}
    assert out["parameters_by_dtype"] == {"float32": params}
    # CausalLM, model, embed_tokens, layers list, per layer (block, self_attn + q/k/v/o, mlp + gate/up/down/act_fn,
    # two norms), final norm, rotary_emb, lm_head
    assert out["modules"] == 4 + layers * (1 + 5 + 5 + 2) + 3
    assert out["stubbed_imports"] == []
    assert out["moe"] == [] and out["world_size"] == 1 and "parameters_all_ranks" not in out


def test_inspect_layer_tree_counts(results):
    text = ok(results["inspect_layer"]).stdout
    c = transformers.AutoConfig.for_model("deepseek_v3", num_hidden_layers=4)
    assert c.first_k_dense_replace <= 3  # layer 3 is a MoE layer
    h, nh, qr, kr = c.hidden_size, c.num_attention_heads, c.q_lora_rank, c.kv_lora_rank
    qk = c.qk_nope_head_dim + c.qk_rope_head_dim
    attn = (h * qr + qr + qr * nh * qk + h * (kr + c.qk_rope_head_dim) + kr
            + kr * nh * (c.qk_nope_head_dim + c.v_head_dim) + nh * c.v_head_dim * h)
    e, im = c.n_routed_experts, c.moe_intermediate_size
    experts = e * 3 * h * im
    gate = e * h
    shared = 3 * h * im * c.n_shared_experts
    moe = experts + gate + shared
    layer = attn + moe + 2 * h

    def row(name: str, count: int) -> None:
        pattern = rf"\b{re.escape(name)}\b.*\s{re.escape(f'{count:,}')}(\s|$)"
        assert re.search(pattern, text, re.M), f"no line with {name} and {count:,}:\n{text}"

    assert f"{layer:,}" in text
    row("self_attn", attn)
    row("mlp", moe)
    row("experts", experts)
    row("gate", gate)
    row("shared_experts", shared)
    row("o_proj", nh * c.v_head_dim * h)
    row("kv_b_proj", kr * nh * (c.qk_nope_head_dim + c.v_head_dim))
    assert "model.layers.3" in text


def test_inspect_module_json(results):
    out = json.loads(ok(results["inspect_wo_b"]).stdout)
    c = json.loads((DSV41 / "config.json").read_text())
    dim, rank_out = c["dim"], c["o_groups"] * c["o_lora_rank"]
    assert out["path"] == "layers.1.attn.wo_b"
    assert out["parameters"] == rank_out * dim
    assert out["inputs"] == [["B", "T", rank_out]]
    assert out["outputs"] == [["B", "T", dim]]
    for shape in out["inputs"] + out["outputs"]:
        assert all(isinstance(d, int) or (isinstance(d, str) and d) for d in shape)
    source = (DSV41 / "model.py").read_text().splitlines()
    lines = [n for n, text in enumerate(source, 1) if "self.wo_b(" in text]
    assert len(lines) == 1
    assert isinstance(out["call_sites"], list) and out["call_sites"]
    site = out["call_sites"][0]
    assert set(site) >= {"file", "line", "code"}
    assert site["file"] == "model.py" and site["line"] == lines[0]
    assert "self.wo_b(" in site["code"]


def test_walk_writes_records_file(results, out_dir):
    r = ok(results["walk"])
    assert r.stdout == ""
    target = out_dir / "out.json"
    raw = json.loads(target.read_text())  # the old content is gone, the new file is whole
    assert raw["schema"] == SCHEMA_V3 == "archviz.records/3" and list(raw)[0] == "schema"  # the compact file
    data = to_json_dict(loads(target.read_text()))  # read back, as version 1 writes each module
    assert data["schema"] == SCHEMA == "archviz.records/1"
    assert len(data["modules"]) == data["summary"]["modules"]
    c = json.loads((DSV3 / "config.json").read_text())
    assert data["modules"][0]["path"] == "" and data["source"]["kind"] == "reference"
    embed = next(m for m in data["modules"] if m["path"] == "embed")
    assert embed["totals"]["parameters"] == c["vocab_size"] * c["dim"]
    # written through a temporary file in the same folder that is moved into place: none is left behind
    assert sorted(p.name for p in out_dir.iterdir()) == ["every.json", "out.json", "shapes.json"]


def test_every_block_runs_each_repeated_block_and_records_the_same(results, out_dir):
    ok(results["walk_shapes"])
    ok(results["walk_every_block"])
    memo = to_json_dict(loads((out_dir / "shapes.json").read_text()))
    every = to_json_dict(loads((out_dir / "every.json").read_text()))
    c = json.loads((DSV3 / "config.json").read_text())
    # By default the layers after the first of each kind (and every MoE block's experts after the first) are answered
    # from the memo; --every-block runs them all, and no module's shapes, call sites or kernels differ.
    hits = [n for n in memo["extras"]["shapes"]["notes"] if "answered from an identical" in n]
    assert hits and int(hits[0].split()[0].replace(",", "")) >= c["n_layers"] - 2
    assert not any("answered from" in n for n in every["extras"]["shapes"]["notes"])
    fields = ("calls", "call_sites", "called", "assumptions", "kernels")
    assert [[m.get(f) for f in fields] for m in memo["modules"]] == [[m.get(f) for f in fields] for m in every["modules"]]


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(str(target), "{\"half\": \"" + "\ud800" + "\"}")  # a lone surrogate cannot be encoded
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
    atomic_write(str(target), "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.parametrize("case,words", [
    ("help", ["summary", "inspect", "walk"]),
    ("help_summary", ["--set", "--json", "--config", "--world-size", "--rank"]),
    ("help_inspect", ["--depth", "--json", "--set", "--shapes"]),
    ("help_walk", ["--output", "--shapes", "--set"]),
])
def test_help(results, case, words):
    r = ok(results[case])
    assert "Usage" in r.stdout
    for w in words:
        assert w in r.stdout, w
    # a flag takes no value: its row shows no type, unlike --set <list[str]>
    flags = [ln for ln in r.stdout.splitlines() if "--json" in ln or "--debug" in ln or "--no-shapes" in ln]
    assert all("<bool>" not in ln for ln in flags), flags


def test_library_log_noise_stays_out_of_the_terminal():
    """Mamba's meta pass makes transformers log that its CUDA kernels fall back to PyTorch -- about kernels that
    never run on meta. The command shows the tree and nothing else; --debug lets the log through."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRANSFORMERS_VERBOSITY"}
    cmd = [sys.executable, "-m", "archviz.cli", "inspect", "hf:mamba", "--set", "num_hidden_layers=2", "--depth", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert "lm_head" in p.stdout and "falling back" not in p.stderr + p.stdout, p.stderr
    # the first run cached its records: --no-cache runs the model again, so that there is a log to let through
    p = subprocess.run(cmd + ["--debug", "--no-cache"], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "falling back" in p.stderr + p.stdout


def test_version_names_archviz_and_what_it_builds_with(results):
    import importlib.metadata

    import archviz

    r = ok(results["version"])
    parts = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in ("torch", "transformers", "safetensors"))
    assert r.stdout.strip() == f"archviz {archviz.__version__} ({parts})"


def test_summary_and_inspect_read_a_records_file(results, out_dir, archviz_cli):
    """Records written by `archviz walk --shapes -o` answer `summary` and `inspect` without a rebuild, with the same
    figures, shapes and call sites as the model source gives; build options cannot apply to them (exit 2)."""
    ok(results["walk_shapes"])
    records = out_dir / "shapes.json"
    c = json.loads((DSV3 / "config.json").read_text())
    path = f"layers.{c['n_dense_layers']}.attn.wo"
    runs = archviz_cli.many({
        "summary_records": ["summary", records, "--json"],
        "summary_source": ["summary", DSV3, "--json"],
        "inspect_records": ["inspect", records, path, "--json"],
        "inspect_source": ["inspect", DSV3, path, "--json"],
        "records_with_set": ["inspect", records, "--set", "n_layers=2"],
    })
    assert json.loads(ok(runs["summary_records"]).stdout) == json.loads(ok(runs["summary_source"]).stdout)
    from_records = json.loads(ok(runs["inspect_records"]).stdout)
    assert from_records == json.loads(ok(runs["inspect_source"]).stdout)
    assert from_records["inputs"] == [["B", "T", c["n_heads"] * c["v_head_dim"]]]
    bad = runs["records_with_set"]
    assert bad.returncode == 2 and bad.stdout == "" and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        f"error: {records}: a records file is already built, so --set cannot apply — give the model source to build "
        "it again with them, or drop them"]

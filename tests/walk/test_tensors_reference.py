"""Reference implementations (DeepSeek `inference/` style) against the fixtures' hand formulas.

`tests/fixtures/expected.py` works every figure out from a config dict alone (no torch, no import of the fixtures);
this module builds the fixtures with archviz and compares. Each fixture is built once per module.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
from pathlib import Path

import pytest

import archviz
from archviz.records import ALIAS, SCALE, TABLE, WEIGHT
from archviz.render.views import summary_json
from helpers import TESTS

FIXTURES = TESTS / "fixtures"
DSV3 = FIXTURES / "dsv3like"
DSV41 = FIXTURES / "dsv41like"


def _load_expected():
    spec = importlib.util.spec_from_file_location("archviz_tests_expected", FIXTURES / "expected.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


expected = _load_expected()


class Built:
    """One fixture built by archviz, with its config, the hand-worked figures and the config merged with defaults."""

    def __init__(self, folder: Path, config_name: str, figures, defaults: dict, **options):
        self.config_path = folder / config_name
        self.config = json.loads(self.config_path.read_text())
        self.cfg = {**defaults, **self.config}
        self.record = archviz.load(str(folder), config=str(self.config_path), **options)
        self.figures = figures(self.config) if figures else None


@pytest.fixture(scope="module")
def v3_tiny() -> Built:
    return Built(DSV3, "config.json", expected.dsv3like, expected.DSV3_DEFAULTS)


@pytest.fixture(scope="module")
def v41_tiny() -> Built:
    return Built(DSV41, "config.json", expected.dsv41like, expected.DSV41_DEFAULTS)


@pytest.fixture(scope="module")
def v3_size() -> Built:
    return Built(DSV3, "config_v3size.json", expected.dsv3like, expected.DSV3_DEFAULTS)


@pytest.fixture(scope="module")
def v41_flash() -> Built:
    return Built(DSV41, "config_flash.json", expected.dsv41like, expected.DSV41_DEFAULTS)


@pytest.fixture(scope="module")
def v3_tp() -> Built:
    return Built(DSV3, "config.json", None, expected.DSV3_DEFAULTS, world_size=2, rank=1)


@pytest.fixture(scope="module")
def v41_tp() -> Built:
    return Built(DSV41, "config.json", None, expected.DSV41_DEFAULTS, world_size=2, rank=1)


ALL = ["v3_tiny", "v41_tiny", "v3_size", "v41_flash"]


def subtree_modules(record, path: str) -> int:
    return sum(1 for m in record.modules if m.path == path or m.path.startswith(path + ".") or path == "")


def figures_of(record, path: str) -> dict:
    t = record.module(path).totals
    return {"params": t.parameters, "scales": t.scale_elements, "int_tables": t.table_elements,
            "persistent": t.persistent_buffer_elements,
            "nonpersistent": t.buffer_elements - t.persistent_buffer_elements}


# ---------------------------------------------------------------------------------------------------------------------
# Whole-model figures


@pytest.mark.parametrize("name", ALL)
def test_summary_figures(name, request):
    b: Built = request.getfixturevalue(name)
    s, f = b.record.summary, b.figures
    assert s.parameters == f["params"]
    assert s.active_parameters == f["active_params"]
    assert s.scale_elements == f["scales"]
    assert s.table_elements == f["int_tables"]
    assert s.persistent_buffer_elements == f["persistent"]
    assert s.buffer_elements - s.persistent_buffer_elements == f["nonpersistent"]
    # MoE layers: one per layer past the dense ones (dsv3like) / every block incl. MTP (dsv41like)
    assert all(m.per_expert == f["expert_params"] for m in s.moe if m.experts == b.cfg["n_routed_experts"])


@pytest.mark.parametrize("name", ALL)
def test_module_count(name, request):
    """`modules` counts nn.Module instances, a module shared under two names once (expected.py's convention)."""
    b: Built = request.getfixturevalue(name)
    assert b.record.summary.modules == b.figures["modules"]


PATHS = {
    "v3_tiny": ["embed", "head", "layers.0", "layers.0.attn", "layers.0.ffn", "layers.1.ffn", "layers.1.ffn.gate",
                "layers.2.ffn.experts.3", "layers.3.ffn.shared_experts", "layers.3.attn.wkv_b"],
    "v41_tiny": ["layers.3.attn.wo_b", "layers.0.attn", "layers.0.attn.compressor", "layers.0.attn.indexer",
                 "layers.3.attn", "layers.3.attn.indexer", "layers.5.attn", "layers.0.ffn.gate", "layers.2.ffn.gate",
                 "layers.1.engram", "layers.1.engram.table", "layers.7.engram", "layers.1.ffn.experts.0",
                 "mtp.0.ffn", "mtp.0.attn", "mtp.0.e_proj", "head", "embed", "layers.11"],
    "v3_size": ["layers.0.ffn", "layers.3.ffn", "layers.3.ffn.gate", "layers.60.attn", "layers.60.ffn.experts.255",
                "head"],
    "v41_flash": ["layers.3.attn.wo_b", "layers.2.attn", "layers.20.attn", "layers.24.attn", "layers.0.ffn.gate",
                  "layers.5.ffn", "layers.14.engram", "mtp.2.ffn", "mtp.0.attn"],
}


@pytest.mark.parametrize("name,path", [(n, p) for n, ps in PATHS.items() for p in ps])
def test_per_module_figures(name, path, request):
    b: Built = request.getfixturevalue(name)
    want = b.figures["module"][path]
    assert figures_of(b.record, path) == {k: want[k] for k in ("params", "scales", "int_tables", "persistent",
                                                                "nonpersistent")}
    assert subtree_modules(b.record, path) == want["modules"]


# ---------------------------------------------------------------------------------------------------------------------
# Tensor kinds: fp4 packing, fp8 scales, tables


def _linear_shapes(record):
    """(path, weight, scale) of every module that owns a `weight` and declares in/out features."""
    for m in record.modules:
        ts = {t.name: t for t in m.tensors}
        attrs = dict(m.attributes)
        if "weight" in ts and "in_features" in attrs and "out_features" in attrs:
            yield m.path, attrs["in_features"], attrs["out_features"], ts["weight"], ts.get("scale")


@pytest.mark.parametrize("name", ["v3_tiny", "v41_tiny"])
def test_fp4_experts_counted_twice_per_byte(name, request):
    b: Built = request.getfixturevalue(name)
    dim, inter = b.cfg["dim"], b.cfg["moe_inter_dim"]
    seen = 0
    for m in b.record.modules:
        if ".experts." not in m.path or m.path.rsplit(".", 1)[-1] not in ("w1", "w2", "w3"):
            continue
        out_f, in_f = (dim, inter) if m.path.endswith("w2") else (inter, dim)
        w = {t.name: t for t in m.tensors}["weight"]
        assert w.kind == WEIGHT and w.dtype == "int8"
        assert w.shape == (out_f, in_f // 2)
        assert w.storage_elements == out_f * in_f // 2
        assert w.elements == out_f * in_f
        assert w.packing is not None and "fp4" in w.packing and "int8" in w.packing
        assert w.logical_shape == (out_f, in_f)
        assert w.bytes == out_f * in_f // 2
        seen += 1
    assert seen == 3 * sum(m.local_experts for m in b.record.summary.moe)


@pytest.mark.parametrize("name,block", [("v3_tiny", None), ("v41_tiny", expected.DSV41_FP8_BLOCK),
                                        ("v3_size", None)])
def test_every_quantized_weight_has_its_scale(name, block, request):
    b: Built = request.getfixturevalue(name)
    block = block or b.cfg["block_size"]
    fp8 = fp4 = 0
    for path, in_f, out_f, w, scale in _linear_shapes(b.record):
        if w.dtype == "float8_e4m3fn":
            assert scale is not None, path
            assert scale.kind == SCALE and scale.scales == "weight", path
            assert scale.shape == (math.ceil(out_f / block), math.ceil(in_f / block)), path
            fp8 += 1
        elif w.dtype == "int8":
            assert scale.kind == SCALE and scale.scales == "weight", path
            assert scale.shape == (out_f, in_f // expected.FP4_BLOCK), path
            fp4 += 1
        else:
            assert scale is None, path  # bf16 / fp32 linears carry no scale
    assert fp8 > 0 and fp4 > 0
    # nothing else is a scale: every scale element belongs to one of those weights (or the engram table)
    scales = [t for _, t in b.record.iter_tensors() if t.kind == SCALE]
    assert all(t.scales == "weight" for t in scales)
    assert sum(t.elements for t in scales) == b.figures["scales"]


def test_engram_table_scale_and_hash_tables(v41_tiny):
    b = v41_tiny
    rows, ehd = b.cfg["engram_num_embeddings"][0], b.cfg["engram_head_dim"]
    table = {t.name: t for t in b.record.module("layers.1.engram.table").tensors}
    assert table["weight"].kind == WEIGHT and table["weight"].dtype == "float8_e4m3fn"
    assert table["scale"].kind == SCALE and table["scale"].scales == "weight"
    assert table["scale"].shape == (rows, ehd // expected.ENGRAM_TABLE_BLOCK)
    for layer in range(b.cfg["n_layers"]):
        gate = {t.name: t for t in b.record.module(f"layers.{layer}.ffn.gate").tensors}
        if layer < b.cfg["n_hash_layers"]:
            assert gate["tid2eid"].kind == TABLE
            assert gate["tid2eid"].shape == (b.cfg["vocab_size"], b.cfg["n_activated_experts"])
            assert "bias" not in gate
        else:
            assert "tid2eid" not in gate and gate["bias"].kind == "bias"


def test_hc_scales_are_weights(v41_tiny):
    """Block.hc_attn_scale [3] fp32 sits beside no quantized weight: a learned weight, not a quantization scale."""
    block = {t.name: t for t in v41_tiny.record.module("layers.0").tensors}
    for name in ("hc_attn_scale", "hc_ffn_scale"):
        assert block[name].kind == WEIGHT and block[name].shape == (3,) and block[name].dtype == "float32"
    root = {t.name: t for t in v41_tiny.record.module("").tensors}
    assert root["hc_head_scale"].kind == WEIGHT and root["hc_head_scale"].shape == (1,)


# ---------------------------------------------------------------------------------------------------------------------
# Build facts: stubbed kernels, stand-in tokenizer


def kernel_imports(model_py: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(model_py.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "kernel":
            names.update(f"kernel.{a.name}" for a in node.names)
    return names


@pytest.mark.parametrize("name,folder", [("v3_tiny", DSV3), ("v41_tiny", DSV41)])
def test_stubbed_kernel_imports(name, folder, request):
    b: Built = request.getfixturevalue(name)
    names = kernel_imports(folder / "model.py")
    assert len(names) >= 5
    assert not (folder / "kernel.py").exists()  # the fixtures ship no kernel module
    assert set(b.record.source.stubbed_imports) == {"kernel"} | names


def test_standin_tokenizer_noted(v41_tiny, v3_tiny):
    vocab = v41_tiny.cfg["vocab_size"]
    notes = [n for n in v41_tiny.record.source.notes if "tokenizer" in n]
    assert len(notes) == 1
    assert "stand-in" in notes[0] and f"{vocab:,} ids" in notes[0]
    assert not any("tokenizer" in n for n in v3_tiny.record.source.notes)  # its Transformer takes no tokenizer


def test_flash_standin_tokenizer_size(v41_flash):
    vocab, folded = v41_flash.cfg["vocab_size"], v41_flash.cfg["engram_compressed_vocab_size"]
    notes = [n for n in v41_flash.record.source.notes if "tokenizer" in n]
    assert len(notes) == 1 and f"{vocab:,} ids" in notes[0] and f"{folded:,}" in notes[0]


# ---------------------------------------------------------------------------------------------------------------------
# Shared modules


def test_shared_embed_and_head_are_aliases(v41_tiny):
    rec, c = v41_tiny.record, v41_tiny.cfg
    for j in range(c["n_mtp_layers"]):
        embed = {t.name: t for t in rec.module(f"mtp.{j}.embed").tensors}["weight"]
        head = {t.name: t for t in rec.module(f"mtp.{j}.head").tensors}["weight"]
        assert embed.kind == ALIAS and embed.alias_of == "embed.weight" and embed.elements == 0
        assert head.kind == ALIAS and head.alias_of == "head.weight" and head.elements == 0
        assert rec.module(f"mtp.{j}.embed").totals.parameters == 0
        # expected.py's mtp.<j> subtree includes the shared embed [vocab, dim] and head [vocab, dim]; archviz counts
        # them where first seen (the backbone), so the MTP block holds exactly that much less
        want = v41_tiny.figures["module"][f"mtp.{j}"]["params"] - 2 * c["vocab_size"] * c["dim"]
        assert rec.module(f"mtp.{j}").totals.parameters == want
    # the summary says what the totals left out, and where each is counted
    vd = c["vocab_size"] * c["dim"]
    out = summary_json(rec)
    assert out["tied_parameters"] == 2 * c["n_mtp_layers"] * vd
    assert [(a["path"], a["of"], a["kind"], a["elements"]) for a in out["aliases"]] == [
        (f"mtp.{j}.{name}.weight", f"{name}.weight", "weight", vd)
        for j in range(c["n_mtp_layers"]) for name in ("embed", "head")]
    # counted once in the whole model
    assert rec.summary.parameters == v41_tiny.figures["params"]
    assert rec.module("embed").totals.parameters == c["vocab_size"] * c["dim"]


# ---------------------------------------------------------------------------------------------------------------------
# Tensor parallel: --world-size 2 --rank 1


def _weight(record, path):
    return {t.name: t for t in record.module(path).tensors}["weight"]


def test_world_size_2_rank_1_v3(v3_tp):
    rec, c = v3_tp.record, v3_tp.cfg
    assert rec.source.world_size == 2 and rec.source.rank == 1
    heads, qk = c["n_heads"], c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    # ColumnParallelLinear: out features split; RowParallelLinear: in features split
    assert _weight(rec, "layers.0.attn.wq_b").shape == (heads * qk // 2, c["q_lora_rank"])
    assert _weight(rec, "layers.0.attn.wkv_b").shape == (heads * (c["qk_nope_head_dim"] + c["v_head_dim"]) // 2,
                                                         c["kv_lora_rank"])
    assert _weight(rec, "layers.0.attn.wo").shape == (c["dim"], heads * c["v_head_dim"] // 2)
    assert _weight(rec, "layers.0.ffn.w1").shape == (c["inter_dim"] // 2, c["dim"])
    assert _weight(rec, "layers.0.ffn.w2").shape == (c["dim"], c["inter_dim"] // 2)
    assert _weight(rec, "embed").shape == (c["vocab_size"] // 2, c["dim"])
    assert _weight(rec, "head").shape == (c["vocab_size"] // 2, c["dim"])
    # not split: the low-rank down projections
    assert _weight(rec, "layers.0.attn.wq_a").shape == (c["q_lora_rank"], c["dim"])
    # routed experts: rank 1 holds the second half
    e = c["n_routed_experts"]
    paths = {m.path for m in rec.modules}
    assert f"layers.1.ffn.experts.{e // 2}" in paths and "layers.1.ffn.experts.0" not in paths
    assert all(m.experts == e and m.local_experts == e // 2 for m in rec.summary.moe)
    out = summary_json(rec)
    assert out["world_size"] == 2 and out["rank"] == 1
    assert out["parameters_all_ranks"] == 2 * out["parameters"] == 2 * rec.summary.parameters


def test_world_size_2_rank_1_v41(v41_tp):
    rec, c = v41_tp.record, v41_tp.cfg
    assert _weight(rec, "layers.1.attn.wo_b").shape == (c["dim"], c["o_groups"] * c["o_lora_rank"] // 2)
    assert _weight(rec, "layers.0.attn.wq_b").shape == (c["n_heads"] * c["head_dim"] // 2, c["q_lora_rank"])
    sink = {t.name: t for t in rec.module("layers.0.attn").tensors}["attn_sink"]
    assert sink.shape == (c["n_heads"] // 2,)
    assert summary_json(rec)["parameters_all_ranks"] == 2 * rec.summary.parameters


def test_single_rank_has_no_all_ranks_figure(v3_tiny):
    out = summary_json(v3_tiny.record)
    assert out["world_size"] == 1 and "parameters_all_ranks" not in out

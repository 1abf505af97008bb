"""Grouping (issue 4): identical layers and experts folded, layer kinds and patterns, multiplicity paths.

Expected groups, counts and multiplicities are written by hand from each model's config; expected totals come from
config formulas or from the flat records' own per-module totals, never from the grouping output itself."""

from __future__ import annotations

import re

import io
import json
import math
import time

import pytest
from rich.console import Console

import archviz
from helpers import TESTS, hand_record
from archviz.group.runs import decompose as _decompose, rle as _rle
from archviz.group import group, layer_membership, load_names, multiplicity_text
from archviz.records import ModelRecord, dumps, loads

ROOT = TESTS
V4_HF_CONFIG = ROOT / "data" / "configs" / "deepseek-v4-flash-hf-config.json"
DSV41 = ROOT / "fixtures" / "dsv41like"
NAMES = ROOT / "fixtures" / "names"

# Small widths for speed; the layer schedules are the configs' own.
V4_SMALL = {"n_routed_experts": 4, "hidden_size": 256, "num_attention_heads": 4, "head_dim": 64, "q_lora_rank": 32,
            "o_lora_rank": 32, "moe_intermediate_size": 32, "vocab_size": 100}
GPT_OSS_SMALL = {"hidden_size": 64, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 16, "num_local_experts": 4, "vocab_size": 128}
QWEN3_NEXT_SMALL = {"hidden_size": 64, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "head_dim": 16, "num_experts": 4, "vocab_size": 128, "moe_intermediate_size": 32,
                    "shared_expert_intermediate_size": 32, "linear_num_value_heads": 2, "linear_num_key_heads": 2,
                    "linear_key_head_dim": 16, "linear_value_head_dim": 16}
GEMMA3_SMALL = {"hidden_size": 64, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 16, "vocab_size": 128}
# The V4.1-like fixture pinned to the seed's shape: a KV-source layer every 6 layers, the 5 after it reuse its cache.
SEED_SHAPE = {"n_layers": 12, "n_mtp_layers": 1, "compress_ratios": [2] * 12 + [0], "kv_source_layers": [0, 6],
              "index_source_layers": [0, 6], "engram_layer_ids": [], "n_hash_layers": 0}


@pytest.fixture(autouse=True)
def _no_names_env(monkeypatch):
    monkeypatch.delenv("ARCHVIZ_NAMES", raising=False)


def G(record: ModelRecord) -> dict:
    return record.extra("grouping")


def node_of(record: ModelRecord, path: str) -> dict:
    g = G(record)
    nid = g["by_path"][path]["node"]
    return next(n for n in g["nodes"] if n["id"] == nid)


def factors(node_or_entry: dict) -> list[tuple[int, str]]:
    return [(f["factor"], f["name"]) for f in node_or_entry["multiplicity"]]


def run_summary(record: ModelRecord) -> list[tuple]:
    """(title, first, last, repeats, period) of each top-level run or group of the main layer list."""
    return [(r["title"], r["first"], r["last"], r["repeats"], r["period"]) for r in G(record)["layers"]["runs"]]


def kind_partition(record: ModelRecord) -> list[list[int]]:
    return sorted(k["layers"] for k in G(record)["layers"]["kinds"])


def layer_total(record: ModelRecord, prefix: str, layers) -> int:
    return sum(record.module(f"{prefix}{i}").totals.parameters for i in layers)


def check_invariants(record: ModelRecord, names: dict | None = None) -> None:
    """The grouped tree accounts for every parameter exactly once."""
    g = G(record)
    assert g is not None
    json.dumps(g)  # JSON-able
    nodes = g["nodes"]
    by_id = {n["id"]: n for n in nodes}
    index = record.index()
    root = nodes[0]
    assert root["parent"] is None and root["representative"] == "" and root["total"] == record.summary.parameters
    for n in nodes:
        prod = math.prod(f["factor"] for f in n["multiplicity"])
        assert all(f["factor"] > 1 for f in n["multiplicity"]), n["title"]
        assert n["total"] == n["per_instance"] * prod, n["title"]
        kids = [by_id[c] for c in n["children"]]
        assert sum(k["total"] for k in kids) + n["own_total"] == n["total"], n["title"]
        for k in kids:
            assert k["parent"] == n["id"]
            assert k["multiplicity"][:len(n["multiplicity"])] == n["multiplicity"]
            assert k["breadcrumb"] == n["breadcrumb"] + [k["title"]]
        if n.get("virtual"):
            assert len(n["paths"]) == prod * n["period"]
            assert n["per_instance"] == sum(index[p].totals.parameters for p in n["paths"]) // prod
        else:
            # every instance has the flat record's own count; one path per instance
            assert len(n["paths"]) == prod, n["title"]
            assert {index[p].totals.parameters for p in n["paths"]} == {n["per_instance"]}, n["title"]
            assert {index[p].own.parameters * prod for p in n["paths"]} == {n["own_total"]}
            assert sum(index[p].totals.parameters for p in n["paths"]) == n["total"]
    # the root's top-level nodes plus its own tensors make the model
    assert sum(by_id[c]["total"] for c in root["children"]) + index[""].own.parameters == \
        record.summary.parameters
    # every parameter once: own parameters over all module nodes
    assert sum(n["own_total"] for n in nodes) == record.summary.parameters
    # every module is in exactly one node, or is a list folded into its items' node
    seen: dict[str, str] = {}
    for n in nodes:
        if not n.get("virtual"):
            for p in n["paths"]:
                assert p not in seen, p
                seen[p] = n["id"]
    assert set(g["by_path"]) == set(index)
    for path, e in g["by_path"].items():
        if path in seen:
            assert e["node"] == seen[path] and e["total"] == by_id[e["node"]]["total"]
        else:  # a folded list: its own total
            m = index[path]
            assert m.class_name in ("ModuleList", "Sequential", "ModuleDict")
            assert e["total"] == m.totals.parameters * math.prod(f["factor"] for f in e["multiplicity"])
    # JSON round trip: grouping is a pure function of the records
    again = group(loads(dumps(record.with_extra("grouping", None))), names)
    assert json.dumps(G(again), sort_keys=True) == json.dumps(g, sort_keys=True)


# ---------------------------------------------------------------------------------------------------------------------
# Models


@pytest.fixture(scope="module")
def v4() -> ModelRecord:
    return group(archviz.load(str(V4_HF_CONFIG), overrides=V4_SMALL))


@pytest.fixture(scope="module")
def v3() -> ModelRecord:
    return group(archviz.load("hf:deepseek_v3"))


@pytest.fixture(scope="module")
def gpt_oss() -> ModelRecord:
    return group(archviz.load("hf:gpt_oss", overrides=GPT_OSS_SMALL))


@pytest.fixture(scope="module")
def qwen3_next() -> ModelRecord:
    return group(archviz.load("hf:qwen3_next", overrides=QWEN3_NEXT_SMALL))


@pytest.fixture(scope="module")
def gemma3() -> ModelRecord:
    return group(archviz.load("hf:gemma3_text", overrides=GEMMA3_SMALL))


@pytest.fixture(scope="module")
def dsv41_seed() -> ModelRecord:
    return group(archviz.load(str(DSV41 / "model.py"), config=str(DSV41 / "config.json"), overrides=SEED_SHAPE))


@pytest.fixture(scope="module")
def dsv41_flash() -> ModelRecord:
    """The fixture at DeepSeek-V4.1-Flash's published sizes and schedule (fewer experts, small vocab and caches)."""
    rec = archviz.load(str(DSV41 / "model.py"), config=str(DSV41 / "config_flash.json"),
                       overrides={"n_routed_experts": 8, "vocab_size": 1024, "max_seq_len": 256})
    return group(rec, load_names(str(NAMES / "deepseek-v4.1-flash.toml")))


def test_deepseek_v4_compress_ratio_schedule(v4):
    cfg = json.loads(V4_HF_CONFIG.read_text())
    ratios = cfg["compress_ratios"][:cfg["num_hidden_layers"]]
    # By hand from the config: 43 layers; ratios 0, 0, then 4/128 alternating from layer 2, the last layer ratio 4;
    # the first num_hash_layers=3 layers route by token id.
    assert ratios[:3] == [0, 0, 4] and ratios[3:] == [128, 4] * 20 and cfg["num_hash_layers"] == 3
    assert G(v4)["layers"]["path"] == "model.layers" and G(v4)["layers"]["count"] == 43
    assert run_summary(v4) == [
        ("2 sliding attention layers", 0, 1, 2, 1),
        ("hash-routed compressed sparse attention layer 2", 2, 2, 1, 1),
        ("20 groups of 2 layers", 3, 42, 20, 2),
    ]
    assert kind_partition(v4) == sorted([[0, 1], [2], list(range(3, 43, 2)), list(range(4, 43, 2))])
    grp = node_of(v4, "model.layers.3")
    parent = next(n for n in G(v4)["nodes"] if n["id"] == grp["parent"])
    assert parent["title"] == "20 groups of 2 layers" and parent["virtual"]
    assert [next(n for n in G(v4)["nodes"] if n["id"] == c)["title"] for c in parent["children"]] == [
        "heavily compressed attention layer", "compressed sparse attention layer"]
    assert parent["total"] == layer_total(v4, "model.layers.", range(3, 43))
    assert grp["total"] == 20 * v4.module("model.layers.3").totals.parameters
    # output projection: o_groups × o_lora_rank -> hidden, per instance, × 20 groups
    o_b = node_of(v4, "model.layers.41.self_attn.o_b_proj")
    assert o_b["per_instance"] == 8 * V4_SMALL["o_lora_rank"] * V4_SMALL["hidden_size"]
    assert factors(o_b) == [(20, "groups")] and o_b["total"] == 20 * o_b["per_instance"]
    assert factors(node_of(v4, "model.layers.1.self_attn.q_a_proj")) == [(2, "layers")]
    assert factors(node_of(v4, "model.layers.2.self_attn.q_a_proj")) == []
    # the ratio-128 layers' compressor is one node standing for 20 compressors
    comp = node_of(v4, "model.layers.5.self_attn.compressor")
    assert comp["class_name"] == "DeepseekV4HCACompressor" and len(comp["paths"]) == 20
    assert "20 × (heavily compressed attention layer, " in G(v4)["layers"]["pattern"]
    check_invariants(v4)


def test_deepseek_v3_dense_then_moe(v3):
    # By hand from the default config: 61 layers, first_k_dense_replace=3, hidden 7168, intermediate 18432,
    # 256 routed experts of moe_intermediate_size 2048.
    assert run_summary(v3) == [("3 dense layers", 0, 2, 3, 1), ("58 MoE layers", 3, 60, 58, 1)]
    assert kind_partition(v3) == [[0, 1, 2], list(range(3, 61))]
    dense = node_of(v3, "model.layers.1")
    assert dense["count"] == 3 and factors(dense) == [(3, "layers")]
    assert dense["total"] == 3 * v3.module("model.layers.0").totals.parameters
    mlp = node_of(v3, "model.layers.2.mlp")
    assert mlp["per_instance"] == 3 * 7168 * 18432 and mlp["total"] == 3 * 3 * 7168 * 18432
    experts = node_of(v3, "model.layers.30.mlp.experts")
    assert experts["per_instance"] == 256 * 3 * 7168 * 2048
    assert factors(experts) == [(58, "layers")] and experts["total"] == 58 * 256 * 3 * 7168 * 2048
    moe = node_of(v3, "model.layers.60")
    assert moe["total"] == layer_total(v3, "model.layers.", range(3, 61))
    assert G(v3)["layers"]["pattern"] == "3 dense layers, then 58 MoE layers"
    check_invariants(v3)


def test_gpt_oss_alternating_sliding_full(gpt_oss):
    # By hand: 36 layers, layer_types sliding/full alternating from sliding; both kinds hold the same tensors, so
    # only the attributes (layer_type, sliding_window) tell them apart.
    assert run_summary(gpt_oss) == [("18 groups of 2 layers", 0, 35, 18, 2)]
    assert kind_partition(gpt_oss) == [list(range(0, 36, 2)), list(range(1, 36, 2))]
    names = {k["name"]: k["layers"][:2] for k in G(gpt_oss)["layers"]["kinds"]}
    assert names == {"sliding attention layer": [0, 2], "full attention layer": [1, 3]}
    assert node_of(gpt_oss, "model.layers.4")["title"] == "sliding attention layer"
    o = node_of(gpt_oss, "model.layers.35.self_attn.o_proj")
    assert factors(o) == [(18, "groups")]
    assert o["per_instance"] == 64 * 64 + 64  # weight + bias
    assert o["total"] == 18 * gpt_oss.module("model.layers.1.self_attn.o_proj").totals.parameters
    assert node_of(gpt_oss, "model.layers.0")["id"] != node_of(gpt_oss, "model.layers.1")["id"]
    check_invariants(gpt_oss)


def test_qwen3_next_periodic_hybrid(qwen3_next):
    # By hand: 48 layers, full_attention_interval 4: 3 linear-attention layers, then one full-attention layer.
    assert run_summary(qwen3_next) == [("12 groups of 4 layers", 0, 47, 12, 4)]
    lin = node_of(qwen3_next, "model.layers.5")
    full = node_of(qwen3_next, "model.layers.7")
    assert lin["title"] == "3 linear attention layers" and factors(lin) == [(12, "groups"), (3, "layers")]
    assert full["title"] == "full attention layer" and factors(full) == [(12, "groups")]
    assert lin["total"] == layer_total(qwen3_next, "model.layers.", [i for i in range(48) if i % 4 != 3])
    assert full["total"] == 12 * qwen3_next.module("model.layers.3").totals.parameters
    assert factors(G(qwen3_next)["by_path"]["model.layers.9.linear_attn"]) == [(12, "groups"), (3, "layers")]
    assert G(qwen3_next)["layers"]["pattern"] == "12 × (3 × linear attention layer, full attention layer)"
    check_invariants(qwen3_next)


def test_gemma3_periodic_with_remainder(gemma3):
    # By hand: 26 layers, sliding_window_pattern 6: (5 sliding, 1 full) × 4, then 2 sliding layers.
    assert run_summary(gemma3) == [("4 groups of 6 layers", 0, 23, 4, 6), ("2 sliding attention layers", 24, 25, 2, 1)]
    assert factors(node_of(gemma3, "model.layers.7.self_attn")) == [(4, "groups"), (5, "layers")]
    assert factors(node_of(gemma3, "model.layers.11.self_attn")) == [(4, "groups")]
    assert factors(node_of(gemma3, "model.layers.25.self_attn")) == [(2, "layers")]
    # the sliding layers inside the groups and the two after them are one kind, two nodes
    assert node_of(gemma3, "model.layers.0")["kind"] == node_of(gemma3, "model.layers.24")["kind"]
    assert node_of(gemma3, "model.layers.0")["id"] != node_of(gemma3, "model.layers.24")["id"]
    check_invariants(gemma3)


def test_v41_like_seed_shape(dsv41_seed):
    cfg = json.loads((DSV41 / "config.json").read_text())
    g = G(dsv41_seed)
    assert run_summary(dsv41_seed) == [("2 groups of 6 layers", 0, 11, 2, 6)]
    assert kind_partition(dsv41_seed) == [[0, 6], [1, 2, 3, 4, 5, 7, 8, 9, 10, 11]]
    kv = node_of(dsv41_seed, "layers.6")
    reuse = node_of(dsv41_seed, "layers.9")
    assert kv["title"] == "KV-source layer" and factors(kv) == [(2, "groups")]
    assert reuse["title"] == "5 reusing layers" and factors(reuse) == [(2, "groups"), (5, "layers")]
    assert kv["total"] == layer_total(dsv41_seed, "layers.", [0, 6])
    assert reuse["total"] == layer_total(dsv41_seed, "layers.", [1, 2, 3, 4, 5, 7, 8, 9, 10, 11])
    # the KV source owns a compressor; the reusing layers do not
    assert node_of(dsv41_seed, "layers.0.attn.compressor")["paths"] == ["layers.0.attn.compressor",
                                                                         "layers.6.attn.compressor"]
    assert not any(p.startswith("layers.3.attn.compressor") for p in g["by_path"])
    wo_b = node_of(dsv41_seed, "layers.3.attn.wo_b")
    per = cfg["o_groups"] * cfg["o_lora_rank"] * cfg["dim"]
    assert wo_b["per_instance"] == per and wo_b["total"] == per * 2 * 5
    assert factors(wo_b) == [(2, "groups"), (5, "layers")]
    assert wo_b["breadcrumb"] == ["12 layers", "2 groups of 6 layers", "5 reusing layers", "attn (Attention)",
                                  "wo_b (RowParallelLinear)"]
    assert g["by_path"]["layers.3.attn.wo_b"]["group"] == "2 groups of 6 layers › 5 reusing layers"
    assert len(wo_b["paths"]) == 10 and wo_b["representative"] == "layers.1.attn.wo_b"
    experts = node_of(dsv41_seed, "layers.4.ffn.experts.3")
    assert experts["title"] == f"{cfg['n_routed_experts']} routed experts"
    assert factors(experts) == [(2, "groups"), (5, "layers"), (cfg["n_routed_experts"], "experts")]
    # the experts list itself folds into its items' node and keeps its own total
    e = g["by_path"]["layers.4.ffn.experts"]
    assert e["node"] == experts["id"] and factors(e) == [(2, "groups"), (5, "layers")]
    assert e["total"] == 10 * dsv41_seed.module("layers.4.ffn.experts").totals.parameters
    assert layer_membership(dsv41_seed, "layers.3") == (
        "layer 3 belongs to 2 groups of 6 layers › 5 reusing layers (kind reusing layer)")
    assert g["layers"]["pattern"] == "2 × (KV-source layer, 5 × reusing layer)"
    check_invariants(dsv41_seed)


def test_v41_like_fixture_schedule():
    # The fixture's own schedule, pinned: KV sources 0 and 6, index sources every 3 layers, Engram at 1 and 7, the
    # first two layers hash-routed. Kinds by hand: (kv, index, engram, hash) per layer.
    pinned = {"n_layers": 12, "compress_ratios": [2] * 12 + [0], "kv_source_layers": [0, 6],
              "index_source_layers": [0, 3, 6, 9], "engram_layer_ids": [1, 7], "n_hash_layers": 2}
    rec = group(archviz.load(str(DSV41 / "model.py"), config=str(DSV41 / "config.json"), overrides=pinned))
    assert kind_partition(rec) == sorted([[0], [1], [2, 4, 5, 8, 10, 11], [3, 9], [6], [7]])
    # Layers 0/1 differ from 6/7 by hash routing, so the two halves do not fold into groups: ten runs.
    assert [(r[1], r[2], r[3], r[4]) for r in run_summary(rec)] == [
        (0, 0, 1, 1), (1, 1, 1, 1), (2, 2, 1, 1), (3, 3, 1, 1), (4, 5, 2, 1), (6, 6, 1, 1), (7, 7, 1, 1),
        (8, 8, 1, 1), (9, 9, 1, 1), (10, 11, 2, 1)]
    assert factors(node_of(rec, "layers.5.attn.wo_b")) == [(2, "layers")]
    assert factors(node_of(rec, "layers.8.attn.wo_b")) == []
    assert node_of(rec, "layers.4")["kind"] == node_of(rec, "layers.8")["kind"]
    assert node_of(rec, "layers.7.engram")["total"] == rec.module("layers.7.engram").totals.parameters
    check_invariants(rec)


def test_v41_flash_seed_page_numbers(dsv41_flash):
    """The seed page: `40 layers › 2 groups of 6 layers › 5 reusing layers › Compressed sparse attention › … ›
    Output projection`, `41,943,040 × 2 groups × 5 layers = 419,430,400`."""
    cfg = json.loads((DSV41 / "config_flash.json").read_text())
    assert cfg["kv_source_layers"] == [2, 8, 14, 20] and cfg["engram_layer_ids"] == [1, 14]
    wo_b = node_of(dsv41_flash, "layers.9.attn.wo_b")
    assert cfg["o_groups"] * cfg["o_lora_rank"] * cfg["dim"] == 41_943_040
    assert wo_b["per_instance"] == 41_943_040 == dsv41_flash.module("layers.9.attn.wo_b").totals.parameters
    assert factors(wo_b) == [(2, "groups"), (5, "layers")] and wo_b["total"] == 419_430_400
    assert multiplicity_text(wo_b["multiplicity"]) == "× 2 groups × 5 layers"
    assert wo_b["breadcrumb"] == ["40 layers", "2 groups of 6 layers", "5 reusing layers",
                                  "Compressed sparse attention", "Grouped output", "Output projection"]
    assert sorted(wo_b["paths"]) == sorted(f"layers.{i}.attn.wo_b" for i in [3, 4, 5, 6, 7, 9, 10, 11, 12, 13])
    runs = run_summary(dsv41_flash)
    # by hand: layers 2–13 are two groups (KV source + 5 reusing); 14 has Engram; 15–19 reuse; 20 is the last KV
    # source; from 24, index sources every 4 layers, each with 3 layers after it.
    assert ("2 groups of 6 layers", 2, 13, 2, 6) in runs and ("4 groups of 4 layers", 24, 39, 4, 4) in runs
    assert [r[1:] for r in runs] == [(0, 0, 1, 1), (1, 1, 1, 1), (2, 13, 2, 6), (14, 14, 1, 1), (15, 19, 5, 1),
                                     (20, 20, 1, 1), (21, 23, 3, 1), (24, 39, 4, 4)]
    # layers 3–7, 9–13 and 15–19 are one kind, in two nodes
    assert [3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19] in kind_partition(dsv41_flash)
    assert node_of(dsv41_flash, "layers.0.attn")["title"] == "Sliding-window attention"
    assert node_of(dsv41_flash, "embed")["title"] == "Token embedding"
    check_invariants(dsv41_flash, load_names(str(NAMES / "deepseek-v4.1-flash.toml")))


# ---------------------------------------------------------------------------------------------------------------------
# Names, rendering, JSON views


def test_names_mapping_precedence(dsv41_seed):
    names = load_names(str(NAMES / "titles.json"))
    rec = group(dsv41_seed, names)
    assert node_of(rec, "layers.3.attn")["title"] == "Attention of layer 3"  # exact path
    assert node_of(rec, "layers.0.attn")["title"] == "Attention (any layer)"  # glob
    assert node_of(rec, "mtp.0.attn")["title"] == "Attention (class)"  # class
    assert node_of(rec, "layers.0.attn_norm")["title"] == "Model-width norm"  # class with attributes
    assert node_of(rec, "layers.0.attn.q_norm")["title"] == "q_norm (RMSNorm)"  # dim 32: default
    reuse = node_of(rec, "layers.3")
    assert reuse["title"] == "Five layers that reuse the KV cache"  # a default title
    assert G(rec)["by_path"]["layers.3.attn.wo_b"]["group"] == \
        "2 groups of 6 layers › Five layers that reuse the KV cache"
    assert node_of(rec, "layers.3.attn.wo_b")["breadcrumb"][2:4] == ["Five layers that reuse the KV cache",
                                                                     "Attention of layer 3"]
    check_invariants(rec, names)


def test_names_from_environment(monkeypatch, dsv41_seed):
    monkeypatch.setenv("ARCHVIZ_NAMES", str(NAMES / "deepseek-v4.1-flash.toml"))
    rec = group(dsv41_seed)
    assert node_of(rec, "layers.3.attn.wo_b")["breadcrumb"][-3:] == ["Compressed sparse attention",
                                                                     "Grouped output", "Output projection"]


def test_bad_names_file(tmp_path):
    bad = tmp_path / "names.toml"
    bad.write_text("this is = = not toml")
    with pytest.raises(archviz.ArchvizError, match="not valid TOML"):
        load_names(str(bad))
    wrong = tmp_path / "names.json"
    wrong.write_text(json.dumps({"layers.*": 3}))
    with pytest.raises(archviz.ArchvizError, match=r"names\.json: layers\.\*: a string, not 3$"):
        load_names(str(wrong))


def render(renderable) -> str:
    console = Console(file=io.StringIO(), width=240, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_grouped_tree_renders(dsv41_seed):
    from archviz.render.terminal import grouped_tree

    text = render(grouped_tree(dsv41_seed, "layers.3", 3))
    assert text.splitlines()[0] == ("layer 3 belongs to 2 groups of 6 layers › 5 reusing layers "
                                    "(kind reusing layer)")
    # a header row, then one row a node: module, class, shapes, parameters, ×, total (issue 44)
    assert re.search(r"┃ module +┃ class +┃ shape in → out +┃ +parameters ┃ × +┃ +total ┃", text)
    assert re.search(r"│ +wo_b +│ RowParallelLinear +│[^│]*│ +2,048 │ 2 groups × 5 layers +│ +20,480 │",
                     text)
    whole = render(grouped_tree(dsv41_seed, "", 2))
    assert re.search(r"│ +12 layers +│ ModuleList +│", whole) and re.search(r"│ +2 groups of 6 layers +│ group +│", whole)
    root = next(line for line in whole.splitlines() if line.startswith("│ dsv41like"))
    assert f"{dsv41_seed.summary.parameters:,}" in root
    # a record without grouping is grouped on the fly
    plain = dsv41_seed.with_extra("grouping", None)
    assert render(grouped_tree(plain, "layers.3", 1)).splitlines()[0].startswith("layer 3 belongs to")


def test_module_json_multiplicity(dsv41_seed):
    from archviz.render.views import module_json

    j = module_json(dsv41_seed, "layers.3.attn.wo_b")
    assert j["multiplicity"] == [{"factor": 2, "name": "groups"}, {"factor": 5, "name": "layers"}]
    assert j["total"] == j["parameters"] * 10
    assert j["group"] == "2 groups of 6 layers › 5 reusing layers"


def test_cli_inspect_layer(tmp_path):
    from typer.testing import CliRunner

    from archviz.cli import app

    args = ["inspect", str(DSV41 / "model.py"), "--config", str(DSV41 / "config.json"), "--no-shapes", "layer", "9"]
    for k, v in SEED_SHAPE.items():
        args[1:1] = ["--set", f"{k}={json.dumps(v)}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "layer 9 belongs to 2 groups of 6 layers › 5 reusing layers" in result.output
    j = CliRunner().invoke(app, args[:-2] + ["layers.9.attn.wo_b", "--json"])
    assert j.exit_code == 0, j.output
    assert json.loads(j.output)["multiplicity"] == [{"factor": 2, "name": "groups"}, {"factor": 5, "name": "layers"}]


# ---------------------------------------------------------------------------------------------------------------------
# Units: patterns and signatures on hand-made sequences and records


def seq_segments(kinds: list[str]) -> list:
    ids = {k: i for i, k in enumerate(dict.fromkeys(kinds))}
    names = {i: k for k, i in ids.items()}
    tokens = _rle([ids[k] for k in kinds])

    def show(segs):
        out = []
        for s in segs:
            if s[0] == "run":
                out.append((names[s[1][0]], s[1][2]))
            else:
                out.append((s[2], show(s[1])))
        return out

    return show(_decompose(tokens, 0, len(tokens)))


def test_patterns():
    # V4.1-Flash's schedule by hand: sliding 0, 1 (1 with Engram); KV source + 5 reusing × 2; Engram KV source + 5;
    # KV source 20 + 3; index source + 3 reusing × 4.
    v41 = ["A", "B"] + ["C"] + ["D"] * 5 + ["C"] + ["D"] * 5 + ["E"] + ["D"] * 5 + ["F"] + ["H"] * 3 + \
        (["G"] + ["H"] * 3) * 4
    assert seq_segments(v41) == [("A", 1), ("B", 1), (2, [("C", 1), ("D", 5)]), ("E", 1), ("D", 5), ("F", 1),
                                 ("H", 3), (4, [("G", 1), ("H", 3)])]
    assert seq_segments(["S"] * 5 + ["F"] + ["S"] * 5 + ["F"] + ["S"] * 2) == [(2, [("S", 5), ("F", 1)]), ("S", 2)]
    assert seq_segments(["X"] * 7) == [("X", 7)]
    assert seq_segments(["A", "B", "A", "B", "A", "B", "C"]) == [(3, [("A", 1), ("B", 1)]), ("C", 1)]
    # nested: ((A B) × 2 C) × 2
    assert seq_segments(["A", "B", "A", "B", "C"] * 2) == [(2, [(2, [("A", 1), ("B", 1)]), ("C", 1)])]


_rec = hand_record


def test_index_like_attributes_do_not_split_kinds():
    specs = [("", "M", {}, []), ("blocks", "ModuleList", {}, [])]
    for i in range(6):
        # `depth` numbers the block (i + 10); `scale` and `kind` change what it does
        specs.append((f"blocks.{i}", "Block", {"depth": i + 10, "name": f"block_{i}", "scale": 1.0,
                                               "mode": "local" if i % 3 else "global"}, [("w", (4, 4))]))
        specs.append((f"blocks.{i}.proj", "Linear", {"in_features": 4, "layer_idx": i}, [("weight", (4, 4))]))
    rec = group(_rec(specs))
    assert run_summary(rec) == [("2 groups of 3 blocks", 0, 5, 2, 3)]
    assert kind_partition(rec) == [[0, 3], [1, 2, 4, 5]]
    assert node_of(rec, "blocks.1")["title"] == "2 local blocks"
    assert node_of(rec, "blocks.3")["title"] == "global block"
    check_invariants(rec)


def test_uniform_list_folds_into_one_node():
    specs = [("", "M", {}, [("emb", (10, 4))]), ("layers", "ModuleList", {}, [])]
    for i in range(4):
        specs.append((f"layers.{i}", "Layer", {"layer_id": i}, [("w", (4, 4))]))
        specs.append((f"layers.{i}.norm", "Norm", {}, [("weight", (4,))]))
    rec = group(_rec(specs))
    g = G(rec)
    root = g["nodes"][0]
    assert [n["title"] for n in g["nodes"] if n["parent"] == root["id"]] == ["4 layers"]
    assert g["by_path"]["layers"]["node"] == g["by_path"]["layers.2"]["node"]
    assert g["layers"]["pattern"] == "4 layers"
    assert layer_membership(rec, "layers.2") == "layer 2 belongs to 4 layers (kind layer)"
    check_invariants(rec)


def test_stack_of_different_modules_is_titled_by_class():
    specs = [("", "M", {}, []), ("net", "Sequential", {}, []), ("net.0", "Conv", {}, [("weight", (8, 3))]),
             ("net.1", "ReLU", {}, []), ("net.2", "Conv", {}, [("weight", (8, 8))]), ("net.3", "ReLU", {}, []),
             ("net.4", "ReLU", {}, [])]
    rec = group(_rec(specs))
    g = G(rec)
    titles = [n["title"] for n in g["nodes"] if n["parent"] == g["by_path"]["net"]["node"]]
    assert titles == ["0 (Conv)", "1 (ReLU)", "2 (Conv)", "3–4 (2 × ReLU)"]
    check_invariants(rec)


def test_kind_names_and_pattern_follow_the_names_mapping(dsv41_seed):
    rec = group(dsv41_seed, {"reusing layer": "cache-reusing layer", "KV-source layer": "KV-producing layer"})
    layers = G(rec)["layers"]
    # a key names both the node titled so and the layer kind of that name
    assert layers["pattern"] == "2 × (KV-producing layer, 5 × cache-reusing layer)"
    assert node_of(rec, "layers.6")["title"] == "KV-producing layer"
    assert node_of(rec, "layers.7")["title"] == "5 reusing layers"
    assert layer_membership(rec, "layers.6") == "layer 6 belongs to 2 groups of 6 layers › KV-producing layer " \
                                                "(kind KV-producing layer)"


# ---------------------------------------------------------------------------------------------------------------------
# Cost: grouping stays a small fraction of the walk


def test_grouping_cost_is_small_against_the_walk():
    from archviz.walk import walk

    built = archviz.build(str(ROOT / "fixtures" / "dsv3like" / "model.py"),
                          config=str(ROOT / "fixtures" / "dsv3like" / "config.json"),
                          overrides={"n_layers": 12, "n_routed_experts": 64})
    t = time.process_time()
    rec = walk(built)
    t_walk = time.process_time() - t
    t = time.process_time()
    grouped = group(rec)
    t_group = time.process_time() - t
    assert rec.summary.modules > 3000
    print(f"walk {t_walk:.3f}s, group {t_group:.3f}s ({100 * t_group / t_walk:.0f}%)")
    assert t_group < 0.5 * t_walk + 0.05, (t_walk, t_group)
    check_invariants(grouped)


def test_trees_count_the_children_they_cut():
    from archviz.render.terminal import grouped_tree, module_tree

    rec = hand_record([
        ("", "M", {}, []),
        ("one", "Wrap", {}, []),
        ("one.lin", "Linear", {}, [("weight", (2, 3))]),
        ("three", "Wrap", {}, []),
        ("three.a", "Linear", {}, [("weight", (2, 3))]),
        ("three.b", "Norm", {}, [("weight", (3,))]),
        ("three.c", "Act", {}, []),
    ])
    for tree in (module_tree(rec, "", 1), grouped_tree(rec, "", 1)):
        lines = [line.strip("│├└─ ") for line in render(tree).splitlines()]
        assert "… 1 child" in lines and "… 3 children" in lines


def test_the_only_layer_of_a_model_cut_to_one_says_so():
    import archviz
    from archviz.group import group, layer_membership

    one = group(archviz.load("hf:llama", overrides={"num_hidden_layers": 1}))
    assert layer_membership(one, "model.layers.0").startswith("layer 0 is the model's only layer")
    two = group(archviz.load("hf:llama", overrides={"num_hidden_layers": 2}))
    assert layer_membership(two, "model.layers.1").startswith("layer 1 belongs to 2 layers")

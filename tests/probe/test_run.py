"""The execution probe (issue 7): a reduced copy of each model runs for real on CPU, every module call's shapes agree
with the meta walk of the full model, every kind of layer is exercised, and a wrong kernel shape rule is caught."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from archviz.shapes import kernels
from archviz.probe import reduce
from archviz.cli import app
from archviz.probe import ProbeError, ProbeOptions, parse_size, run_probe
from archviz.records import dumps, loads
from archviz.sources import BuildOptions

from helpers import TESTS, TINY
ROOT = TESTS
FIX = ROOT / "fixtures"
V3LIKE = (str(FIX / "dsv3like" / "model.py"), str(FIX / "dsv3like" / "config.json"))
V41LIKE = (str(FIX / "dsv41like" / "model.py"), str(FIX / "dsv41like" / "config.json"))
NOKERNEL = str(ROOT / "data" / "nokernel" / "model.py")

# Small transformers configs (as in tests/shapes/test_trace.py): every width tiny, every kind of layer kept.

# Moderately small widths, but more layers, experts, vocabulary and positions than the copy keeps: reduced for real.
V3_REDUCED = dict(TINY["deepseek_v3"], num_hidden_layers=6, n_routed_experts=16, vocab_size=8192,
                  max_position_embeddings=16384)
# The V4.1-like fixture with a big vocabulary and big n-gram tables (primes from 100,000 up need ~400k rows).
V41_REDUCED = dict(vocab_size=8192, engram_vocab_size=100000, engram_num_embeddings=[500000, 500000])


def _assert_all_agree(result) -> None:
    assert result.disagreements == [], [d.line() for d in result.disagreements]
    assert result.ok and result.agreement == 1.0 and result.compared > 0
    # Every kind of layer is exercised: its first layer ran in the copy and its modules were compared.
    for k in result.kinds:
        assert k["compared"] > 0 and k["confirmed"] == k["compared"], k
        if k["layers"]:
            assert k["first"] in k["probed"], k
    probe = result.record.extra("probe")
    assert probe["agreement"] == 1.0
    assert probe["modules"] and all(v["confirmed"] for v in probe["modules"].values())
    assert set(probe["modules"]) == set(result.comparison.confirmed)


@pytest.mark.parametrize("name", ["llama", "mixtral", "deepseek_v3", "deepseek_v4"])
def test_transformers_models_agree_on_cpu(name):
    result = run_probe("hf:" + name, BuildOptions(overrides=tuple(TINY[name].items())))
    _assert_all_agree(result)
    assert result.device == "cpu"


def test_a_reduced_deepseek_v3_maps_back_to_the_full_model():
    result = run_probe("hf:deepseek_v3", BuildOptions(overrides=tuple(V3_REDUCED.items())))
    _assert_all_agree(result)
    plan = result.plan
    cut = {r.field: (r.full, r.reduced) for r in plan.reductions}
    assert plan.method == "layer kinds" and plan.kept_layers == (0, 1)  # a dense layer, a MoE layer
    assert cut["num_hidden_layers"] == (6, 2)
    assert cut["n_routed_experts"] == (16, 4)  # max(top-k, 4), 2 groups of 2
    assert cut["vocab_size"] == (8192, 1024)
    assert cut["max_position_embeddings"] == (16384, 1024)
    # The logits are [B, T, 8192] on meta and [B, T, 1024] for real: they agree through the vocabulary cut.
    head = result.record.module("lm_head")
    assert head.calls[0].outputs[0] == ("B", "T", 8192)
    assert result.record.extra("probe")["modules"]["lm_head"]["confirmed"] is True
    # Layers 2-5 and experts 4-15 are not in the copy: not exercised, not failures.
    absent = result.comparison.absent
    assert absent["model.layers.4.self_attn"] == "layer not kept"
    assert all(r in ("layer not kept", "routed expert not kept") for r in absent.values())


def test_v3like_fixture_agrees_with_a_cut_vocabulary():
    result = run_probe(V3LIKE[0], BuildOptions(config=V3LIKE[1], overrides=(("vocab_size", 8192),)))
    _assert_all_agree(result)
    cut = {r.field: (r.full, r.reduced) for r in result.plan.reductions}
    assert cut["vocab_size"] == (8192, 1024) and cut["n_routed_experts"] == (8, 4)
    assert result.plan.kept_layers == (0, 1)
    assert set(result.kernels) >= {"kernel.act_quant", "kernel.fp8_gemm", "kernel.fp4_gemm"}
    assert all(k["implementation"] == [f"archviz.kernels.{q.split('.')[-1]}"] for q, k in result.kernels.items())


def test_v41like_fixture_agrees_with_layers_experts_vocabulary_and_ngram_tables_cut():
    result = run_probe(V41LIKE[0], BuildOptions(config=V41LIKE[1], overrides=tuple(V41_REDUCED.items())))
    _assert_all_agree(result)
    plan = result.plan
    cut = {r.field: (r.full, r.reduced) for r in plan.reductions}
    assert cut["vocab_size"][0] == 8192 and 1000 <= cut["vocab_size"][1] <= 1024  # a value no width of it takes
    assert cut["engram_vocab_size"] == (100000, 4096)
    assert all(n < 500000 for n in cut["engram_num_embeddings"][1])
    assert cut["n_routed_experts"] == (8, 4)
    assert cut["n_mtp_layers"] == (1, 0)
    # Kinds (12 layers): kv sources 0 and 6, index sources 0, 3, 6, 9, engram 1 and 7, hash layers 0-1.
    kept = plan.kept_layers
    assert kept is not None and len(kept) < 12
    assert 6 in kept and 7 in kept  # the engram layer 7 reuses layer 6's compressed KV: its source is kept
    assert cut["kv_source_layers"] == ([0, 6], [0, kept.index(6)])
    assert cut["engram_layer_ids"] == ([1, 7], [1, kept.index(7)])
    # Each kept layer was compared with the full model's layer of the same index.
    entry = result.record.extra("probe")["modules"]["layers.7.attn"]
    assert entry["confirmed"] is True and entry["probed_as"] == f"layers.{kept.index(7)}.attn"
    # Every stubbed kernel ran as its torch implementation, and each call says so.
    assert "kernel.sparse_attn" in result.kernels
    assert any(k.startswith("kernel.sparse_attn → archviz.kernels.sparse_attn") for k in entry.get("kernels", ()))
    # The records still serialise, verdicts included.
    back = loads(dumps(result.record))
    assert back.extra("probe")["modules"]["layers.7.attn"]["confirmed"] is True


def test_the_plan_keeps_every_kind_and_each_layers_sources():
    import archviz
    from archviz.walk import walk

    built = archviz.build(V41LIKE[0], config=V41LIKE[1])
    record = walk(built)
    plan = reduce.plans(record, built.config)[0]
    path, kinds = reduce.layer_kinds(record)
    assert path == "layers"
    assert {k[0] for k in kinds} <= set(plan.kept_layers)
    assert plan.map_path("layers.7.ffn.experts.1") == f"layers.{plan.kept_layers.index(7)}.ffn.experts.1"
    assert plan.map_path("layers.5.attn") is None and plan.map_path("embed") == "embed"
    assert plan.unmap_path(plan.map_path("layers.7.attn")) == "layers.7.attn"
    assert plan.absent_reason("layers.7.ffn.experts.6") == "routed expert not kept"
    assert plan.absent_reason("mtp.0.attn") == "MTP layer dropped"


class _WrongOnMeta:
    """A kernel whose shape rule is wrong (one position too many) on meta; on CPU it computes the right thing."""

    def __call__(self, h):
        if h.is_meta:
            return torch.empty(h.shape[0], h.shape[1] + 1, h.shape[2], dtype=h.dtype, device=h.device)
        return h * 2


def test_a_wrong_kernel_shape_rule_fails_the_probe_and_names_the_module(monkeypatch):
    monkeypatch.setitem(kernels._RULES, "kernel.mystery_fused_op", _WrongOnMeta())
    res = CliRunner().invoke(app, ["probe", NOKERNEL])
    assert res.exit_code == 1, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("proj: meta"))
    assert "vs real" in line
    assert "(model): meta" in res.output  # the model's output follows proj's


def test_a_wrong_kernel_rule_is_caught_even_where_module_shapes_come_out_right(monkeypatch):
    # Meta pass only: act_quant's rule answers one block scale too many per row. Nothing downstream reads the scales'
    # shape on meta, so every module's shapes still agree; the kernel call itself does not.
    real = kernels.lookup("kernel.act_quant", meta=False)[0]

    def wrong(x, block_size=128, scale_fmt=None, scale_dtype=torch.float32, inplace=False):
        if x.is_meta and not inplace:
            return (torch.empty(x.shape, dtype=torch.float8_e4m3fn, device="meta"),
                    torch.empty((*x.shape[:-1], x.shape[-1] // block_size + 1), dtype=scale_dtype, device="meta"))
        return real(x, block_size, scale_fmt, scale_dtype, inplace)

    monkeypatch.setitem(kernels._RULES, "kernel.act_quant", wrong)
    res = CliRunner().invoke(app, ["probe", V41LIKE[0], "--config", V41LIKE[1]])
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.output.splitlines() if "(its call of kernel.act_quant): meta" in ln]
    assert any(ln.startswith("layers.0.attn.wq_a ") for ln in lines), res.output[-2000:]
    assert all("vs real" in ln for ln in lines)


def test_a_sparse_attention_rule_with_an_impossible_shape_stops_the_meta_walk_naming_the_module(monkeypatch):
    # One position too many: the attention's own code cannot go on with it (on meta), so the probe stops before
    # running anything, naming the module (exit 2) -- a rule wrong in a way the code survives is the case above.
    real = kernels.lookup("kernel.sparse_attn", meta=False)[0]

    def wrong(q, kv, attn_sink, topk_idxs, softmax_scale):
        if q.is_meta:
            return torch.empty(q.shape[0], q.shape[1] + 1, q.shape[2], q.shape[3], dtype=q.dtype, device=q.device)
        return real(q, kv, attn_sink, topk_idxs, softmax_scale)

    monkeypatch.setitem(kernels._RULES, "kernel.sparse_attn", wrong)
    res = CliRunner().invoke(app, ["probe", V41LIKE[0], "--config", V41LIKE[1]])
    assert res.exit_code == 2, res.output
    assert "layers.0.attn" in res.output


def test_memory_guard_refuses_before_allocating():
    res = CliRunner().invoke(app, ["probe", V3LIKE[0], "--config", V3LIKE[1], "--max-memory", "1MB"])
    assert res.exit_code == 2
    assert "--max-memory 1.0 MB" in res.output and "needs about" in res.output
    with pytest.raises(ProbeError):
        run_probe(V3LIKE[0], BuildOptions(config=V3LIKE[1]), ProbeOptions(max_memory=1024))


def test_json_output(tmp_path):
    out = tmp_path / "probed.json"
    res = CliRunner().invoke(app, ["probe", V3LIKE[0], "--config", V3LIKE[1], "--json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["ok"] is True and data["agreement"] == 1.0 and data["disagreements"] == []
    assert data["device"] == "cpu" and data["modules_compared"] == data["modules_confirmed"] > 0
    assert data["reduced"]["method"] == "layer kinds" and data["reduced"]["layers_kept"] == [0, 1]
    assert {r["field"] for r in data["reduced"]["reductions"]} >= {"n_layers", "n_routed_experts"}
    assert data["kernels"]["kernel.fp8_gemm"]["implementation"] == ["archviz.kernels.fp8_gemm"]
    assert data["not_exercised"] > 0 and data["B"] > 0 and data["T"] > 0
    assert data["estimate_bytes"] > 0 and data["peak_rss_mb"] > 0
    assert len(data["kinds"]) == 3 and data["kinds"][-1]["kind"] == "outside the layer list"  # dense, MoE, the rest
    assert [k["probed"] for k in data["kinds"]] == [[0], [1], []]
    record = loads(out.read_text())
    assert record.extra("probe")["modules"]["layers.1.ffn.gate"]["confirmed"] is True


def test_sizes_and_bad_input():
    assert parse_size("8GB") == 8 * 1024**3 and parse_size("512MiB") == 512 * 1024**2 and parse_size("100") == 100
    with pytest.raises(ProbeError):
        parse_size("lots")
    res = CliRunner().invoke(app, ["probe", "hf:llama", "--device", "tpu"])
    assert res.exit_code == 2


def test_a_vision_model_probes_on_the_input_given():
    """A model whose forward takes pixel_values (ViT) runs both passes on `--input pixel_values=...`: random floats
    for real, the same shape on meta; every module call agrees, the patch embedding's output included."""
    cfg = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
               patch_size=8, num_channels=3)
    result = run_probe("hf:vit", BuildOptions(overrides=tuple(cfg.items())),
                       ProbeOptions(input_specs=["pixel_values=B,3,32,32:float32"]))
    _assert_all_agree(result)
    patches = (cfg["image_size"] // cfg["patch_size"]) ** 2
    proj = result.record.module("embeddings.patch_embeddings.projection")
    assert proj.calls[0].outputs == (("B", cfg["hidden_size"], 32 // 8, 32 // 8),)
    assert result.record.module("layers.0").calls[0].inputs[0] == ("B", patches + 1, cfg["hidden_size"])  # + CLS

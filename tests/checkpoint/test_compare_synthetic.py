"""compare() on small models built on meta against hand-made inventories: every verdict, note and rule path."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from archviz.checkpoint import CheckpointInventory, ShardInfo, TensorInfo, compare, load_rules
from archviz.checkpoint.compare import compress_names
from archviz.errors import ArchvizError
from archviz.records import dumps, loads
from archviz.sources import Built
from archviz.walk import walk


def record_of(build: Any, config: dict[str, Any] | None = None, kind: str = "factory"):
    with torch.device("meta"):
        model = build()
    return walk(Built(model=model, spec="synthetic", kind=kind, name="synthetic", config=config or {}, overrides={}))


def inventory(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> CheckpointInventory:
    shard = "model.safetensors"
    return CheckpointInventory(
        source="synthetic.safetensors", revision=None, shards=(ShardInfo(shard, 0, 0),),
        tensors={n: TensorInfo(n, d, tuple(s), shard) for n, (d, s) in tensors.items()})


def result(record, inv, rules=None, **kw) -> dict[str, Any]:
    out = compare(record, inv, rules, **kw).extra("checkpoint")
    json.dumps(out)  # JSON-able
    return out


def entry(res: dict[str, Any], model: str | None = None, checkpoint: str | None = None) -> dict[str, Any]:
    for e in res["tensors"]:
        if model is not None and e["model"] == model:
            return e
        if checkpoint is not None and checkpoint in e["checkpoint"]:
            return e
    raise KeyError(model or checkpoint)


class Block(nn.Module):
    def __init__(self, d: int = 8, ff: int = 16):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, ff)
        self.down = nn.Linear(ff, d, bias=False)


class Tiny(nn.Module):
    def __init__(self, d: int = 8, ff: int = 16, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(10, d)
        self.layers = nn.ModuleList(Block(d, ff) for _ in range(layers))
        self.register_buffer("position_ids", torch.arange(4), persistent=False)
        self.register_buffer("table", torch.zeros(3, dtype=torch.int64))


def tiny_ck(prefix: str = "", ff: int = 16, layers: int = 2, extra: dict | None = None) -> CheckpointInventory:
    t: dict[str, tuple[str, tuple[int, ...]]] = {f"{prefix}embed.weight": ("F32", (10, 8)),
                                                 f"{prefix}table": ("I64", (3,))}
    for i in range(layers):
        t[f"{prefix}layers.{i}.norm.weight"] = ("F32", (8,))
        t[f"{prefix}layers.{i}.norm.bias"] = ("F32", (8,))
        t[f"{prefix}layers.{i}.up.weight"] = ("F32", (ff, 8))
        t[f"{prefix}layers.{i}.up.bias"] = ("F32", (ff,))
        t[f"{prefix}layers.{i}.down.weight"] = ("F32", (8, ff))
    t.update(extra or {})
    return inventory(t)


def test_identity_match_and_module_tree() -> None:
    rec = record_of(Tiny)
    res = result(rec, tiny_ck())
    assert res["verdict"] == "match"
    s = res["summary"]
    assert s["model_parameters"] == s["matched"] == s["checkpoint_parameters"] == rec.summary.parameters
    assert s["mismatched"] == s["missing"] == s["checkpoint_only"] == 0
    assert entry(res, "table")["kind"] == "buffer" and entry(res, "table")["verdict"] == "match"
    mods = res["modules"]
    assert set(mods) == {"", "embed", "layers", "layers.0", "layers.0.norm", "layers.0.up", "layers.0.down",
                         "layers.1", "layers.1.norm", "layers.1.up", "layers.1.down"}
    assert all(v["verdict"] == "match" and v["model"] == v["checkpoint"] for v in mods.values())
    assert mods[""]["model"] == rec.summary.parameters
    assert mods["layers"]["model"] == sum(mods[f"layers.{i}"]["model"] for i in range(2))
    # the extra survives the records JSON round trip
    again = loads(dumps(compare(rec, tiny_ck())))
    assert again.extra("checkpoint")["verdict"] == "match"


@pytest.mark.parametrize("prefix", ["model.", "bert.", "transformer."])
def test_common_prefixes(prefix: str) -> None:
    res = result(record_of(Tiny), tiny_ck(prefix))
    assert res["verdict"] == "match", res["summary"]
    assert entry(res, "layers.0.up.weight")["checkpoint"] == [f"{prefix}layers.0.up.weight"]


def test_count_mismatch_names_both_numbers_and_aggregates_up() -> None:
    res = result(record_of(lambda: Tiny(ff=12)), tiny_ck(ff=16))
    assert res["verdict"] == "mismatch"
    e = entry(res, "layers.1.up.weight")
    assert e["verdict"] == "mismatch"
    assert (e["model_elements"], e["checkpoint_elements"]) == (96, 128)
    assert (e["model_shape"], e["checkpoint_shape"]) == ([12, 8], [16, 8])
    assert "model 96 [12, 8], checkpoint 128 [16, 8]" in e["note"]
    mods = res["modules"]
    assert mods["layers.1.up"] == {"verdict": "mismatch", "model": 96 + 12, "checkpoint": 128 + 16,
                                   "notes": mods["layers.1.up"]["notes"]}
    for p in ("layers.1", "layers", ""):
        assert mods[p]["verdict"] == "mismatch"
    assert mods["layers.1.norm"]["verdict"] == "match"
    assert res["summary"]["mismatched"] == 2 * (96 + 12 + 96)


def test_missing_partial_and_checkpoint_only() -> None:
    ck = tiny_ck(layers=1)
    res = result(record_of(Tiny), ck)
    assert res["verdict"] == "mismatch"
    mods = res["modules"]
    assert mods["layers.1"]["verdict"] == "missing" and mods["layers.1"]["checkpoint"] == 0
    assert mods["layers"]["verdict"] == "partial"
    assert entry(res, "layers.1.down.weight")["verdict"] == "missing"
    assert res["summary"]["missing"] == mods["layers.1"]["model"]

    # a checkpoint with more layers than the model: unexplained extras fail the check
    res = result(record_of(lambda: Tiny(layers=1)), tiny_ck(layers=2))
    assert res["verdict"] == "mismatch"
    assert res["summary"]["unexplained"] == 5
    assert {c["kind"] for c in res["checkpoint_only"]} == {"unmapped"}
    assert res["modules"]["layers.1"]["verdict"] == "mismatch"
    assert res["modules"]["layers.1"]["in_model"] is False


def test_mtp_layer_and_buffers_are_explained() -> None:
    cfg = {"num_hidden_layers": 2, "num_nextn_predict_layers": 1}
    extra = {"layers.2.embed_tokens.weight": ("BF16", (10, 8)), "layers.2.eh_proj.weight": ("BF16", (8, 16)),
             "position_ids": ("I64", (1, 4)), "mtp.0.norm.weight": ("BF16", (8,))}
    res = result(record_of(Tiny, cfg), tiny_ck(extra=extra))
    assert res["verdict"] == "match", res["checkpoint_only"]
    kinds = {c["name"]: c["kind"] for c in res["checkpoint_only"]}
    assert kinds == {"layers.2.embed_tokens.weight": "mtp copy", "layers.2.eh_proj.weight": "mtp",
                     "position_ids": "buffer", "mtp.0.norm.weight": "mtp"}
    e = entry(res, checkpoint="position_ids")
    assert e["verdict"] == "checkpoint-only" and "non-persistent buffer" in e["note"]
    # position_ids is not a parameter; the MTP tensors are
    assert res["summary"]["checkpoint_parameters"] == res["summary"]["matched"] + 80 + 128 + 8
    # without num_nextn_predict_layers, a layer past the model's is unexplained
    res = result(record_of(Tiny, {"num_hidden_layers": 2}), tiny_ck(extra=extra))
    assert res["verdict"] == "mismatch"


def test_persistent_buffer_missing_is_missing() -> None:
    ck = tiny_ck()
    del ck.tensors["table"]
    res = result(record_of(Tiny), ck)
    assert entry(res, "table")["verdict"] == "missing"
    assert res["verdict"] == "mismatch"
    assert res["summary"]["missing"] == 0  # not a parameter


class FP8Linear(nn.Module):
    def __init__(self, out: int, inp: int, dtype: torch.dtype = torch.float8_e4m3fn, scale: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out, inp, dtype=dtype), requires_grad=False)
        if scale:
            self.scale = nn.Parameter(torch.empty(math.ceil(out / 128), math.ceil(inp / 128)), requires_grad=False)


def test_fp8_checkpoint_bf16_model_is_a_note() -> None:
    rec = record_of(lambda: nn.Sequential(nn.Linear(300, 200, bias=False).to(torch.bfloat16)))
    ck = inventory({"0.weight": ("F8_E4M3", (200, 300)), "0.weight_scale_inv": ("F32", (2, 3))})
    res = result(rec, ck)
    assert res["verdict"] == "match"
    e = entry(res, "0.weight")
    assert e["checkpoint"] == ["0.weight", "0.weight_scale_inv"]
    assert "fp8 F8_E4M3 on disk with F32 scale [2, 3] (128×128 blocks), bfloat16 in the model: dequantized at load" \
        in e["note"]
    assert res["summary"]["scales"] == {"paired": 1, "weights_with_bad_scales": 0}
    assert res["summary"]["checkpoint_parameters"] == 60_000  # scales are not parameters

    bad = inventory({"0.weight": ("F8_E4M3", (200, 300)), "0.weight_scale_inv": ("F32", (2, 2))})
    res = result(rec, bad)
    assert res["verdict"] == "mismatch"
    e = entry(res, "0.weight")
    assert e["verdict"] == "mismatch"
    assert "scale weight_scale_inv [2, 2] does not fit weight [200, 300] in 128×128 blocks (expected [2, 3])" \
        in e["note"]


def test_block_size_from_quantization_config() -> None:
    rec = record_of(lambda: nn.Sequential(nn.Linear(256, 256, bias=False)),
                    {"quantization_config": {"weight_block_size": [64, 64]}})
    ok = inventory({"0.weight": ("F8_E4M3", (256, 256)), "0.weight_scale_inv": ("F32", (4, 4))})
    assert result(rec, ok)["verdict"] == "match"
    assert result(rec, ok)["rules"]["fp8_block"] == [64, 64]
    bad = inventory({"0.weight": ("F8_E4M3", (256, 256)), "0.weight_scale_inv": ("F32", (2, 2))})
    assert result(rec, bad)["verdict"] == "mismatch"


def test_fp8_model_with_scales_against_renamed_checkpoint(tmp_path: Path) -> None:
    rec = record_of(lambda: nn.ModuleDict({"proj": FP8Linear(300, 200)}))
    assert [t.kind for t in rec.module("proj").tensors] == ["weight", "scale"]
    ck = inventory({"model.o_proj.weight": ("F8_E4M3", (300, 200)), "model.o_proj.weight_scale_inv": ("F32", (3, 2))})
    # no rule maps o_proj -> proj: everything differs
    res = result(rec, ck)
    assert res["verdict"] == "mismatch"
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"renames": [["\\.o_proj\\.", ".proj."], ["\\.weight_scale_inv$", ".scale"]]}))
    res = result(rec, ck, str(rules))
    assert res["verdict"] == "match", res["tensors"]
    e = entry(res, "proj.weight")
    assert e["checkpoint"] == ["model.o_proj.weight", "model.o_proj.weight_scale_inv"]
    assert e["note"] is None  # fp8 on both sides, scale shapes agree

    ck_bad = inventory({"model.o_proj.weight": ("F8_E4M3", (300, 200)),
                        "model.o_proj.weight_scale_inv": ("F32", (3, 2, 1))})
    res = result(rec, ck_bad, str(rules))
    assert entry(res, "proj.weight")["verdict"] == "mismatch"


class FP4Expert(nn.Module):
    def __init__(self, out: int = 256, inp: int = 128):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out, inp // 2, dtype=torch.float4_e2m1fn_x2), requires_grad=False)
        self.scale = nn.Parameter(torch.empty(out, inp // 32, dtype=torch.float8_e8m0fnu), requires_grad=False)


def test_fp4_packed_in_i8() -> None:
    ck = inventory({"w.weight": ("I8", (256, 64)), "w.scale": ("F8_E8M0", (256, 4))})
    rec = record_of(lambda: nn.ModuleDict({"w": FP4Expert()}))
    res = result(rec, ck)
    assert res["verdict"] == "match", res["tensors"]
    e = entry(res, "w.weight")
    assert e["model_elements"] == e["checkpoint_elements"] == 256 * 128
    assert "fp4 packed 2 per byte in I8" in e["note"] and "(1×32 fp4 blocks)" in e["note"]
    # against a bf16 model holding the unpacked [256, 128] matrix: logical counts agree, dequantized at load
    rec = record_of(lambda: nn.ModuleDict({"w": nn.Linear(128, 256, bias=False).to(torch.bfloat16)}))
    res = result(rec, ck)
    assert res["verdict"] == "match"
    assert "dequantized at load" in entry(res, "w.weight")["note"]
    assert res["summary"]["checkpoint_parameters"] == 256 * 128
    # a wrong E8M0 scale shape: no longer recognised as fp4 -> counts differ
    bad = inventory({"w.weight": ("I8", (256, 64)), "w.scale": ("F8_E8M0", (256, 3))})
    assert result(rec, bad)["verdict"] == "mismatch"


class Experts(nn.Module):
    def __init__(self, e: int = 4, h: int = 8, i: int = 6):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.empty(e, 2 * i, h))
        self.down_proj = nn.Parameter(torch.empty(e, h, i))


class MoE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Module()
        self.mlp.experts = Experts()


def test_fused_experts_compared_by_sums() -> None:
    t = {}
    for e in range(4):
        t[f"mlp.experts.{e}.gate_proj.weight"] = ("BF16", (6, 8))
        t[f"mlp.experts.{e}.up_proj.weight"] = ("BF16", (6, 8))
        t[f"mlp.experts.{e}.down_proj.weight"] = ("BF16", (8, 6))
    rec = record_of(MoE, {"model_type": "qwen3_moe"})
    res = result(rec, inventory(t))
    assert res["verdict"] == "match", res["tensors"]
    e = entry(res, "mlp.experts.gate_up_proj")
    assert e["fused"] == 8 and e["checkpoint_elements"] == e["model_elements"] == 4 * 12 * 8
    assert e["checkpoint"] == ["mlp.experts.{0-3}.gate_proj.weight", "mlp.experts.{0-3}.up_proj.weight"]
    assert "fused from 8 checkpoint tensors, compared by sums" in e["note"]
    assert res["rules"]["ruleset"]["name"] == "transformers:moe-experts"
    del t["mlp.experts.3.up_proj.weight"]
    res = result(rec, inventory(t))
    e = entry(res, "mlp.experts.gate_up_proj")
    assert e["verdict"] == "mismatch"
    assert "checkpoint sum 336 over 7 tensors" in e["note"] and "model 384" in e["note"]


def test_dtype_differences_are_notes() -> None:
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(8, bias=False)
            self.tid2eid = nn.Parameter(torch.zeros(5, 2, dtype=torch.int32), requires_grad=False)

    res = result(record_of(M), inventory({"norm.weight": ("BF16", (8,)), "tid2eid": ("I64", (5, 2))}))
    assert res["verdict"] == "match"
    assert entry(res, "norm.weight")["note"] == "stored BF16, float32 in the model"
    assert entry(res, "tid2eid")["note"] == "stored I64, int32 in the model"
    assert entry(res, "tid2eid")["kind"] == "table"
    assert res["summary"]["checkpoint_parameters"] == 8


def test_tied_copy() -> None:
    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.embed.weight

    rec = record_of(LM)
    assert rec.summary.parameters == 40
    res = result(rec, inventory({"embed.weight": ("F32", (10, 4))}))
    assert res["verdict"] == "match"
    res = result(rec, inventory({"embed.weight": ("F32", (10, 4)), "head.weight": ("F32", (10, 4))}))
    assert res["verdict"] == "match"
    assert res["checkpoint_only"][0]["kind"] == "tied copy"
    assert res["summary"]["checkpoint_parameters"] == 40


def test_compact_tensors_keep_counts() -> None:
    rec = record_of(lambda: Tiny(layers=30))
    ck = tiny_ck(layers=30)
    full = result(rec, ck, compact=False)
    small = result(rec, ck, compact=True)
    assert len(small["tensors"]) < len(full["tensors"]) / 10
    assert sum(e.get("count", 1) for e in small["tensors"]) == len(full["tensors"])
    up = next(e for e in small["tensors"] if e["model"] == "layers.{0-29}.up.weight")
    assert up["count"] == 30 and up["checkpoint"] == ["layers.{0-29}.up.weight"]
    assert small["modules"] == full["modules"]


def test_compress_names() -> None:
    names = [f"layers.{i}.ffn.experts.{e}.w1.weight" for i in (0, 1, 2, 5) for e in range(4)]
    assert compress_names(names) == ["layers.{0-2,5}.ffn.experts.{0-3}.w1.weight"]
    assert compress_names(["a.0.x", "a.1.x", "a.1.y", "b"]) == ["a.{0-1}.x", "a.1.y", "b"]
    ragged = ["l.0.e.0.w", "l.0.e.1.w", "l.1.e.0.w"]
    assert compress_names(ragged) == ["l.0.e.{0-1}.w", "l.1.e.0.w"]


def test_user_rules_toml_and_labels(tmp_path: Path) -> None:
    pytest.importorskip("tomllib")
    rules = tmp_path / "rules.toml"
    rules.write_text("""
format = "archviz-rules/1"
renames = [['^encoder\\.', '']]
ignore = [{pattern = '^extra\\.', label = "legacy", about = "kept for old loaders"}]
""")
    ck = tiny_ck(extra={"extra.thing": ("F32", (3,))})
    ck = inventory({("encoder." + n if n.startswith("layers") else n): (t.dtype, t.shape)
                    for n, t in ck.tensors.items()})
    res = result(record_of(Tiny), ck, str(rules))
    assert res["verdict"] == "match", res["checkpoint_only"]
    assert res["checkpoint_only"] == [{"name": "extra.thing", "kind": "legacy", "dtype": "F32", "shape": [3],
                                       "elements": 3, "explained": True}]


@pytest.mark.parametrize("text,msg", [
    ("{", "not valid JSON"),
    ('{"renames": [["(", "x"]]}', "bad regex"),
    ('{"renames": [["a", "\\\\2"]]}', "bad replacement"),
    ('{"renames": "x"}', "r.json renames: a list, not 'x'"),
    ('{"format": "archviz-rules/9", "renames": []}', "unsupported rules format"),
    ('{"rename": []}', "unknown key 'rename'"),
    ('{}', "no rules in this file"),
    ('{"fuse": [{"from": "x"}]}', "a fuse rule is"),
    ('{"ignore": [{"pattern": "x", "label": "unmapped"}]}', "other than 'unmapped'"),
    ('[1]', "a rules file is a JSON object"),
])
def test_bad_rules_files(tmp_path: Path, text: str, msg: str) -> None:
    p = tmp_path / "r.json"
    p.write_text(text)
    with pytest.raises(ArchvizError) as ei:
        load_rules(p)
    assert msg in ei.value.line()
    assert ei.value.exit_code == 2
    assert "\n" not in ei.value.line()


def test_missing_rules_file(tmp_path: Path) -> None:
    with pytest.raises(ArchvizError, match="does not exist"):
        load_rules(tmp_path / "nope.json")


def test_compare_accepts_a_spec(tmp_path: Path) -> None:
    from archviz.errors import CheckpointError

    with pytest.raises(CheckpointError):
        compare(record_of(Tiny), str(tmp_path / "absent.safetensors"))


@pytest.mark.parametrize("pattern, into, name", [
    (r"experts\.(\d+)\.(w1|w3)\.weight$", r"experts.gate_up_proj", "model.layers.3.mlp.experts.17.w1.weight"),
    (r"layers\.(?P<layer>\d+)\.ffn\.experts\.(\d+)\.w2", r"layers.\g<layer>.ffn.experts.down[\2]",
     "layers.42.ffn.experts.255.w2.weight"),
    (r"(?<=model\.)layers\.(\d+)", r"blocks.\1\\x", "model.layers.7.attn.wq.weight"),  # lookbehind; escaped \
    (r"\.(\d)(\d)\.", r".\g<2>\g<1>\n.", "a.12.b"),
    (r"^(whole\..*)$", r"\1", "whole.name"),
])
def test_fuse_target_is_the_match_expanded(pattern, into, name):
    """Fuse.target cuts the expansion out of a cached sub(); it must equal re.Match.expand of the same match."""
    import re

    from archviz.checkpoint.rules import Fuse

    rx = re.compile(pattern)
    fuse = Fuse(pattern, into, "", rx)
    assert fuse.target(name) == rx.search(name).expand(into)
    assert fuse.target("no match here") is None

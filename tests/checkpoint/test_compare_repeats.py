"""compare() on repeated layers and experts: a verdict is worked out once per kind of tensor pair and module rows
are summed once up the tree, so one instance that differs from its siblings must still be reported, with its path,
and layers with different numbers of experts must still be counted right."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from archviz.checkpoint import CheckpointInventory, ShardInfo, TensorInfo, compare
from archviz.records import dumps_compact, loads
from archviz.render.jsondump import dumps_indented
from archviz.sources import Built
from archviz.walk import walk

from tests.helpers import expand, hand_record

EXPERTS = [2, 4, 4]  # experts per layer: one template, a different count in layer 0
D, FF = 8, 16


class Expert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(D, FF, bias=False)
        self.w2 = nn.Linear(FF, D, bias=False)


class Layer(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.experts = nn.ModuleList(Expert() for _ in range(n))


class Moe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(n) for n in EXPERTS)


def moe_record():
    """The record as a records file gives it back (repeated tensors then share one record object)."""
    with torch.device("meta"):
        model = Moe()
    rec = walk(Built(model=model, spec="synthetic", kind="factory", name="moe", config={}, overrides={}))
    return loads(dumps_compact(rec))


def ck_tensors() -> dict[str, tuple[str, tuple[int, ...]]]:
    t = {}
    for i, n in enumerate(EXPERTS):
        for e in range(n):
            t[f"layers.{i}.experts.{e}.w1.weight"] = ("F32", (FF, D))
            t[f"layers.{i}.experts.{e}.w2.weight"] = ("F32", (D, FF))
    return t


def inventory(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> CheckpointInventory:
    return CheckpointInventory(source="synthetic.safetensors", revision=None,
                               shards=(ShardInfo("model.safetensors", 0, 0),),
                               tensors={n: TensorInfo(n, d, s, "model.safetensors") for n, (d, s) in tensors.items()})


def run(tensors: dict[str, tuple[str, tuple[int, ...]]], compact: bool | None = None) -> dict[str, Any]:
    out = compare(moe_record(), inventory(tensors), compact=compact).extra("checkpoint")
    assert dumps_indented(out) == json.dumps(out, indent=1, ensure_ascii=False)
    return out


def test_layers_with_different_expert_counts_are_counted_and_listed() -> None:
    res = run(ck_tensors(), compact=True)
    assert res["verdict"] == "match"
    n_experts = sum(EXPERTS)
    assert res["summary"]["tensors"]["match"] == 2 * n_experts
    assert res["summary"]["matched"] == n_experts * 2 * D * FF
    w1 = [e for e in res["tensors"] if ".w1." in e["model"]]
    assert len(w1) == 1 and w1[0]["count"] == n_experts
    want = {f"layers.{i}.experts.{e}.w1.weight" for i, n in enumerate(EXPERTS) for e in range(n)}
    assert expand(w1[0]["model"]) == want
    assert set().union(*map(expand, w1[0]["checkpoint"])) == want
    for i, n in enumerate(EXPERTS):
        row = res["modules"][f"layers.{i}"]
        assert (row["verdict"], row["model"], row["checkpoint"]) == ("match", n * 2 * D * FF, n * 2 * D * FF)


def test_one_expert_that_differs_is_reported_with_its_path() -> None:
    t = ck_tensors()
    t["layers.2.experts.3.w2.weight"] = ("F32", (D, FF + 1))
    res = run(t, compact=False)
    assert res["verdict"] == "mismatch"
    bad = [e for e in res["tensors"] if e["verdict"] != "match"]
    assert [(e["model"], e["model_shape"], e["checkpoint_shape"]) for e in bad] == [
        ("layers.2.experts.3.w2.weight", [D, FF], [D, FF + 1])]
    rows = res["modules"]
    for path in ("layers.2.experts.3.w2", "layers.2.experts.3", "layers.2.experts", "layers.2", "layers", ""):
        assert rows[path]["verdict"] == "mismatch", path
    assert (rows["layers.2.experts.3.w2"]["model"], rows["layers.2.experts.3.w2"]["checkpoint"]) == (
        D * FF, D * (FF + 1))
    for path in ("layers.2.experts.2.w2", "layers.2.experts.3.w1", "layers.1.experts.3.w2", "layers.1"):
        assert rows[path]["verdict"] == "match", path
    # the whole model's row: every parameter, and the one tensor's extra checkpoint elements
    assert rows[""]["model"] == sum(EXPERTS) * 2 * D * FF
    assert rows[""]["checkpoint"] == rows[""]["model"] + D
    # compacted, the odd one keeps its own entry; its 19 siblings of the two templates collapse
    res = run(t, compact=True)
    odd = [e for e in res["tensors"] if e["verdict"] == "mismatch"]
    assert [(e["model"], e.get("count")) for e in odd] == [("layers.2.experts.3.w2.weight", None)]
    assert sum(e.get("count", 1) for e in res["tensors"]) == 2 * sum(EXPERTS)


def test_a_note_on_one_instance_stays_on_that_instance() -> None:
    t = ck_tensors()
    t["layers.1.experts.0.w1.weight"] = ("BF16", (FF, D))  # a dtype difference: a note, not a mismatch
    res = run(t, compact=False)
    assert res["verdict"] == "match"
    noted = [e["model"] for e in res["tensors"] if e["note"]]
    assert noted == ["layers.1.experts.0.w1.weight"]
    rows = res["modules"]
    # a matching row whose notes are its parent's leaves them to the parent: up to the root here
    assert any("BF16" in n for n in rows[""]["notes"])
    for path in ("layers.1.experts.1.w1", "layers.1.experts.0.w2", "layers.0", "layers.2"):
        assert "notes" not in rows[path], path


def test_missing_and_beyond_the_model() -> None:
    t = ck_tensors()
    del t["layers.0.experts.1.w1.weight"]
    t["layers.7.experts.0.w1.weight"] = ("F32", (FF, D))  # a layer the model does not have
    res = run(t, compact=False)
    rows = res["modules"]
    assert rows["layers.0.experts.1.w1"]["verdict"] == "missing"
    assert rows["layers.0.experts.1"]["verdict"] == "partial"  # w2 is there
    assert rows["layers.0"]["verdict"] == "partial"
    beyond = [p for p in rows if rows[p].get("in_model") is False]
    assert beyond == sorted(beyond) and set(beyond) == {"layers.7", "layers.7.experts", "layers.7.experts.0",
                                                        "layers.7.experts.0.w1"}
    assert list(rows)[-len(beyond):] == beyond  # after the model's own modules
    assert rows["layers.7"]["checkpoint_only"] == FF * D
    assert rows[""]["checkpoint_only"] == FF * D and rows["layers"]["checkpoint_only"] == FF * D


def test_module_paths_that_skip_a_parent() -> None:
    """A hand-made record whose paths do not form a tree: the module rows still name every ancestor."""
    rec = hand_record([("", "Root", {}, []), ("a", "A", {}, []), ("a.b.c", "C", {}, [("weight", (2, 3))])])
    res = compare(rec, inventory({"a.b.c.weight": ("F32", (2, 3))})).extra("checkpoint")
    assert res["verdict"] == "match"
    assert res["modules"]["a.b"] == {"verdict": "match", "model": 6, "checkpoint": 6, "in_model": False}
    assert [p for p in res["modules"]] == ["", "a", "a.b.c", "a.b"]


# fp8 experts with their scales: which checkpoint scale each model scale meets is worked out per pair

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dsv3like"


def fp8_case(tmp_path: Path, edit) -> dict[str, Any]:
    """The small DeepSeek-like fixture (experts fp8, with scales) against a checkpoint of its own tensors, edited."""
    import archviz
    from archviz.checkpoint.units import CK_TO_TORCH
    from archviz.records import ALIAS, BUFFER

    rec = loads(dumps_compact(archviz.load(str(FIXTURE / "model.py"), config=str(FIXTURE / "config.json"),
                                           overrides={"expert_dtype": "fp8"})))
    block = json.loads((FIXTURE / "config.json").read_text())["block_size"]
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"scales": {"fp8_block": [block, block]}}))
    to_ck = {v: k for k, v in CK_TO_TORCH.items()}
    t = {n: (to_ck[x.dtype], tuple(x.shape)) for n, x in rec.iter_tensors()
         if x.kind != ALIAS and not (x.kind == BUFFER and not x.persistent)}
    edit(t)
    return compare(rec, inventory(t), str(rules), compact=False).extra("checkpoint")


def test_fp8_scales_match_then_one_scale_missing(tmp_path: Path) -> None:
    res = fp8_case(tmp_path, lambda t: None)
    assert res["verdict"] == "match", res["summary"]
    scaled = [e for e in res["tensors"] if any(c.endswith(".scale") for c in e["checkpoint"])]
    assert len(scaled) == res["summary"]["scales"]["paired"] > 0

    gone = "layers.2.ffn.experts.5.w3.scale"
    res = fp8_case(tmp_path, lambda t: t.pop(gone))
    e = next(e for e in res["tensors"] if e["model"] == "layers.2.ffn.experts.5.w3.weight")
    assert e["checkpoint"] == ["layers.2.ffn.experts.5.w3.weight"]
    noted = [e["model"] for e in res["tensors"] if e["note"] and "no checkpoint scale" in e["note"]]
    assert noted == ["layers.2.ffn.experts.5.w3.weight"]


def test_fp8_one_scale_of_the_wrong_shape(tmp_path: Path) -> None:
    res = fp8_case(tmp_path, lambda t: t.__setitem__("layers.3.ffn.experts.1.w2.scale", ("F32", (9, 9))))
    assert res["verdict"] == "mismatch"
    bad = [e["model"] for e in res["tensors"] if e["verdict"] != "match"]
    assert bad == ["layers.3.ffn.experts.1.w2.weight"]
    assert res["summary"]["scales"]["weights_with_bad_scales"] == 1
    assert res["modules"]["layers.3.ffn.experts.1"]["verdict"] == "mismatch"
    assert res["modules"]["layers.3.ffn.experts.0"]["verdict"] == "match"

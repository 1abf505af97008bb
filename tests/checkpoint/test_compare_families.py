"""compare() by families (checkpoint/families.py, path="fast") against the per-tensor path (path="spec"), through
compare's one interface (checkpoint/verdicts.py): the same checkpoint extra, to the
byte, on layers x experts models (fp32 and fp8 with block scales), with damaged and extra tensors, prefixes, user
rules files and names the family path must leave to the per-tensor path."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from archviz.checkpoint import CheckpointInventory, ShardInfo, TensorInfo, compare, load_rules
from archviz.records import dumps_compact, loads
from archviz.render.jsondump import dumps_indented
from archviz.sources import Built
from archviz.walk import walk

from tests.helpers import expand, hand_record


D, FF = 256, 128  # w1/w3: [FF, D], w2: [D, FF]; with 128x128 fp8 blocks the scales are [1, 2] and [2, 1]
BLOCK = 128
COUNTS = (2, 3, 3)  # experts per layer: one template, a different count in layer 0
PROJ = {"w1": (D, FF), "w2": (FF, D), "w3": (D, FF)}  # name -> (in, out)


# ---------------------------------------------------------------------------------------------------------------------
# The model


class Proj(nn.Module):
    """A linear's weight: fp32, or fp8 with a float32 block scale ``weight_scale_inv`` beside it."""

    def __init__(self, i: int, o: int, fp8: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(o, i, dtype=torch.float8_e4m3fn if fp8 else torch.float32),
                                   requires_grad=False)
        if fp8:
            self.weight_scale_inv = nn.Parameter(
                torch.empty(math.ceil(o / BLOCK), math.ceil(i / BLOCK), dtype=torch.float32), requires_grad=False)


class Expert(nn.Module):
    def __init__(self, fp8: bool) -> None:
        super().__init__()
        for name, (i, o) in PROJ.items():
            setattr(self, name, Proj(i, o, fp8))


class Ffn(nn.Module):
    def __init__(self, n: int, fp8: bool) -> None:
        super().__init__()
        self.experts = nn.ModuleList(Expert(fp8) for _ in range(n))


class Layer(nn.Module):
    def __init__(self, n: int, fp8: bool, ffn: str) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(D, bias=False)
        setattr(self, ffn, Ffn(n, fp8))


class Moe(nn.Module):
    def __init__(self, counts: tuple[int, ...], fp8: bool, ffn: str) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(n, fp8, ffn) for n in counts)


def record_of(model: nn.Module):
    rec = walk(Built(model=model, spec="synthetic", kind="factory", name="moe", config={}, overrides={}))
    return loads(dumps_compact(rec))  # as a records file gives it back: equal tensors share one record


@lru_cache(maxsize=None)
def moe(counts: tuple[int, ...] = COUNTS, fp8: bool = False, ffn: str = "mlp"):
    with torch.device("meta"):
        model = Moe(counts, fp8, ffn)
    return record_of(model)


# ---------------------------------------------------------------------------------------------------------------------
# The checkpoint


Tensors = dict[str, tuple[str, tuple[int, ...]]]


def ck(counts: tuple[int, ...] = COUNTS, fp8: bool = False, prefix: str = "", ffn: str = "mlp") -> Tensors:
    """The model's own tensors as a checkpoint names them (``prefix`` before every name)."""
    t: Tensors = {}
    for li, n in enumerate(counts):
        t[f"{prefix}layers.{li}.norm.weight"] = ("F32", (D,))
        for e in range(n):
            for name, (i, o) in PROJ.items():
                base = f"{prefix}layers.{li}.{ffn}.experts.{e}.{name}"
                if fp8:
                    t[f"{base}.weight"] = ("F8_E4M3", (o, i))
                    t[f"{base}.weight_scale_inv"] = ("F32", (math.ceil(o / BLOCK), math.ceil(i / BLOCK)))
                else:
                    t[f"{base}.weight"] = ("F32", (o, i))
    return t


def n_tensors(counts: tuple[int, ...] = COUNTS) -> int:
    """Model tensors the checkpoint's weights land on (norms and expert weights; the scales travel with those)."""
    return len(counts) + len(PROJ) * sum(counts)


def inventory(tensors: Tensors) -> CheckpointInventory:
    return CheckpointInventory(source="synthetic.safetensors", revision=None,
                               shards=(ShardInfo("model.safetensors", 0, 0),),
                               tensors={n: TensorInfo(n, d, s, "model.safetensors") for n, (d, s) in tensors.items()})


# ---------------------------------------------------------------------------------------------------------------------
# Both paths


def both(record, inv: CheckpointInventory, rules=None, *, compact: bool | None = True
         ) -> tuple[str | None, str, str]:
    """The checkpoint extra through ``compare``'s one interface: by the family path alone (None where it does not
    apply), by the per-tensor path (the specification), and as every caller gets it."""
    def extra(path: str) -> str | None:
        rec = compare(record, inv, rules, compact=compact, path=path)  # type: ignore[arg-type]
        return None if rec is None else dumps_indented(rec.extra("checkpoint"))

    return extra("fast"), extra("spec"), extra("auto")  # type: ignore[return-value]


def entries_for(res: dict[str, Any], model_name: str) -> list[dict[str, Any]]:
    """The tensors-list entries whose (compact) model name stands for ``model_name``."""
    return [e for e in res["tensors"] if e["model"] is not None and model_name in expand(e["model"])]


def same(record, tensors: Tensors, rules=None, *, family: bool | None = True, compact: bool | None = True
         ) -> dict[str, Any]:
    """Both paths on ``tensors``: equal strings, the family path taken (or not) as the case says; the result."""
    fam, per, auto = both(record, inventory(tensors), rules, compact=compact)
    assert fam is None or fam == per
    assert auto == per
    if family is not None:
        assert (fam is not None) is family
    return json.loads(per)


# ---------------------------------------------------------------------------------------------------------------------
# 1. all match, with and without a prefix


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("prefix", ["", "model."])
def test_all_match(fp8: bool, prefix: str) -> None:
    res = same(moe(fp8=fp8), ck(fp8=fp8, prefix=prefix))
    assert res["verdict"] == "match"
    assert res["summary"]["tensors"] == {"match": n_tensors(), "mismatch": 0, "missing": 0, "checkpoint-only": 0}
    assert res["summary"]["scales"] == {"paired": len(PROJ) * sum(COUNTS) if fp8 else 0,
                                        "weights_with_bad_scales": 0}
    w1 = entries_for(res, "layers.2.mlp.experts.1.w1.weight")
    assert len(w1) == 1 and w1[0]["count"] == sum(COUNTS)
    assert expand(w1[0]["model"]) == {f"layers.{li}.mlp.experts.{e}.w1.weight"
                                      for li, n in enumerate(COUNTS) for e in range(n)}
    ck_names = set().union(*map(expand, w1[0]["checkpoint"]))
    assert f"{prefix}layers.0.mlp.experts.1.w1.weight" in ck_names
    assert (f"{prefix}layers.0.mlp.experts.1.w1.weight_scale_inv" in ck_names) is fp8
    for li, n in enumerate(COUNTS):
        assert res["modules"][f"layers.{li}"]["verdict"] == "match"


# ---------------------------------------------------------------------------------------------------------------------
# 2. one expert of one layer damaged

BAD = "layers.1.mlp.experts.2.w2"  # [D, FF]; its fp8 scale [2, 1]


def _shape(t: Tensors) -> None:
    t[f"{BAD}.weight"] = (t[f"{BAD}.weight"][0], (D, FF - 1))  # (its scale's blocks still fit)


def _dtype(t: Tensors) -> None:
    t[f"{BAD}.weight"] = ("BF16", (D, FF))


def _drop_weight(t: Tensors) -> None:
    del t[f"{BAD}.weight"]


def _drop_scale(t: Tensors) -> None:
    del t[f"{BAD}.weight_scale_inv"]


def _scale_shape(t: Tensors) -> None:
    t[f"{BAD}.weight_scale_inv"] = ("F32", (3, 3))


@pytest.mark.parametrize("prefix", ["", "model."])
@pytest.mark.parametrize("fp8,damage", [(False, _shape), (False, _dtype), (False, _drop_weight),
                                        (True, _shape), (True, _dtype), (True, _drop_weight), (True, _drop_scale),
                                        (True, _scale_shape)], ids=lambda x: getattr(x, "__name__", str(x)))
def test_one_expert_damaged(fp8: bool, damage, prefix: str) -> None:
    t = ck(fp8=fp8)
    damage(t)
    t = {prefix + n: v for n, v in t.items()}
    res = same(moe(fp8=fp8), t)
    summary, rows = res["summary"], res["modules"]
    odd = entries_for(res, f"{BAD}.weight")
    assert len(odd) == 1 and "count" not in odd[0] and odd[0]["model"] == f"{BAD}.weight"  # its own entry
    e = odd[0]
    others = n_tensors() - 1
    if damage in (_shape, _scale_shape):
        assert e["verdict"] == "mismatch" and res["verdict"] == "mismatch"
        assert summary["tensors"] == {"match": others, "mismatch": 1, "missing": 0, "checkpoint-only": 0}
        assert summary["scales"]["weights_with_bad_scales"] == (damage is _scale_shape)
        assert rows[BAD]["verdict"] == rows["layers.1"]["verdict"] == "mismatch"
        if damage is _shape:
            assert (e["model_shape"], e["checkpoint_shape"]) == ([D, FF], [D, FF - 1])
            assert rows[BAD]["checkpoint"] == D * (FF - 1)
        else:
            assert "does not fit" in e["note"]
    elif damage is _dtype:
        assert e["verdict"] == "match" and e["checkpoint_dtype"] == "BF16" and "BF16" in e["note"]
        assert summary["tensors"]["match"] == n_tensors()
        # fp8: the BF16 weight no longer carries its scale: the scale is left over (the model's own scale's name)
        assert summary["tensors"]["checkpoint-only"] == int(fp8)
        assert summary["scales"]["paired"] == (len(PROJ) * sum(COUNTS) - 1 if fp8 else 0)
    elif damage is _drop_weight:
        assert e["verdict"] == "missing" and res["verdict"] == "mismatch"
        assert rows[BAD]["verdict"] == "missing" and rows["layers.1.mlp.experts.2"]["verdict"] == "partial"
        assert summary["tensors"]["missing"] == 1 and summary["tensors"]["match"] == others
        assert summary["tensors"]["checkpoint-only"] == int(fp8)  # the weight's scale, alone
    else:  # _drop_scale
        assert e["verdict"] == "match" and "no checkpoint scale" in e["note"]
        assert e["checkpoint"] == [f"{prefix}{BAD}.weight"]
        assert summary["scales"]["paired"] == len(PROJ) * sum(COUNTS) - 1
    # the siblings of the damaged one still share one entry per kind
    for sib in ("layers.1.mlp.experts.1.w2.weight", "layers.1.mlp.experts.2.w1.weight"):
        sibs = entries_for(res, sib)
        assert len(sibs) == 1 and sibs[0]["verdict"] == "match" and sibs[0]["count"] > 1


# ---------------------------------------------------------------------------------------------------------------------
# 3. layers with different numbers of experts


@pytest.mark.parametrize("counts", [(4, 1, 2), (1, 1, 5, 2)])
def test_different_expert_counts(counts: tuple[int, ...]) -> None:
    res = same(moe(counts), ck(counts))
    assert res["verdict"] == "match"
    assert res["summary"]["tensors"]["match"] == n_tensors(counts)
    w3 = entries_for(res, "layers.0.mlp.experts.0.w3.weight")
    assert len(w3) == 1 and w3[0]["count"] == sum(counts)
    for li, n in enumerate(counts):
        row = res["modules"][f"layers.{li}.mlp.experts"]
        assert (row["verdict"], row["model"]) == ("match", n * len(PROJ) * D * FF)
        assert f"layers.{li}.mlp.experts.{n}" not in res["modules"]


# ---------------------------------------------------------------------------------------------------------------------
# 4. tensors only the checkpoint has

EXTRAS = {
    "beyond": "layers.0.mlp.experts.2.w1.weight",  # layer 0 has 2 experts
    "unknown": "foo.bar.weight",
    "under": "layers.1.mlp.experts.0.w1.bias",  # its module exists
    "layer": "layers.7.norm.weight",  # beyond the model's layers
}


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("prefix", ["", "model."])
@pytest.mark.parametrize("which", [*EXTRAS, "all"])
def test_extra_checkpoint_tensors(which: str, prefix: str, fp8: bool) -> None:
    extra = list(EXTRAS.values()) if which == "all" else [EXTRAS[which]]
    t = ck(fp8=fp8)
    for n in extra:
        t[n] = ("F32", (FF, D))
    t = {prefix + n: v for n, v in t.items()}
    res = same(moe(fp8=fp8), t)
    assert res["summary"]["tensors"] == {"match": n_tensors(), "mismatch": 0, "missing": 0,
                                         "checkpoint-only": len(extra)}
    assert res["verdict"] == "mismatch" and res["summary"]["unexplained"] == len(extra)
    assert sorted(c["name"] for c in res["checkpoint_only"]) == sorted(prefix + n for n in extra)
    for n in extra:
        module = n.rsplit(".", 1)[0]
        assert module in res["modules"], module  # placed in the model's namespace (the prefix step's own)
    if "beyond" in which or which == "all":
        assert res["modules"]["layers.0.mlp.experts.2"]["in_model"] is False


# ---------------------------------------------------------------------------------------------------------------------
# 5. two checkpoint tensors on one model tensor


@pytest.mark.parametrize("twice", ["layers.0.norm.weight", "layers.1.mlp.experts.0.w1.weight"])
def test_two_checkpoint_tensors_on_one_model_tensor(twice: str) -> None:
    t = ck()
    t["model." + twice] = t[twice]
    res = same(moe(), t, family=False)
    assert res["summary"]["tensors"]["match"] == n_tensors()
    assert res["summary"]["checkpoint_only_kinds"] == {"tied copy": 1}
    assert [c["name"] for c in res["checkpoint_only"]] == ["model." + twice]


# ---------------------------------------------------------------------------------------------------------------------
# 6. a user's renames


def rules_file(tmp_path: Path, obj: dict[str, Any]):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(obj))
    return load_rules(path)


@pytest.mark.parametrize("prefix", ["", "model."])
@pytest.mark.parametrize("rename,blind", [(["mlp", "ffn"], True), (["\\.mlp\\.", ".ffn."], True),
                                          (["^(model\\.)?layers\\.(\\d+)\\.mlp\\.", "\\1layers.\\2.ffn."], False)])
def test_user_renames(tmp_path: Path, rename: list[str], blind: bool, prefix: str) -> None:
    rules = rules_file(tmp_path, {"renames": [rename]})
    t = ck(fp8=True, prefix=prefix)  # the checkpoint says mlp, the model ffn
    t[f"{prefix}layers.2.mlp.experts.0.w3.weight"] = ("F8_E4M3", (FF, D - 1))
    res = same(moe(fp8=True, ffn="ffn"), t, rules, family=blind)
    assert res["summary"]["tensors"]["match"] == n_tensors() - 1
    bad = [e["model"] for e in res["tensors"] if e["verdict"] == "mismatch"]
    assert "layers.2.ffn.experts.0.w3.weight" in bad
    assert res["rules"]["files"][-1] == "rules.json"


# ---------------------------------------------------------------------------------------------------------------------
# 7. an explain rule whose pattern picks out one layer

NOTE = "layer one is special"


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("prefix,pattern", [("", "layers\\.1\\."), ("model.", "layers\\.1\\."),
                                            ("model.", "^model\\.layers\\.1\\.")])  # (the checkpoint's name only)
def test_explain_on_one_layer(tmp_path: Path, prefix: str, pattern: str, fp8: bool) -> None:
    rules = rules_file(tmp_path, {"explain": [{"pattern": pattern, "note": NOTE}]})
    res = same(moe(fp8=fp8), ck(fp8=fp8, prefix=prefix), rules)
    assert res["verdict"] == "match"
    noted: set[str] = set()
    for e in res["tensors"]:
        names = expand(e["model"])
        if e["note"] and NOTE in e["note"]:
            noted |= names
    assert noted == {f"layers.1.{x}" for x in ["norm.weight"] + [
        f"mlp.experts.{e}.{p}.weight" for e in range(COUNTS[1]) for p in PROJ]}
    assert res["summary"]["notes_count"] == len(noted)


# ---------------------------------------------------------------------------------------------------------------------
# 8. tied weights


@lru_cache(maxsize=None)
def tied_moe():
    """Layer 1's expert 0 w1 holds layer 0's expert 0 w1 weight (one Parameter, two names: the second an alias)."""
    with torch.device("meta"):
        model = Moe(COUNTS, False, "mlp")
    model.layers[1].mlp.experts[0].w1.weight = model.layers[0].mlp.experts[0].w1.weight
    return record_of(model)


TIED = "layers.1.mlp.experts.0.w1.weight"


@pytest.mark.parametrize("second_copy", [False, True])
def test_tied_weight(second_copy: bool) -> None:
    t = ck()
    if not second_copy:
        del t[TIED]
    res = same(tied_moe(), t, family=not second_copy)  # a checkpoint tensor on an alias: the per-tensor path
    assert res["verdict"] == "match"
    assert res["summary"]["tensors"]["match"] == n_tensors() - 1  # the alias is no tensor of its own
    assert res["summary"]["checkpoint_only_kinds"] == ({"tied copy": 1} if second_copy else {})
    assert not entries_for(res, TIED)


# ---------------------------------------------------------------------------------------------------------------------
# 9. names with "{}" in them


class Odd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(n, False, "mlp") for n in COUNTS)
        self.add_module("g{}", nn.Linear(D, D, bias=False))


@pytest.mark.parametrize("where", ["checkpoint", "model"])
def test_braces_are_not_plain(where: str) -> None:
    t = ck()
    if where == "model":
        with torch.device("meta"):
            rec = record_of(Odd())
        t["g{}.weight"] = ("F32", (D, D))
        t["layers.0.norm.weight"] = ("F32", (D + 1,))
    else:
        rec = moe()
        t["layers.0.mlp.experts.0.w1.{}"] = ("F32", (1,))
    res = same(rec, t, family=False)
    assert res["verdict"] == "mismatch"
    if where == "model":
        assert res["summary"]["tensors"]["match"] == n_tensors()  # g{} matches, a norm does not
        assert res["summary"]["tensors"]["mismatch"] == 1 and res["modules"]["g{}"]["verdict"] == "match"
    else:
        assert [c["name"] for c in res["checkpoint_only"]] == ["layers.0.mlp.experts.0.w1.{}"]


# ---------------------------------------------------------------------------------------------------------------------
# 10. random subsets with random per-instance damage

INSTANCES = [f"layers.{li}.norm" for li in range(len(COUNTS))] + [
    f"layers.{li}.mlp.experts.{e}.{p}" for li, n in enumerate(COUNTS) for e in range(n) for p in PROJ]
DAMAGES = ["drop", "shape", "dtype", "prefix", "double", "scale_drop", "scale_shape", "scale_dtype"]
PREFIXES = ["", "model.", "module.", "model.language_model."]
EXTRA_NAMES = ["layers.0.mlp.experts.2.w1.weight", "layers.1.mlp.experts.3.w2.weight", "layers.9.norm.weight",
               "layers.2.mlp.experts.1.w3.bias", "layers.0.norm.bias", "foo.weight", "layers.1.mlp.gate.weight",
               "layers.0.mlp.experts.0.w1.weight_scale_inv", "layers.2.mlp.experts.0.w9.weight"]


@st.composite
def damaged_checkpoints(draw) -> tuple[bool, Tensors]:
    fp8 = draw(st.booleans())
    base = draw(st.sampled_from(PREFIXES[:2]))
    damage = draw(st.dictionaries(st.sampled_from(INSTANCES), st.sampled_from(DAMAGES), max_size=8))
    keep = draw(st.sampled_from([None, 0.5, 0.9]))  # a random subset of the instances (None: all of them)
    t: Tensors = {}
    full = ck(fp8=fp8)
    for inst in INSTANCES:
        d = damage.get(inst)
        if d == "drop" or (keep is not None and draw(st.floats(0, 1)) > keep):
            continue
        w, s = f"{inst}.weight", f"{inst}.weight_scale_inv"
        wd, ws = full[w]
        sc = full.get(s)
        p = base
        if d == "shape":
            ws = draw(st.sampled_from([ws[:-1] + (ws[-1] - 1,), ws[:-1] + (ws[-1] + 1,), (math.prod(ws),)]))
        elif d == "dtype":
            wd = draw(st.sampled_from([x for x in ("F32", "BF16", "F8_E4M3", "F8_E5M2") if x != wd]))
        elif d == "prefix":
            p = draw(st.sampled_from([x for x in PREFIXES if x != base]))
        elif d == "scale_drop":
            sc = None
        elif d == "scale_shape" and sc is not None:
            swapped = (sc[1][1], sc[1][0]) if sc[1][0] != sc[1][1] else (5, 1)
            sc = ("F32", draw(st.sampled_from([(3, 3), (1,), swapped])))
        elif d == "scale_dtype" and sc is not None:
            sc = ("BF16", sc[1])
        t[p + w] = (wd, ws)
        if sc is not None:
            t[p + s] = sc
        if d == "double":  # a second copy under another prefix
            q = draw(st.sampled_from([x for x in PREFIXES if x != base]))
            t[q + w] = (wd, ws)
            if sc is not None:
                t[q + s] = sc
    for n in draw(st.lists(st.sampled_from(EXTRA_NAMES), max_size=3, unique=True)):
        t[base + n] = draw(st.sampled_from([("F32", (FF, D)), ("F8_E4M3", (FF, D)), ("F32", (1, 2))]))
    if draw(st.booleans()):  # the checkpoint's order is not the model's
        names = draw(st.permutations(list(t)))
        t = {n: t[n] for n in names}
    return fp8, t


@pytest.fixture(scope="module")
def user_rules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """User rules files the random cases pick from (an explain rule on one layer, one on a dtype and an expert)."""
    out: dict[str, Any] = {"none": None}
    for name, obj in {"layer": {"explain": [{"pattern": "layers\\.1\\.", "note": NOTE}]},
                      "dtype": {"explain": [{"pattern": "experts\\.0\\.", "note": "expert 0 in bf16",
                                             "checkpoint_dtypes": ["BF16"]}],
                                "ignore": [{"pattern": "\\.bias$", "label": "bias"}]}}.items():
        out[name] = rules_file(tmp_path_factory.mktemp(name), obj)
    return out


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=damaged_checkpoints(), tied=st.booleans(), which=st.sampled_from(["none", "layer", "dtype"]))
def test_random_damage_same_output(user_rules: dict[str, Any], case: tuple[bool, Tensors], tied: bool,
                                   which: str) -> None:
    fp8, t = case
    tied = tied and not fp8  # (the tied model is fp32)
    res = same(tied_moe() if tied else moe(fp8=fp8), t, user_rules[which], family=None)
    counts = res["summary"]["tensors"]
    assert counts["match"] + counts["mismatch"] + counts["missing"] == n_tensors() - tied
    assert counts["checkpoint-only"] == sum(c.get("count", 1) for c in res["checkpoint_only"])
    # every checkpoint tensor is one model tensor's (or its scale), or checkpoint-only, or summed into a fused entry
    fused = sum((e.get("fused", 1) - 1) * e.get("count", 1) for e in res["tensors"] if e["model"] is not None)
    assert res["summary"]["checkpoint_tensors"] == (counts["match"] + counts["mismatch"] + fused
                                                    + counts["checkpoint-only"] + res["summary"]["scales"]["paired"])


# ---------------------------------------------------------------------------------------------------------------------
# More: the default compaction of a large model, fp4 experts, module paths that are no tree, ambiguous prefixes

BIG = (100, 100, 100, 100)  # 1,204 model tensors: compact=None compacts, and tries the family path


def test_large_model_default_compaction() -> None:
    t = ck(BIG, prefix="model.")
    del t["model.layers.3.mlp.experts.99.w3.weight"]
    res = same(moe(BIG), t, compact=None)
    assert res["summary"]["tensors"]["match"] == n_tensors(BIG) - 1
    assert res["summary"]["tensors"]["missing"] == 1
    assert res["modules"]["layers.3.mlp.experts.99"]["verdict"] == "partial"
    w3 = entries_for(res, "layers.0.mlp.experts.0.w3.weight")
    assert len(w3) == 1 and w3[0]["count"] == sum(BIG) - 1


class Fp4Proj(nn.Module):
    """An fp4 linear: two values per int8 byte along ``in``, an e8m0 scale per 32 values of a row."""

    def __init__(self, i: int, o: int) -> None:
        super().__init__()
        self.in_features, self.out_features = i, o
        self.weight = nn.Parameter(torch.empty(o, i // 2, dtype=torch.int8), requires_grad=False)
        self.weight_scale_inv = nn.Parameter(torch.empty(o, i // 32, dtype=torch.float8_e8m0fnu), requires_grad=False)


@lru_cache(maxsize=None)
def fp4_moe():
    with torch.device("meta"):
        model = nn.Module()
        model.layers = nn.ModuleList(nn.Module() for _ in COUNTS)
        for layer, n in zip(model.layers, COUNTS):
            layer.mlp = nn.Module()
            layer.mlp.experts = nn.ModuleList(nn.Module() for _ in range(n))
            for e in layer.mlp.experts:
                for name, (i, o) in PROJ.items():
                    setattr(e, name, Fp4Proj(i, o))
    return record_of(model)


def fp4_ck() -> Tensors:
    t: Tensors = {}
    for li, n in enumerate(COUNTS):
        for e in range(n):
            for name, (i, o) in PROJ.items():
                t[f"layers.{li}.mlp.experts.{e}.{name}.weight"] = ("I8", (o, i // 2))
                t[f"layers.{li}.mlp.experts.{e}.{name}.weight_scale_inv"] = ("F8_E8M0", (o, i // 32))
    return t


@pytest.mark.parametrize("edit", ["none", "one_scale_gone", "no_scales", "u8", "scale_shape"])
def test_fp4_packed_experts(edit: str) -> None:
    t = fp4_ck()
    odd = "layers.1.mlp.experts.1.w2"
    if edit == "one_scale_gone":
        del t[f"{odd}.weight_scale_inv"]
    elif edit == "no_scales":
        t = {n: v for n, v in t.items() if not n.endswith("_scale_inv")}
    elif edit == "u8":
        t[f"{odd}.weight"] = ("U8", t[f"{odd}.weight"][1])
    elif edit == "scale_shape":
        t[f"{odd}.weight_scale_inv"] = ("F8_E8M0", (D, 3))
    res = same(fp4_moe(), t)
    n = len(PROJ) * sum(COUNTS)
    assert res["summary"]["tensors"]["match"] == n - (edit == "scale_shape")
    # fp4 counts twice per stored byte: the model's elements, matched
    e = entries_for(res, f"{odd}.weight")[0]
    assert e["model_elements"] == e["checkpoint_elements"] == D * FF
    assert res["summary"]["scales"]["paired"] == {"none": n, "one_scale_gone": n - 1, "no_scales": 0}.get(edit, n)


def test_module_paths_that_are_no_tree() -> None:
    """A hand-made record whose paths skip a parent ("a.0"): the module rows go entry by entry, the same on both."""
    rec = hand_record([("", "Root", {}, []), ("a", "A", {}, [])] +
                      [(f"a.{i}.b", "B", {}, [("weight", (2, 3))]) for i in range(3)])
    t = {f"a.{i}.b.weight": ("F32", (2, 3)) for i in range(3)}
    t["a.2.b.weight"] = ("F32", (2, 4))
    t["a.3.b.weight"] = ("F32", (2, 3))
    res = same(rec, t)
    assert res["modules"]["a.0"] == {"verdict": "match", "model": 6, "checkpoint": 6, "in_model": False}
    assert res["modules"]["a.2.b"]["verdict"] == "mismatch"
    assert res["modules"]["a.3"]["in_model"] is False


class TwoTowers(nn.Module):
    """``model.layers...`` and ``layers...`` both: a checkpoint name that needs a prefix may find either."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Moe((2, 3), False, "mlp")
        self.layers = nn.ModuleList(Layer(n, False, "mlp") for n in (1, 2))


def test_ambiguous_prefixes_fall_back() -> None:
    with torch.device("meta"):
        rec = record_of(TwoTowers())
    t = {f"model.{n}": v for n, v in ck((2, 3)).items()}  # model.model... and model.layers...: as is, or stripped
    t |= {f"bert.{n}": v for n, v in ck((1, 2)).items()}  # bert.layers...: stripped, or model. added for some
    res = same(rec, t, family=False)
    # the per-tensor path: model.layers... as is (the first tower), bert.layers... stripped (the second)
    assert res["verdict"] == "match"
    assert res["summary"]["tensors"]["match"] == n_tensors((2, 3)) + n_tensors((1, 2))
    assert expand(entries_for(res, "layers.0.norm.weight")[0]["checkpoint"][0]) == {"bert.layers.0.norm.weight",
                                                                                     "bert.layers.1.norm.weight"}


class Stack(nn.Module):
    """Tensors named by an index (a ParameterList) beside a module of the same layer."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.experts = nn.ParameterList([nn.Parameter(torch.empty(4, 8)) for _ in range(n)])
        self.norm = nn.LayerNorm(8, bias=False)


def test_names_that_start_or_end_with_an_index() -> None:
    with torch.device("meta"):
        seq = record_of(nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)]))  # 0.weight, 0.bias, ...
        plist = nn.Module()
        plist.layers = nn.ModuleList(Stack(n) for n in (2, 3))
        plist = record_of(plist)  # layers.0.experts.1, ...
    # a name that starts with an index: a prefix stripped could reach into it, so the per-tensor path
    t = {f"model.{i}.{w}": ("F32", (8, 8) if w == "weight" else (8,)) for i in range(4) for w in ("weight", "bias")}
    t["model.2.bias"] = ("F32", (9,))
    res = same(seq, t, family=False)
    assert res["summary"]["tensors"] == {"match": 7, "mismatch": 1, "missing": 0, "checkpoint-only": 0}
    # a name that ends with one: a family of its own
    t = {f"layers.{li}.experts.{e}": ("F32", (4, 8)) for li, n in enumerate((2, 3)) for e in range(n)}
    t |= {f"layers.{li}.norm.weight": ("F32", (8,)) for li in range(2)}
    del t["layers.1.experts.2"]
    t["layers.1.experts.3"] = ("F32", (4, 8))
    res = same(plist, t)
    assert res["summary"]["tensors"] == {"match": 6, "mismatch": 0, "missing": 1, "checkpoint-only": 1}
    assert res["modules"]["layers.1.experts"]["verdict"] == "mismatch"  # (an unexplained extra in it)
    assert [c["name"] for c in res["checkpoint_only"]] == ["layers.1.experts.3"]


def test_indices_with_leading_zeros() -> None:
    """ModuleDict keys "1", "01", "007": told apart as the names they are."""
    with torch.device("meta"):
        m = nn.Module()
        m.blocks = nn.ModuleDict({k: nn.Linear(4, 4, bias=False) for k in ["0", "1", "01", "007", "10"]})
        rec = record_of(m)
    t = {f"model.blocks.{k}.weight": ("F32", (4, 4)) for k in ["0", "1", "01", "007", "10"]}
    t["model.blocks.01.weight"] = ("F32", (4, 5))
    t["model.blocks.7.weight"] = ("F32", (4, 4))
    res = same(rec, t, family=False)  # (names with such numerals take the per-tensor path)
    bad = [e for e in res["tensors"] if e["verdict"] == "mismatch"]
    assert [e["model"] for e in bad] == ["blocks.01.weight"]
    assert res["summary"]["tensors"] == {"match": 4, "mismatch": 1, "missing": 0, "checkpoint-only": 1}
    assert res["checkpoint_only"][0]["name"] == "model.blocks.7.weight"


def test_compact_names_keep_leading_zeros() -> None:
    """A numeral with a leading zero is a name of its own: compact names never write "01" as "1" or "007" as "7"."""
    keys = ["0", "1", "01", "007", "10"]
    with torch.device("meta"):
        m = nn.Module()
        m.blocks = nn.ModuleDict({k: nn.Linear(4, 4, bias=False) for k in keys})
        rec = record_of(m)
    res = same(rec, {f"blocks.{k}.weight": ("F32", (4, 4)) for k in keys}, family=False)
    assert sum(e.get("count", 1) for e in res["tensors"]) == 5
    named = [n for e in res["tensors"] for n in expand(e["model"])]
    assert sorted(named) == sorted(f"blocks.{k}.weight" for k in keys)  # each once, as the model names it
    assert sorted(c for e in res["tensors"] for n in e["checkpoint"] for c in expand(n)) == sorted(named)

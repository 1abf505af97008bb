"""Layers wherever they live: a ModuleDict of blocks (`layers["0"]`, as LLM training codebases keep them) is the
layer list of `inspect layer N`, grouping and cost; a second stack of blocks is a stack of its own, named when `layer
N` picks the first; flex attention's `assert isinstance(mask, BlockMask)` passes in the meta pass. Counts and shapes
derived from the fixtures' configs and from a real CPU run of the same fixture."""

from __future__ import annotations


import pytest
import torch

from helpers import ANYINPUT, anyinput
from realrun import real_calls, record_calls

import archviz
from archviz.cost.measure import measure
from archviz.cost.options import CostOptions
from archviz.cost.report import cost_report
from archviz.errors import ArchvizError
from archviz.group import group, layer_note, layer_stacks, resolve_target
from archviz.records import to_json_dict
from archviz.shapes import trace_shapes
from archviz.walk import walk

FIX = ANYINPUT
_module = anyinput


def test_a_module_dict_and_a_second_stack():
    m = _module("stacks")
    cfg = m.Cfg()
    rec = group(walk(archviz.build(str(FIX / "stacks.py"))))
    assert [s.path for s in layer_stacks(rec)] == ["layers", "single_blocks"]
    assert resolve_target(rec, ["layer", "1"]) == "layers.1"
    note = layer_note(rec, ["layer", "1"])
    assert note.startswith(f"layer 1 of layers ({cfg.n_double} blocks")
    assert f"other stacks: single_blocks ({cfg.n_single})" in note
    with pytest.raises(ArchvizError) as e:
        resolve_target(rec, ["layer", str(cfg.n_double)])
    assert e.value.message == (f"layer {cfg.n_double}: layers has {cfg.n_double} layers (0–{cfg.n_double - 1}); "
                               f"other stacks: single_blocks ({cfg.n_single})")
    assert rec.extra("grouping")["layers"]["path"] == "layers"


def test_cost_gives_each_stack_its_kind():
    m = _module("stacks")
    cfg = m.Cfg()
    T = 32
    r = cost_report(measure(str(FIX / "stacks.py"), options=CostOptions(seq=T)))
    d = cfg.dim
    double = 2 * T * (d * d + d * 4 * d + 4 * d * d)  # attn, mlp up, mlp down (Linear: 2 FLOPs a multiply-add)
    single = 2 * T * 2 * d * d
    kinds = {k.kind: (k.layers, k.flops) for k in r.prefill.by_kind}
    assert kinds["single_blocks"] == (cfg.n_single, cfg.n_single * single)
    assert kinds["layer"] == (cfg.n_double, cfg.n_double * double)
    rows = {x.path: (x.kind, x.count, x.flops) for x in r.prefill.modules}
    assert rows["single_blocks.0"] == ("single_blocks", cfg.n_single, single)
    assert "single_blocks" not in rows  # never one module "outside the layers"


def test_flex_attention_and_a_module_dict_of_layers():
    """The forward's `attention_masks: Optional[BlockMask]` gets a causal BlockMask on meta, so the attention's
    assert holds; shapes equal a real CPU run given the mask the codebase's trainer builds."""
    m = _module("flexattn")
    cfg = m.Config()
    built = archviz.build(str(FIX / "flexattn.py"))
    rec = trace_shapes(built, walk(built))
    assert resolve_target(group(rec), ["layer", "2"]) == "layers.2"
    shapes = rec.extra("shapes")
    B, T = shapes["B"], shapes["T"]
    import torch.nn.attention.flex_attention as fa

    saved = fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True  # the real run eager too: no compiler needed on CPU
    try:
        model = m.Decoder(cfg)
        real = real_calls(model, torch.zeros(B, T, dtype=torch.long), attention_masks=m.causal_mask(B, T))
    finally:
        fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = saved
    assert record_calls(to_json_dict(rec), numeric={"B": B, "T": T}) == real
    assert [m.path for m in rec.modules if m.parent == "layers"] == [f"layers.{i}" for i in range(cfg.n_layers)]


def test_a_mask_sized_from_the_data_is_expanded():
    """positions = arange(T): their max is T - 1, so the mask of max + 1 rows expands to [B, H, T, T]."""
    m = _module("ddmask")
    built = archviz.build(str(FIX / "ddmask.py"))
    rec = to_json_dict(trace_shapes(built, walk(built)))
    B, T = rec["extras"]["shapes"]["B"], rec["extras"]["shapes"]["T"]
    real = real_calls(m.M(m.Cfg()), torch.zeros(B, T, dtype=torch.long))
    assert record_calls(rec, numeric={"B": B, "T": T}) == real


def test_a_dict_of_towers_is_no_stack():
    """A ModuleDict of two different towers holds layers; it is not one: the towers' own lists are."""
    from helpers import hand_record

    rec = hand_record([
        ("", "Top", {}, []),
        ("towers", "ModuleDict", {}, []),
        ("towers.text", "TextTower", {}, []),
        ("towers.text.blocks", "ModuleList", {}, []),
        *[(f"towers.text.blocks.{i}", "Block", {}, []) for i in range(3)],
        *[(f"towers.text.blocks.{i}.fc", "Linear", {}, [("weight", (8, 8))]) for i in range(3)],
        ("towers.vision", "VisionTower", {}, []),
        ("towers.vision.stages", "ModuleList", {}, []),
        *[(f"towers.vision.stages.{i}", "Stage", {}, []) for i in range(2)],
        *[(f"towers.vision.stages.{i}.conv", "Conv2d", {}, [("weight", (4, 4))]) for i in range(2)],
    ])
    assert [s.path for s in layer_stacks(rec)] == ["towers.text.blocks", "towers.vision.stages"]

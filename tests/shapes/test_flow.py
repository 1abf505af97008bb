"""The dataflow of each module's forward (`ModuleRecord.flow`, issue 23 item 2): the order of child calls and own ops,
and which earlier value each consumed, on small models written here, checked against the same code run for real on
CPU; both records formats carry it; the site folds a long layer list by kind."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch

import archviz
from archviz.records import FIELDS, SCHEMA_V3, dumps, dumps_compact, loads
from archviz.render.site import render_site
from archviz.shapes import trace_shapes
from archviz.sources.dispatch import build
from archviz.sources.options import BuildOptions
from archviz.walk import walk
from helpers import FLOW_BLOCKS



@pytest.fixture()
def blocks(tmp_path, monkeypatch):
    (tmp_path / "flow_blocks.py").write_text(FLOW_BLOCKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "flow_blocks"
    sys.modules.pop("flow_blocks", None)


def _traced(spec: str):
    built = archviz.build(spec)
    return trace_shapes(built, walk(built))


def _real_order(spec: str, B: int, T: int) -> tuple[list[str], dict[str, tuple]]:
    """The same model run for real on CPU: the order its layer 0's children are called in and their output shapes."""
    model = build(spec, BuildOptions(device="cpu")).model
    order: list[str] = []
    shapes: dict[str, tuple] = {}

    def seen(name: str):
        def hook(mod, args, out) -> None:
            order.append(name)
            shapes.setdefault(name, tuple(out.shape))
        return hook

    for name, child in model.layers[0].named_children():
        child.register_forward_hook(seen(name))
    model(torch.zeros(B, T, dtype=torch.long))
    return order, shapes


def test_flow_has_the_forward_order_and_the_residual_adds(blocks):
    record = _traced(f"{blocks}:small")
    shapes_info = record.extra("shapes")
    B, T = shapes_info["B"], shapes_info["T"]
    block = record.module("layers.0").flow
    calls = [s.name for s in block.steps if s.kind == "call"]
    order, real_shapes = _real_order(f"{blocks}:small", B, T)
    assert calls == order == ["norm1", "attn", "norm2", "mlp"]
    # h = x + attn(norm1(x)); out = h + mlp(norm2(h)): each add consumes the block's input or the first add's
    # output, and the call just before it
    steps = block.steps
    idx = {s.name: i for i, s in enumerate(steps) if s.kind == "call"}
    adds = [i for i, s in enumerate(steps) if s.kind == "op" and s.name == "add"]
    assert len(adds) == 2
    first, second = adds
    assert steps[idx["norm1"]].inputs == (-1,)
    assert steps[idx["attn"]].inputs == (idx["norm1"],)
    assert set(steps[first].inputs) == {-1, idx["attn"]}  # x + attn(...): the residual of the input
    assert steps[idx["norm2"]].inputs == (first,)
    assert steps[idx["mlp"]].inputs == (idx["norm2"],)
    assert set(steps[second].inputs) == {first, idx["mlp"]}  # h + mlp(...): the residual of h
    assert block.outputs == (second,)
    assert first < idx["norm2"] < idx["mlp"] < second
    d = real_shapes["mlp"][-1]
    assert steps[second].shapes == (("B", "T", d),) and real_shapes["mlp"] == (B, T, d)
    # the root: embed, the layers in order, norm, head; each consuming the one before
    root = record.module("").flow
    assert [s.name for s in root.steps if s.kind == "call"] == ["embed", "layers.0", "layers.1", "norm", "head"]
    assert [s.inputs for s in root.steps] == [(-1,), (0,), (1,), (2,), (3,)]
    # leaves have no flow; the attention's own ops sit between its two projections
    assert record.module("layers.0.attn.qkv").flow is None
    attn = record.module("layers.0.attn").flow
    names = [s.name for s in attn.steps]
    assert names[0] == "qkv" and names[-1] == "out" and "_softmax" in names
    # a memo answer (layers.1 ran from layers.0's shapes) carries the same flow
    assert record.module("layers.1").flow == block


def test_flow_names_the_inputs_by_the_forward_arguments(blocks):
    """Each input of a module's flow is named by the forward parameter it was passed as (ArgBlock.forward's
    signature, written above: x, freqs, a pair, *rest, mask=); the site's picture shows those names."""
    record = _traced(f"{blocks}:arguments")
    block = record.module("block")
    assert block.flow.inputs == ("x", "freqs", "pair[0]", "pair[1]", "rest[0]", "mask")
    assert len(block.calls[0].inputs) == len(block.flow.inputs)
    assert record.module("").flow.inputs == ("ids",)
    for back in (loads(dumps(record)), loads(dumps_compact(record))):
        assert back.module("block").flow == block.flow
    from archviz.group import group

    files = render_site([group(record)])
    page = next(v.decode() for k, v in files.items() if k.endswith("/n/block.html"))
    svg = re.search(r'<svg class="dataflow".*?</svg>', page, re.S).group(0)
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    # the two tensors of `pair` have one shape: one box for both (issue 32 item 3)
    assert [t.split(" ")[0] for t in texts[:5]] == ["x", "freqs", "pair[0–1]", "rest[0]", "mask"]
    assert texts[2].startswith("pair[0–1] ×2 [B, T, 16")
    assert texts[1] == "freqs [16 d]"  # torch.ones(d): the width, not B or T, named as its child `nn.Linear(d, d)`
    assert not any(t.startswith("input") for t in texts)


def test_flow_survives_both_records_formats_and_old_files_still_read(blocks):
    record = _traced(f"{blocks}:small")
    v1 = loads(dumps(record))
    v3 = loads(dumps_compact(record))
    for back in (v1, v3):
        assert back.module("layers.0").flow == record.module("layers.0").flow
        assert back.module("").flow == record.module("").flow
    # a compact file written before the flow field: no "flow" in its fields, no values for it
    d3 = json.loads(dumps_compact(record))
    assert d3["schema"] == SCHEMA_V3 and d3["fields"][-1] == "flow" == FIELDS[-1]
    d3["fields"], d3["values"] = d3["fields"][:-1], d3["values"][:-1]
    d3["rows"] = [row[:-1] for row in d3["rows"]]
    old = loads(json.dumps(d3))
    assert old.module("layers.0").flow is None
    assert old.module("layers.0").calls == record.module("layers.0").calls
    # version 1 without the key
    d1 = json.loads(dumps(record))
    for m in d1["modules"]:
        m.pop("flow", None)
    assert loads(json.dumps(d1)).module("").flow is None


def _overview_boxes(record) -> list[str]:
    from archviz.group import group

    files = render_site([group(record)])
    slug = next(k.split("/")[0] for k in files if k.endswith("/index.html") and k.count("/") == 1)
    html = files[f"{slug}/index.html"].decode()
    svg = re.search(r'<svg class="dataflow".*?</svg>', html, re.S)
    assert svg, "no dataflow picture on the overview"
    return re.findall(r'class="box (\w+)"[^>]*>(?:<title>([^<]*)</title>)', svg.group(0))


def test_overview_folds_many_layers_of_two_kinds(blocks):
    record = _traced(f"{blocks}:two_kinds")
    n = len(record.module("layers").children)
    kinds = [record.module(c).class_name for c in record.module("layers").children]
    dense = kinds.count("Block")
    assert (dense, n - dense) == (3, 9) and kinds == ["Block"] * 3 + ["MoEBlock"] * 9
    boxes = _overview_boxes(record)
    folds = [t for k, t in boxes if k == "fold"]
    assert len(folds) == 2, boxes
    assert folds[0].startswith(f"layers 0–{dense - 1} · ") and f"×{dense}" in folds[0] and "Block" in folds[0]
    assert folds[1].startswith(f"layers {dense}–{n - 1} · ") and f"×{n - dense}" in folds[1] and "MoEBlock" in folds[1]
    assert not any(k == "call" and t.startswith("layers.") for k, t in boxes)  # no box per layer


def test_overview_folds_a_repeating_pattern_of_kinds(blocks):
    record = _traced(f"{blocks}:alternating")
    n = len(record.module("layers").children)
    folds = [t for k, t in _overview_boxes(record) if k == "fold"]
    assert len(folds) == 1, folds
    assert folds[0].startswith(f"layers 0–{n - 1} · ") and f"×{n // 2}" in folds[0]

"""Dims cut from T read as the expression that gives them (issue 32 item 2), on tests/data/derived: compression by
ratios 4 and 128, a window of cached positions, chunks, a compressed cache after the window, the sequence and its
compression, routing over experts, and a dim the code makes 0 at every size. The pass runs at a T that is a
multiple of the config's ratios, window and chunk above them (so nothing cut from T is 0), and each recorded
expression is checked against the model run for real on CPU at two sizes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import archviz
from archviz.probe import real as probe_real
from archviz.shapes import trace_shapes
from archviz.sources.dispatch import build
from archviz.sources.options import BuildOptions
from archviz.walk import walk

DATA = Path(__file__).resolve().parents[1] / "data" / "derived"
SPEC, CONFIG = str(DATA / "model.py"), str(DATA / "config.json")


@pytest.fixture(scope="module")
def traced():
    built = archviz.build(SPEC, config=CONFIG)
    return trace_shapes(built, walk(built))


def _at(d, B: int, T: int):
    """A recorded dim at (B, T), computed here: an int as it is, a symbol or an expression of B and T."""
    if not isinstance(d, str):
        return d
    return int(eval(d.replace("·", "*"), {"__builtins__": {}}, {"B": B, "T": T, "ceil": math.ceil}))


def _real(B: int, T: int) -> dict[str, tuple]:
    """The model built on CPU and run for real at (B, T): each module's first input and output shapes."""
    real = build(SPEC, BuildOptions(config=CONFIG, device="cpu"))
    probe_real.init_random(real.model, real.config)
    seen: dict[str, tuple] = {}
    for name, mod in real.model.named_modules():
        def hook(m, args, out, name=name):
            seen.setdefault(name, (tuple(args[0].shape), tuple(out.shape)))
        mod.register_forward_hook(hook)
    with torch.no_grad():
        real.model(torch.randint(0, 64, (B, T)))
    return seen


def test_the_pass_runs_at_a_multiple_of_the_ratios_window_and_chunk(traced):
    cfg = json.loads(Path(CONFIG).read_text())
    cuts = [*cfg["compress_ratios"], cfg["window_size"], cfg["chunk_size"]]
    T = traced.extra("shapes")["T"]
    assert all(T % c == 0 for c in cuts) and T > max(cuts)


def test_derived_dims_read_as_the_expression_that_holds_at_two_sizes(traced):
    cfg = json.loads(Path(CONFIG).read_text())
    r4, r128 = cfg["compress_ratios"]
    w, c = cfg["window_size"], cfg["chunk_size"]
    expected = {  # module -> the dim along positions of its output, as the code computes it
        "compress.0": f"T/{r4}", "compress.1": f"T/{r128}", "windowed": f"T+{w}", "chunked": f"T/{c}",
        "cached": f"T/{r4}+{w}", "both": f"T+T/{r4}", "empty": 0, "moe": "T",
    }
    got = {path: traced.module(path).calls[0].outputs[0][1] for path in expected}
    assert got == expected
    shapes = traced.extra("shapes")
    B, T = shapes["B"], shapes["T"]
    # the recorded shapes, computed at the pass's size and at another, are those of a real run at each
    for b, t in ((B, T), (3, T + 128)):
        real = _real(b, t)
        for path in expected:
            m = traced.module(path)
            ins, outs = m.calls[0].inputs[0], m.calls[0].outputs[0]
            assert (tuple(_at(d, b, t) for d in ins), tuple(_at(d, b, t) for d in outs)) == real[path], (path, b, t)
    # routing: every expert's rows are the routed count R = ceil(B·T·k/E)
    R = math.ceil(B * T * cfg["n_activated_experts"] / cfg["n_routed_experts"])
    assert traced.module("moe.experts.0").calls[0].inputs[0] == ("R", cfg["dim"]) and R in shapes["routed_sizes"]


def test_no_dim_is_zero_unless_the_code_makes_it_zero_at_every_size(traced):
    zero = set()
    for m in traced.modules:
        for call in m.calls:
            if any(d == 0 for s in (*call.inputs, *call.outputs) for d in s):
                zero.add(m.path)
        if m.flow is not None and any(d == 0 for st in m.flow.steps for s in st.shapes for d in s):
            zero.add(m.path)
    # `empty` takes h.new_zeros(b, 0, d); the root's flow holds that op and `empty`'s call
    assert zero == {"empty", ""}


def test_op_shapes_in_the_flows_take_the_expressions_too(traced):
    """An op's own shape (no module call has it) is named with the second pass's same step as evidence: the
    compressor's view is [B, T/4, 4, dim], as `x.view(b, t // ratio, ratio, d)` computes it."""
    cfg = json.loads(Path(CONFIG).read_text())
    r4, r128 = cfg["compress_ratios"]
    for path, r in (("compress.0", r4), ("compress.1", r128)):
        views = [s.shapes[0] for s in traced.module(path).flow.steps if s.name == "view"]
        assert views == [("B", f"T/{r}", r, cfg["dim"])], views
    root = [s.shapes[0] for s in traced.module("").flow.steps if s.name == "view"]
    assert ("B", f"T/{cfg['chunk_size']}", cfg["chunk_size"], cfg["dim"]) in root

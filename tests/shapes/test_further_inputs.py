"""A forward's further inputs from what its code does with them (issue 42 item 5): a flow transformer's seven
inputs (latent patches and text features sized by the Linear each is handed to and tested for rank 3, position ids
over the rotary embedding's three axes, a timestep, a pooled vector, a guidance strength the code requires) made
with no --input; shapes equal a real CPU run of the same fixture, and `cost` is per denoising step, its FLOPs
those of torch's FlopCounterMode over the real run at the same sizes."""

from __future__ import annotations

import json

import torch

from helpers import ANYINPUT, anyinput
from realrun import real_calls, record_calls

import archviz
from archviz.records import to_json_dict
from archviz.shapes import trace_shapes
from archviz.shapes.streams import STREAM_DEFAULT
from archviz.walk import walk


def _inputs(p, B: int, T: int, T_txt: int) -> tuple:
    return (torch.randn(B, T, p.in_channels), torch.randn(B, T, len(p.axes_dim)),
            torch.randn(B, T_txt, p.context_in_dim), torch.randn(B, T_txt, len(p.axes_dim)), torch.rand(B),
            torch.randn(B, p.vec_in_dim), torch.rand(B))


def test_seven_inputs_from_the_modules_that_take_them():
    m = anyinput("flowjoint")
    p = m.FlowParams()
    built = archviz.build(str(ANYINPUT / "flowjoint.py"))
    rec = to_json_dict(trace_shapes(built, walk(built)))
    shapes = rec["extras"]["shapes"]
    B, T = shapes["B"], shapes["T"]
    axes = len(p.axes_dim)
    root = rec["modules"][0]["calls"][0]["inputs"]
    # the text is a sequence of its own (T_txt: no length for it in the code or config, the stated default)
    assert root == [["B", "T", p.in_channels], ["B", "T", axes], ["B", "T_txt", p.context_in_dim],
                    ["B", "T_txt", axes], ["B"], ["B", p.vec_in_dim], ["B"]]
    T_txt = shapes["named"]["T_txt"]
    assert T_txt == STREAM_DEFAULT
    numeric = {"B": B, "T": T, "T_txt": T_txt, "T+T_txt": T + T_txt}  # the joint sequence: text and image patches
    assert record_calls(rec, numeric=numeric) == real_calls(m.FlowJoint(p), *_inputs(p, B, T, T_txt))
    notes = " ".join(shapes["notes"])
    assert "guidance=[B] float32" in notes and f"y=[B, {p.vec_in_dim}] float32 (what self.vector_in takes)" in notes


def test_cost_is_per_denoising_step_at_the_real_runs_flops(archviz_cli):
    from torch.utils.flop_counter import FlopCounterMode

    m = anyinput("flowjoint")
    p = m.FlowParams()
    T = 16
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        m.FlowJoint(p).eval()(*_inputs(p, 1, T, STREAM_DEFAULT))
    r = archviz_cli("cost", ANYINPUT / "flowjoint.py", "--seq", T, "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["unit"] == "denoising step" and d["decode"] is None
    assert d["prefill"]["flops"] == fc.get_total_flops()
    assert d["inputs"].startswith(f"[1, {T}, {p.in_channels}], [1, {T}, {len(p.axes_dim)}], "
                                  f"[1, {STREAM_DEFAULT}, {p.context_in_dim}]")


def test_an_optional_timestep_the_code_reads_is_given():
    """`forward(x, timesteps=None, y=None)`: the timestep is given ([B]) since the code reads it; the optional label
    is left out. Shapes equal a real CPU run at the pass's sizes."""
    m = anyinput("unetopt")
    cfg = m.UNetCfg()
    built = archviz.build(str(ANYINPUT / "unetopt.py"))
    rec = to_json_dict(trace_shapes(built, walk(built)))
    B = rec["extras"]["shapes"]["B"]
    image = (cfg.in_channels, cfg.image_size, cfg.image_size)  # the config's image size and the Conv2d's channels
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", *image], ["B"]]
    assert record_calls(rec, numeric={"B": B}) == real_calls(m.UNetOpt(cfg), torch.zeros(B, *image), torch.rand(B))


def test_a_config_that_says_unset_with_minus_one_builds():
    """`num_groups_up: -1` in the JSON (the code's own default, "the same as num_groups") is no negative size."""
    m = anyinput("unetopt")
    cfg = m.UNetCfg(**json.loads((ANYINPUT / "unetopt.json").read_text()))
    record = archviz.load(str(ANYINPUT / "unetopt.py"), config=str(ANYINPUT / "unetopt.json"))
    assert record.summary.parameters == sum(p.numel() for p in m.UNetOpt(cfg).parameters())

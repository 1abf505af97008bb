"""Ops grouped by the Python function that ran them (issue 32 items 1, 3, 4), on a small model written here: the
meta pass records, for each op, the function calls between its module's forward and the op (a helper of the model's
own, a nested helper it calls, a method); the folded forward draws a run of ops in one call as one item named after
the function with its def line, layout ops fold into the edges, the tensors of one argument with one shape are one
input, and `archviz inspect --flow` prints it as a tree. Expected values come from the source (its def lines, read
with ast) and from the helpers run for real on CPU under a dispatch mode that lists their aten ops."""

from __future__ import annotations

import ast
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import archviz
from archviz.records import dumps, dumps_compact, loads
from archviz.render.flowfold import FlowNaming, flow_items, function_parts
from archviz.shapes import trace_shapes
from archviz.walk import walk

ROPE = '''
import torch
import torch.nn.functional as F
from torch import nn


def half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rotate(x, cos, sin):
    return x * cos + half(x) * sin


class Attn(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.o = nn.Linear(d, d)

    def _scores(self, q, k):
        return torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1)

    def forward(self, x, rope):
        cos, sin = rope
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = self.k(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q = rotate(q, cos, sin)
        k = rotate(k, cos, sin)
        a = self._scores(q, k) @ k
        return self.o(F.silu(a.transpose(1, 2).reshape(b, t, d)))


class Net(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.embed = nn.Embedding(64, d)
        self.attn = Attn(d, heads)
        self.dh = d // heads

    def forward(self, ids):
        x = self.embed(ids)
        pos = torch.arange(ids.shape[1], device=x.device, dtype=torch.float32)
        ang = pos[:, None] * torch.ones(self.dh, device=x.device)
        return self.attn(x, (ang.cos()[None, None], ang.sin()[None, None]))


def net():
    return Net()
'''


@pytest.fixture(scope="module")
def rope(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rope")
    (tmp / "flow_rope.py").write_text(ROPE)
    sys.path.insert(0, str(tmp))
    try:
        built = archviz.build("flow_rope:net")
        record = trace_shapes(built, walk(built))
        import flow_rope

        yield record, flow_rope, tmp
    finally:
        sys.path.remove(str(tmp))
        sys.modules.pop("flow_rope", None)


def _def_lines() -> dict[str, int]:
    tree = ast.parse(ROPE)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node.lineno
    return out


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def _cpu_ops(fn, *args) -> list[str]:
    with _Ops() as mode:
        fn(*args)
    return mode.names


def test_each_op_records_the_function_calls_it_ran_in(rope):
    record, mod, _ = rope
    flow = record.module("attn").flow
    lines = _def_lines()
    names = [f.name for f in flow.functions]
    # rotate twice (q, k), each calling half once; the method _scores once; F.silu's own ops in torch.nn.functional
    assert names.count("rotate") == 2 and names.count("half") == 2
    assert "Attn._scores" in names and "silu" in names
    for f in flow.functions:
        if f.name in ("rotate", "half"):
            assert f.file.endswith("flow_rope.py") and f.line == lines[f.name], f
        if f.name == "half":
            assert flow.functions[f.parent].name == "rotate"  # nested: the call it ran inside
            assert f.site == lines["rotate"] + 1  # rotate's line that calls it
        if f.name == "rotate":
            assert f.parent == -1
    rotates = [i for i, f in enumerate(flow.functions) if f.name == "rotate"]
    sites = sorted(flow.functions[i].site for i in rotates)
    body = ROPE.splitlines()
    assert [body[s - 1].strip() for s in sites] == ["q = rotate(q, cos, sin)", "k = rotate(k, cos, sin)"]

    # the ops of one rotate call, in order, are those rotate runs for real on CPU
    first = rotates[0]
    inside = [s for s in flow.steps if s.function >= 0 and (s.function == first or
                                                            flow.functions[s.function].parent == first)]
    ran = []
    for s in inside:
        ran += [s.name] * s.count
    x, cos, sin = torch.randn(2, 4, 5, 8), torch.randn(1, 1, 5, 8), torch.randn(1, 1, 5, 8)
    assert ran == _cpu_ops(mod.rotate, x, cos, sin)
    # the forward's own ops have no function; the records carry the functions both ways
    assert all(s.function == -1 for s in flow.steps if s.kind == "call")
    for back in (loads(dumps(record)), loads(dumps_compact(record))):
        assert back.module("attn").flow == flow


def _fold(record):
    m = record.module("attn")
    return flow_items(m, m.flow, FlowNaming(shape=lambda dims: "[" + ", ".join(map(str, dims)) + "]",
                                            node_of=lambda rel: rel, node_info=lambda nid, rels: (nid, None, "")),
                      inputs=tuple("[" + ", ".join(map(str, s)) + "]" for s in m.calls[0].inputs),
                      outputs=tuple("[" + ", ".join(map(str, s)) + "]" for s in m.calls[0].outputs))


def test_the_fold_draws_one_item_per_function_call_and_layout_ops_on_the_edges(rope):
    record, _, _ = rope
    items, cut = _fold(record)
    assert cut == 0
    lines = _def_lines()
    kinds = [(it.kind, it.label) for it in items]
    # the forward: x and the two rope tensors (one argument, one shape: one input), q, k, a box per rotate call,
    # the _scores method, the matmul (aten bmm), F.silu (one op of torch's: a pill), o, the output
    assert kinds == [("in", "x"), ("in", "rope[0–1] ×2"), ("call", "q"), ("call", "k"), ("fn", "rotate"),
                     ("fn", "rotate"), ("fn", "Attn._scores"), ("op", "bmm"), ("op", "silu"), ("call", "o"),
                     ("out", "output")]
    rot = items[4]
    assert rot.sub == f"flow_rope.py:{lines['rotate']}"
    # q's view and transpose fold into the edge from q to the first rotate, which they label
    q = 2
    assert q in rot.inputs and 1 in rot.inputs and rot.via[q].startswith("view, transpose → [B, 4, T, 8]")
    assert items[1].sub == "[1, 1, T, 8]"
    # a function item expands to the ops of its call: rotate's and, inside it, half's
    parts = {f"#flow-fn-{p['step']}": p for p in function_parts(record.module("attn").flow, str)}
    ops = [it.label for it in parts[rot.href]["items"] if it.kind == "op"]
    assert ops == ["mul", "slice (half)", "neg (half)", "slice (half)", "cat (half)", "mul", "add"]


def test_inspect_flow_prints_the_folded_forward_as_a_tree(rope, monkeypatch):
    from typer.testing import CliRunner

    from archviz.cli import app

    _, _, tmp = rope
    monkeypatch.syspath_prepend(str(tmp))
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(app, ["inspect", "flow_rope:net", "attn", "--flow"])
    assert result.exit_code == 0, result.output
    lines = _def_lines()
    out = result.output
    assert "attn (Attn) forward" in out
    assert f"rotate · flow_rope.py:{lines['rotate']}" in out
    assert "cat (half) [B, 4, T, 8]" in out  # the ops inside open below it, with their shapes
    assert "in rope[0–1] ×2 [1, 1, T, 8]" in out
    assert "view, transpose → [B, 4, T, 8]" in out
    # the model's tree: the root's forward opens attn's below its call
    root = CliRunner().invoke(app, ["inspect", "flow_rope:net", "--flow", "--depth", "2"])
    assert root.exit_code == 0, root.output
    assert "attn (Attn)" in root.output and "rotate · flow_rope.py" in root.output

"""Records that share equal values: the walk makes equal tensor records and totals once (repeated blocks hold the same
objects), and the compact writer tells values apart by identity first. Neither may change a record or a byte."""

from __future__ import annotations

import json
import pathlib

import pytest

import archviz
from archviz.records import FIELDS, dumps, dumps_compact, loads
from archviz.shapes import trace_shapes
from archviz.walk import classify_module, walk
from archviz.walk.walker import preorder

TESTS = pathlib.Path(__file__).resolve().parent
DSV41 = TESTS / "fixtures" / "dsv41like"


@pytest.fixture(scope="module")
def odd():
    """The odd factory model (tests/data/factories/odd_shared.py), built and traced: (built, record)."""
    import sys

    sys.path.insert(0, str(TESTS / "data" / "factories"))
    try:
        built = archviz.build("odd_shared:build")
        return built, trace_shapes(built, walk(built))
    finally:
        sys.path.remove(str(TESTS / "data" / "factories"))


@pytest.fixture(scope="module")
def v41():
    built = archviz.build(str(DSV41))
    return trace_shapes(built, walk(built), batch=2, seq=8)


def _reference_compact(record) -> tuple[list, list]:
    """(values, a row per module: parent, name, value indices) of the compact file worked out plainly: each module's
    field value found by == among the values seen before (no hashing), the value written in version 1's JSON form of
    the first module that held it."""
    v1 = json.loads(dumps(record))["modules"]
    left_out = {"calls": [], "call_sites": [], "assumptions": [], "kernels": [], "dims": [], "flow": None}
    seen: list[list] = [[] for _ in FIELDS]
    values: list[list] = [[] for _ in FIELDS]
    rows = []
    row_of = {}
    for i, (m, d) in enumerate(zip(record.modules, v1)):
        row_of[m.path] = i
        row = [-1 if not m.path else row_of[m.path.rpartition(".")[0]], m.path.rpartition(".")[2]]
        for k, f in enumerate(FIELDS):
            if f == "children":
                v = tuple(c.rpartition(".")[2] for c in m.children)
                written = list(v)
            else:
                v = getattr(m, f)
                written = d.get(f, left_out.get(f))
            j = next((j for j, x in enumerate(seen[k]) if x == v), None)
            if j is None:
                j = len(seen[k])
                seen[k].append(v)
                values[k].append(written)
            row.append(j)
        rows.append(row)
    return values, rows


def test_the_walk_shares_equal_tensor_records_and_totals(odd):
    _, rec = odd
    a, b = rec.module("layers.0.experts.0.w1"), rec.module("layers.2.experts.3.w1")
    assert a.tensors is b.tensors and a.own is b.own and a.totals is b.totals
    assert rec.module("layers.0.experts.0").totals is rec.module("layers.1.experts.2").totals
    # the sharing changes no count: one expert's w1 is 16 x 8, its w2 8 x 16
    assert a.tensors[0].shape == (16, 8) and a.totals.parameters == 16 * 8
    assert rec.module("layers.1.experts.0").totals.parameters == 2 * 16 * 8
    # what is not equal is not shared: the tied head is an alias of the embedding, the buffer an alias after layer 0
    assert [(t.name, t.kind, t.alias_of) for t in rec.module("head").tensors] == [("weight", "alias", "embed.weight")]
    assert [t.kind for t in rec.module("layers.0").tensors] == ["buffer"]
    assert [t.kind for t in rec.module("layers.1").tensors] == ["alias"]
    assert {t.name: t.kind for t in rec.module("layers.0.quant").tensors} == {"weight": "weight", "scale": "scale"}


def test_tensor_records_equal_those_of_a_walk_that_shares_nothing(odd):
    built, _ = odd
    shared_seen: dict = {}
    plain_seen: dict = {}
    made: dict = {}
    for path, mod in preorder(built.model):
        assert classify_module(mod, path, shared_seen, made) == classify_module(mod, path, plain_seen)


@pytest.mark.parametrize("which", ["odd", "v41"])
def test_shared_records_equal_unshared_ones_and_write_the_same_text(which, request):
    rec = request.getfixturevalue(which)
    rec = rec[1] if isinstance(rec, tuple) else rec
    unshared = loads(dumps(rec))  # version 1 reads every module's values anew: nothing shared
    paths = [m.path for m in rec.modules if m.tensors]
    assert unshared.module(paths[-1]).tensors is not unshared.module(paths[-2]).tensors
    assert unshared == rec
    assert dumps(unshared) == dumps(rec)
    assert dumps_compact(unshared) == dumps_compact(rec)


@pytest.mark.parametrize("which", ["odd", "v41"])
def test_the_compact_writer_finds_the_values_a_plain_search_finds(which, request):
    rec = request.getfixturevalue(which)
    rec = rec[1] if isinstance(rec, tuple) else rec
    got = json.loads(dumps_compact(rec))
    values, rows = _reference_compact(rec)
    assert got["fields"] == list(FIELDS)
    assert got["values"] == values
    m = got["modules"]  # each module's row, as the plain search makes one per module
    assert [[p, n, *got["rows"][r]] for p, n, r in zip(m["parent"], m["name"], m["row"])] == rows
    if which == "odd":  # attributes holding lists: found equal all the same, one value for every expert
        attrs = got["values"][FIELDS.index("attributes")]
        assert {"sizes": [8, 16], "flags": [True, 1, 1.0]} in attrs
        assert sum(1 for a in attrs if "sizes" in a) == 1

"""The compact records file's lazy reader (`records.compactfile`): the records it gives are the walk's, grouping and
`inspect layer N` read only the modules they show, and a damaged file is refused when it is read, with the row."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

import archviz
from archviz.group import group
from archviz.records.compactfile import CompactModules
from archviz.records import dumps, dumps_compact, from_json_dict, loads
from archviz.render.grouped import grouped_tree
from archviz.shapes import trace_shapes
from archviz.walk import walk
from helpers import TESTS

DSV3 = TESTS / "fixtures" / "dsv3like"
LAYERS, EXPERTS = 12, 64  # enough repetition that a layer is a small part of the model


@pytest.fixture(scope="module")
def walked():
    built = archviz.build(str(DSV3 / "model.py"), config=str(DSV3 / "config.json"),
                          overrides={"n_layers": LAYERS, "n_routed_experts": EXPERTS})
    return trace_shapes(built, walk(built), batch=2, seq=8)


@pytest.fixture(scope="module")
def compact_text(walked):
    return dumps_compact(walked)


def test_read_back_equals_the_walk_and_groups_the_same(walked, compact_text):
    back = loads(compact_text)
    assert isinstance(back.modules, CompactModules)
    assert back.modules.expanded() == 0  # nothing made until read
    assert len(back.modules) == len(walked.modules)
    assert back == walked and walked == back
    assert back.modules[5] == walked.modules[5] and back.modules[-1] == walked.modules[-1]
    assert back.modules[2:6] == walked.modules[2:6]
    assert [m.path for m in reversed(back.modules)] == [m.path for m in reversed(walked.modules)]
    for field in ("class_name", "tensors", "attributes", "calls", "flow", "path"):
        assert back.column(field) == walked.column(field)
    assert back.aliases() == walked.aliases()
    assert dumps(back) == dumps(walked)
    # grouping the lazy modules gives what grouping the walk's gives, and needs few of them made
    lazy = loads(compact_text)
    assert group(lazy).extra("grouping") == group(walked).extra("grouping")
    assert lazy.modules.expanded() < len(lazy.modules) / 10


def test_inspect_layer_reads_only_what_it_shows(walked, compact_text):
    record = group(loads(compact_text))
    tree = grouped_tree(record, "layers.3")
    assert tree.renderables  # the grouped tree: lines above a table
    paths = record.column("path")
    layer = [p for p in paths if p == "layers.3" or p.startswith("layers.3.")]
    # the layer's experts are one node of the tree: it takes less than the layer's own modules to show it
    assert 4 * EXPERTS < len(layer)
    assert record.modules.expanded() < len(paths) / 10
    index = record.index()
    assert "layers.3.attn" in index and "layers.3.nope" not in index and 3 not in index
    assert index["layers.3.attn"] == next(m for m in walked.modules if m.path == "layers.3.attn")
    assert len(index) == len(walked.modules) and list(index)[:3] == [m.path for m in walked.modules[:3]]
    assert record.module("layers.3.attn").class_name == "MLA"


def test_pickles_and_copies_as_the_same_record(compact_text):
    back = loads(compact_text)
    for again in (pickle.loads(pickle.dumps(back)), copy.deepcopy(back)):
        assert again == back
        assert hash(again.modules) == hash(tuple(back.modules))


def test_children_out_of_row_order_are_read_by_name(walked, compact_text):
    """A writer may list a module's children in another order than its rows: they are found by name, and the
    record is what the same children in that order give when read from version 1."""
    d = json.loads(compact_text)
    children = d["fields"].index("children")
    root_row = d["rows"][d["modules"]["row"][0]]
    names = d["values"][children][root_row[children]]
    assert len(names) >= 3
    d["values"][children].append(list(reversed(names)))
    root_row[children] = len(d["values"][children]) - 1
    back = loads(json.dumps(d))
    v1 = json.loads(dumps(walked))
    v1["modules"][0]["children"] = list(reversed(v1["modules"][0]["children"]))
    eager = from_json_dict(v1)
    assert back == eager
    assert group(back).extra("grouping") == group(eager).extra("grouping")


def _damaged(record, how: str) -> str:
    """The record's compact file, damaged as `how` says, at module 7."""
    d = json.loads(dumps_compact(record))
    fields = d["fields"]
    tensors = fields.index("tensors")
    ch = fields.index("children")
    # module 7's own copy of its row, so that the damage is its alone
    d["rows"].append(list(d["rows"][d["modules"]["row"][7]]))
    d["modules"]["row"][7] = len(d["rows"]) - 1
    cell = lambda i, k, v: d["rows"][d["modules"]["row"][i]].__setitem__(k, v)  # noqa: E731
    get = lambda i, k: d["rows"][d["modules"]["row"][i]][k]  # noqa: E731
    if how == "index out of range":
        cell(7, tensors, len(d["values"][tensors]))
    elif how == "negative index":
        cell(7, tensors, -1)
    elif how == "float index":
        cell(7, tensors, float(get(7, tensors)))
    elif how == "string index":
        cell(7, tensors, "0")
    elif how == "parent after the row":
        d["modules"]["parent"][7] = 9
    elif how == "empty name":
        d["modules"]["name"][7] = ""
    elif how == "short row":
        d["rows"][d["modules"]["row"][7]].pop()
    elif how == "row not a list":
        d["modules"]["row"][7] = [0]
    elif how == "child without a row":
        d["values"][ch].append(["nope"])
        d["rows"].append(list(d["rows"][d["modules"]["row"][0]]))
        d["rows"][-1][ch] = len(d["values"][ch]) - 1
        d["modules"]["row"][0] = len(d["rows"]) - 1
    elif how == "no rows":
        d["modules"] = {"parent": [], "name": [], "row": []}
    return json.dumps(d)


DAMAGE = ["index out of range", "negative index", "float index", "string index", "parent after the row", "empty name",
          "short row", "row not a list", "child without a row", "no rows"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_file_is_refused_when_read(walked, how):
    with pytest.raises(ValueError, match="row|modules|module"):
        loads(_damaged(walked, how))


def test_version_3_reads_as_the_walk_made_it(walked, compact_text):
    v3 = loads(compact_text)
    assert v3 == walked
    assert group(v3).extra("grouping") == group(walked).extra("grouping")
    assert len(json.loads(compact_text)["rows"]) < len(walked.modules) / 20  # a few dozen rows for thousands


@pytest.mark.parametrize("how", ["float index", "parent after the row", "child without a row"])
def test_the_cli_says_one_line_for_a_damaged_file(tmp_path, walked, how, archviz_cli):
    bad = tmp_path / "records.json"
    bad.write_text(_damaged(walked, how))
    p = archviz_cli("inspect", bad, "layer", "3")
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) <= 2 and str(bad) in lines[0] and "not a readable records file" in lines[0]

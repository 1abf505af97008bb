"""The records JSON: it reads back into equal records, and the same source always gives the same text."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import archviz
from archviz.records import ALIAS, SCHEMA, TABLE, dumps, loads
from archviz.records import SCHEMA_V3, dumps_compact
from archviz.shapes import trace_shapes
from archviz.walk import walk
from helpers import REPO, TESTS

DSV41 = TESTS / "fixtures" / "dsv41like"
REPO = TESTS.parent


@pytest.fixture(scope="module")
def v41_record():
    return archviz.load(str(DSV41))


@pytest.fixture(scope="module")
def v41_with_shapes():
    built = archviz.build(str(DSV41))
    return trace_shapes(built, walk(built), batch=2, seq=8)


def test_round_trip_reference(v41_record):
    rec = v41_record
    # the record exercises what the JSON must carry: aliases, packed weights, tables, notes, stubbed kernels
    kinds = {t.kind for _, t in rec.iter_tensors()}
    assert {ALIAS, TABLE, "scale", "buffer", "weight", "bias"} <= kinds
    assert any(t.logical_shape for _, t in rec.iter_tensors())
    assert rec.source.notes and rec.source.stubbed_imports
    back = loads(dumps(rec))
    assert back == rec
    assert back.source.config == rec.source.config
    assert dumps(back) == dumps(rec)


def test_round_trip_with_shapes_and_extras(v41_with_shapes):
    rec = v41_with_shapes.with_extra("note", {"layers": [1, 2], "kind": "test"})
    wo_b = rec.module("layers.1.attn.wo_b")
    assert wo_b.calls and wo_b.call_sites  # shapes and call sites are in it
    back = loads(dumps(rec))
    assert back == rec
    assert back.module("layers.1.attn.wo_b").calls == wo_b.calls
    assert back.extra("note") == {"layers": [1, 2], "kind": "test"}


def test_round_trip_hf():
    rec = archviz.load("hf:deepseek_v4", overrides={"num_hidden_layers": 2, "hidden_size": 256,
                                                     "n_routed_experts": 4, "vocab_size": 1000})
    assert rec.summary.moe
    back = loads(dumps(rec))
    assert back == rec


def test_json_shape_and_schema(v41_record):
    d = json.loads(dumps(v41_record))
    assert list(d)[0] == "schema" and d["schema"] == SCHEMA == "archviz.records/1"
    assert [m["path"] for m in d["modules"]] == [m.path for m in v41_record.modules]
    d["schema"] = "archviz.records/0"
    with pytest.raises(ValueError, match="archviz.records/0"):
        loads(json.dumps(d))


@pytest.mark.parametrize("empty", [[], {}, ""])
def test_a_file_without_modules_is_refused_when_read(v41_record, empty):
    """No module, not even the root (which every reader starts at): refused when read, in both versions, as
    test_adv_fuzz_records found of version 1 (it grouped, and the grouping died on its first module)."""
    v1 = dict(json.loads(dumps(v41_record)), modules=empty)
    with pytest.raises(ValueError, match="modules"):
        loads(json.dumps(v1))
    v3 = json.loads(dumps_compact(v41_record))
    v3["modules"] = {k: [] for k in v3["modules"]}
    with pytest.raises(ValueError, match="modules"):
        loads(json.dumps(v3))


def test_two_walks_give_identical_text():
    first = archviz.load(str(DSV41))
    again = archviz.load(str(DSV41))
    assert dumps(again) == dumps(first)


def test_same_text_whatever_else_the_process_loaded(archviz_cli):
    """A long-lived process (a notebook, `archviz site` over several models) walks the same source twice, with a
    transformers model loaded in between: the records must not change."""
    code = ("import archviz; from archviz.records import dumps; "
            f"a = dumps(archviz.load({str(DSV41)!r})); "
            "archviz.load('hf:llama', overrides={'num_hidden_layers': 1}); "
            f"b = dumps(archviz.load({str(DSV41)!r})); "
            "import difflib; print('SAME' if a == b else ''.join(difflib.unified_diff("
            "a.splitlines(True), b.splitlines(True), n=0)))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=archviz_cli.env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "SAME"


def test_walk_command_output_is_deterministic_across_processes(archviz_cli):
    """Two processes with different hash seeds (set and dict orders that depend on hashing would differ)."""
    def start(seed: str) -> subprocess.Popen:
        env = {**archviz_cli.env, "PYTHONHASHSEED": seed}
        return subprocess.Popen([sys.executable, "-m", "archviz.cli", "walk", str(DSV41), "--shapes"], cwd=REPO,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    procs = [start("1"), start("2")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert outs[0][0] == outs[1][0]
    assert json.loads(outs[0][0])["schema"] == SCHEMA_V3


def test_compact_file_reads_back_equal_and_is_a_fraction_of_version_1(v41_with_shapes):
    """archviz.records/3 stores each distinct field value once, and each distinct row of them once: the same record
    comes back, from far fewer bytes; a version 1 file stays readable."""
    v3 = dumps_compact(v41_with_shapes)
    v1 = dumps(v41_with_shapes)
    assert json.loads(v3)["schema"] == SCHEMA_V3
    assert json.loads(v1)["schema"] == SCHEMA
    assert loads(v3) == v41_with_shapes == loads(v1)
    layers = v41_with_shapes.source.config
    assert dict(layers)["n_layers"] > 4 and len(v3) * 3 < len(v1)
    d = json.loads(v3)
    modules = len(v41_with_shapes.modules)
    assert len(d["modules"]["parent"]) == len(d["modules"]["name"]) == len(d["modules"]["row"]) == modules
    assert len(d["rows"]) < modules / 2  # layers and experts share rows


@pytest.mark.parametrize("damage", ["parent", "row", "value", "lists", "fields", "short row", "version 2"])
def test_a_damaged_compact_file_is_one_line(v41_record, tmp_path, archviz_cli, damage):
    """A damaged file, or one of the compact version 2 no archviz writes any more, is one line naming the records."""
    d = json.loads(dumps_compact(v41_record))
    if damage == "parent":
        d["modules"]["parent"][3] = 99
    elif damage == "row":
        d["modules"]["row"][2] = len(d["rows"])
    elif damage == "value":
        d["rows"][1][5] = 10 ** 6
    elif damage == "lists":
        d["modules"]["name"].pop()
    elif damage == "fields":
        d["fields"] = ["class_name"]
    elif damage == "short row":
        d["rows"][1] = d["rows"][1][:4]
    else:
        d["schema"] = "archviz.records/2"
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(d))
    r = archviz_cli("summary", f)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "records" in r.stderr

"""Fuzzing the records reader: a records file (versions 3 and 1) with one part replaced by arbitrary JSON is
either refused when it is read (ValueError, which the CLI turns into one line and exit 2) or read into records whose
every module can be made, looked up and grouped, and that summary and inspect render. The lazy reader checks the file whole so that nothing fails later,
when a renderer makes a module."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

import archviz
from archviz.group import group
from archviz.records import dumps, dumps_compact, loads
from archviz.render.grouped import grouped_tree
from archviz.render.terminal import summary_table
from archviz.render.views import summary_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# dsv3like with 2 of its 4 layers: its dense layer and a MoE layer, every kind of module it has, in a file half as
# long (each example writes, reads and renders it whole)
SMALL = {"n_layers": 2}

JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=False) |
                    st.text(max_size=6), lambda kids: st.lists(kids, max_size=4) |
                    st.dictionaries(st.text(max_size=4), kids, max_size=3), max_leaves=8)


@pytest.fixture(scope="module")
def docs() -> dict[int, dict]:
    built = archviz.build(str(FIXTURES / "dsv3like" / "model.py"), config=str(FIXTURES / "dsv3like" / "config.json"),
                          overrides=SMALL)
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    record = trace_shapes(built, walk(built), batch=2, seq=8)
    return {3: json.loads(dumps_compact(record)), 1: json.loads(dumps(record))}


def _places(d: object, path: tuple = ()) -> list[tuple]:
    """Every place in the document (but its extras) that a value can be put at."""
    out = [path]
    if isinstance(d, dict):
        for k, v in d.items():
            if path or k in ("fields", "values", "rows", "modules", "source", "summary"):
                out += _places(v, (*path, k))
    elif isinstance(d, list):
        step = max(1, len(d) // 6)  # a sample of a long list's items, first and last included
        for i in sorted({*range(0, len(d), step), len(d) - 1} if d else ()):
            out += _places(d[i], (*path, i))
    return out


def _put(d: object, path: tuple, value: object) -> object:
    """`d` with `value` at `path`: the containers on the path copied, `d` itself unchanged."""
    if not path:
        return value
    copy = dict(d) if isinstance(d, dict) else list(d)  # type: ignore[call-overload]
    copy[path[0]] = _put(copy[path[0]], path[1:], value)
    return copy


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(version=st.sampled_from([3, 1]), pick=st.integers(0, 10**6), value=JSON)
def test_a_file_with_any_part_replaced_is_refused_or_reads_whole(docs, version, pick, value):
    doc = docs[version]
    places = [p for p in _places(doc) if p]
    text = json.dumps(_put(doc, places[pick % len(places)], value))
    try:
        record = loads(text)
    except ValueError:
        return  # refused when read, with a message
    modules = list(record.modules)  # every module can be made
    assert len(modules) == len(record.modules)
    index = record.index()
    assert all(index[m.path] is not None for m in modules[:50])
    for field in ("class_name", "tensors", "attributes", "kernels"):
        assert len(record.column(field)) == len(modules)
    grouped = group(record)
    # what summary and inspect show, on a fixed-width console
    console = Console(width=100, file=io.StringIO(), color_system=None)
    console.print(summary_table(grouped))
    console.print(grouped_tree(grouped, "", depth=4))
    json.dumps(summary_json(grouped))


@pytest.mark.parametrize("stored", [{"nodes": "garbage"}, "from another model"])
def test_a_grouping_stored_in_a_file_is_made_again(tmp_path, docs, stored, archviz_cli):
    """Grouping is derived from the modules: one a file carries (damaged, or another model's, with other counts)
    changes nothing that summary, inspect and build show (the commands in-process: what they print is compared)."""
    from archviz.records import SCHEMA_V3

    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(docs[3]))
    d = json.loads(json.dumps(docs[3]))
    assert d["schema"] == SCHEMA_V3
    if stored == "from another model":
        other = archviz.build(str(FIXTURES / "dsv3like" / "model.py"), config=str(FIXTURES / "dsv3like" / "config.json"),
                              overrides={"n_layers": 6, "dim": 128})
        from archviz.walk import walk

        stored = group(walk(other)).extra("grouping")
        assert stored["nodes"][0]["total"] != group(loads(clean.read_text())).extra("grouping")["nodes"][0]["total"]
    d["extras"]["grouping"] = stored
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(d))
    for args in (["summary"], ["inspect", "layer", "1"], ["inspect", "--json"]):
        outs = []
        for f in (clean, crafted):
            p = archviz_cli(args[0], f, *args[1:])
            assert p.returncode == 0, p.stderr[-1500:]
            outs.append(p.stdout.replace(str(f), "FILE"))
        assert outs[0] == outs[1], args


@pytest.fixture(scope="module")
def cost_doc() -> dict:
    from archviz.cost.measure import measure
    from archviz.sources import BuildOptions

    return json.loads(dumps_compact(measure(str(FIXTURES / "dsv3like" / "model.py"),
                                            BuildOptions(config=str(FIXTURES / "dsv3like" / "config.json"),
                                                         overrides=tuple(SMALL.items())))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pick=st.integers(0, 10**6), value=JSON)
def test_a_cost_extra_with_any_part_replaced_is_refused_or_renders(cost_doc, pick, value):
    """`archviz cost -o` records with one part of `extras.cost` replaced: refused when read (what the CLI's reader
    checks: archviz.cost.extra), or the cost report and the site's cost section render."""
    from archviz.cost.extra import check
    from archviz.cost.report import cost_report
    from archviz.render.site import render_site

    places = [p for p in _places_all(cost_doc["extras"]["cost"]) if p]
    text = json.dumps(_put(cost_doc, ("extras", "cost", *places[pick % len(places)]), value))
    try:
        record = loads(text)
        check(record.extra("cost"))
    except ValueError:
        return
    cost_report(record)
    render_site([group(record)])


def _places_all(d: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(d, dict):
        for k, v in d.items():
            out += _places_all(v, (*path, k))
    elif isinstance(d, list):
        for i in sorted({0, len(d) - 1} if d else ()):
            out += _places_all(d[i], (*path, i))
    return out

"""Warnings raised by the model's own code become notes in the records, never lines on stderr (the library never
prints): the build's in `source.notes`, the meta pass's in the shapes extra with the module that raised them. Both
show in `archviz inspect` and on the site's overview, beside the pass's B and T."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from archviz.records import loads, to_json_dict  # a records file of either version, as /1's dicts
from helpers import TESTS

FACTORY = TESTS / "data" / "factories" / "warns.py"


def line_of(text: str) -> int:
    """The fixture's line that raises `text`, found by reading the file (not from archviz)."""
    for n, line in enumerate(FACTORY.read_text().splitlines(), 1):
        if "warnings.warn(" in line and text in line:
            return n
    raise AssertionError(text)


BUILD_NOTE = f"warning while building: UserWarning: Model.__init__: dim=8 is small (warns.py:{line_of('dim=')})"
PASS_NOTE = (f"warning from proj: UserWarning: Noisy.forward: this projection is deprecated "
             f"(warns.py:{line_of('deprecated')})")


@pytest.fixture(scope="module")
def runs(archviz_cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("warns")
    return d, archviz_cli.many({
        "inspect": ["inspect", "warns:model", "--input", "x=B,T,8"],
        "walk": ["walk", "warns:model", "--shapes", "--input", "x=B,T,8", "-o", d / "r.json"],
        "site": ["build", "warns:model", "--input", "x=B,T,8", "-o", d / "site"],
        "site_no_input": ["build", "warns:opaque", "-o", d / "site2"],  # (warns:model takes features by default)
        "probe": ["probe", "warns:token_model", "--json"],
        "probe_not_ids": ["probe", "warns:opaque"],
    })


def test_nothing_reaches_stderr_and_inspect_shows_the_notes(runs):
    _, r = runs
    res = r["inspect"]
    assert res.returncode == 0, res.stderr
    assert "Warning" not in res.stderr and "warnings.warn" not in res.stderr
    out = " ".join(res.stdout.split())
    assert f"note: {BUILD_NOTE}" in out
    assert f"meta pass: {PASS_NOTE}" in out
    assert "hidden by the default filters" not in out  # a DeprecationWarning outside __main__: Python hides it too


def test_records_hold_each_warning_once(runs):
    d, r = runs
    assert r["walk"].returncode == 0, r["walk"].stderr
    assert "Warning" not in r["walk"].stderr
    rec = to_json_dict(loads((d / "r.json").read_text()))
    assert [n for n in rec["source"]["notes"] if n.startswith("warning")] == [BUILD_NOTE]
    shapes = rec["extras"]["shapes"]
    assert [n for n in shapes["notes"] if n.startswith("warning")] == [PASS_NOTE]  # proj runs twice, noted once
    # the pass really ran proj twice (two call sites in Model.forward): the note is deduplicated, not the calls
    proj = next(m for m in rec["modules"] if m["path"] == "proj")
    lines = FACTORY.read_text().splitlines()
    first, last = lines.index("class Model(nn.Module):"), lines.index("def model() -> Model:")
    assert [(s["line"], s["code"]) for s in proj["call_sites"]] == [
        (n, line.split("= ", 1)[-1].strip().removeprefix("return ")) for n, line in enumerate(lines, 1)
        if first < n <= last and "self.proj(" in line]


def test_site_overview_says_how_shapes_were_made(runs):
    d, r = runs
    assert r["site"].returncode == 0, r["site"].stderr
    assert "Warning" not in r["site"].stderr
    rec = to_json_dict(loads((d / "r.json").read_text()))
    B, T = rec["extras"]["shapes"]["B"], rec["extras"]["shapes"]["T"]
    pages = [p.read_text() for p in (d / "site").rglob("*.html")]
    overview = next(p for p in pages if 'id="build"' in p)
    text = " ".join(re.sub(r"<[^>]+>", " ", overview).split())
    assert f"batch B = {B} and T = {T} positions" in text
    assert f"Meta pass: {PASS_NOTE}" in text
    assert BUILD_NOTE in text


def test_site_without_the_input_says_why_it_has_no_shapes(runs):
    d, r = runs
    res = r["site_no_input"]
    assert res.returncode == 0, res.stderr
    assert "no shapes" in res.stderr and "--input" in res.stderr
    overview = next(p.read_text() for p in (d / "site2").rglob("*.html") if 'id="build"' in p.read_text())
    text = " ".join(re.sub(r"<[^>]+>", " ", overview).split())
    assert "no shapes: the meta forward pass failed" in text


def test_library_calls_leave_filters_and_showwarning_as_they_were():
    import sys

    import archviz
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    sys.path.insert(0, str(FACTORY.parent))
    try:
        before_filters, before_show = list(warnings.filters), warnings.showwarning
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # the user's filters rule: now the DeprecationWarning is noted too
            built = archviz.build("warns:model")
            rec = trace_shapes(built, walk(built), input_specs=["x=B,T,8"])
        assert caught == []  # nothing escaped the library
        assert warnings.filters == before_filters and warnings.showwarning is before_show
        assert BUILD_NOTE in rec.source.notes
        pass_notes = [n for n in rec.extra("shapes")["notes"] if n.startswith("warning")]
        assert pass_notes[0] == PASS_NOTE
        assert pass_notes[1].startswith("warning from proj: DeprecationWarning: hidden by the default filters")
    finally:
        sys.path.remove(str(FACTORY.parent))


def test_probe_notes_the_real_pass_warnings(runs):
    _, r = runs
    res = r["probe"]
    assert res.returncode == 0, res.stderr
    assert "Warning" not in res.stderr
    out = json.loads(res.stdout)
    assert out["ok"] and out["agreement"] == 1.0
    assert out["notes"] == [PASS_NOTE.replace("warning from proj:", "warning from proj in the real pass:")]


def test_probe_of_a_model_not_on_token_ids_says_what_applies(runs):
    """The probe takes --input as inspect does, but has no --no-shapes: its hint leaves that out."""
    _, r = runs
    res = r["probe_not_ids"]
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "the meta forward pass failed in proj" in lines[0]
    assert "give a missing forward input with --input name=B,T (repeatable)" in lines[0]
    assert "--no-shapes" not in lines[0]


def test_probe_with_the_input_runs_both_passes_on_it(archviz_cli):
    res = archviz_cli("probe", "warns:model", "--input", "x=B,T,8", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["ok"] and out["agreement"] == 1.0 and out["modules_compared"] == 2  # the model and proj

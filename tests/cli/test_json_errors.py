"""With --json, an error is JSON on stdout too (`{"error", "hint", "exit_code"}`), for every command that has --json;
stderr keeps its one line, and the exit status is the same as without --json."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

TMP = Path(tempfile.gettempdir())
MISSING = TMP / "archviz-no-such-checkpoint.safetensors"

CASES = {
    "summary": ["summary", "hf:nope_model", "--json"],
    "inspect": ["inspect", "hf:nope_model", "--json"],
    "walk": ["walk", "hf:nope_model", "-o", TMP / "archviz-unused-records.json", "--json"],
    "build": ["build", "hf:nope_model", "-o", TMP / "archviz-unused-json-site", "--json"],
    "probe": ["probe", "hf:nope_model", "--json"],
    "check": ["check", "hf:llama", "--checkpoint", MISSING, "--json"],
    "check_format_json": ["check", "hf:llama", "--checkpoint", MISSING, "--format", "json"],
    "manifest": ["manifest", MISSING, "-o", TMP / "archviz-unused.manifest.json", "--json"],
    "summary_plain": ["summary", "hf:nope_model"],
}


@pytest.fixture(scope="module")
def results(archviz_cli):
    return archviz_cli.many(CASES)


@pytest.mark.parametrize("case", [c for c in CASES if c != "summary_plain"])
def test_error_is_json_on_stdout(results, case):
    r = results[case]
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    data = json.loads(r.stdout)  # the whole of stdout is one JSON document
    assert set(data) == {"error", "hint", "exit_code"}
    assert data["exit_code"] == r.returncode == 2
    # the same error as the stderr line, which reads "error: MESSAGE — HINT"
    line = r.stderr.strip().splitlines()
    assert len(line) == 1
    expected = data["error"] + (f" — {data['hint']}" if data["hint"] else "")
    assert line[0] == f"error: {expected}"
    if case.startswith(("check", "manifest")):
        assert str(MISSING) in data["error"]
    else:
        assert "unknown model type 'nope_model'" in data["error"]
        assert data["hint"]  # it says what to do


def test_without_json_stdout_stays_empty(results):
    r = results["summary_plain"]
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.startswith("error: ") and "unknown model type 'nope_model'" in r.stderr

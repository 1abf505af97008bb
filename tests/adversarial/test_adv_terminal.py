"""Terminal and CI-log injection through checkpoint tensor names: window title, clear screen, a carriage return
writing a fake verdict, C1 CSI, bidi overrides, rich markup (an OSC 8 hyperlink), and GitHub workflow commands.
In every output format the text is shown escaped and does nothing; ``--json`` keeps the exact names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from adv_tools import LINEAR, LINEAR_TENSORS, cli, refused, write_shard

HOSTILE = {
    "title": "x\x1b]0;pwned\x07.w",
    "clear": "x\x1b[2J\x1b[H.w",
    "fake_verdict": "x\rcheckpoint check: match          .w",
    "c1_csi": "x\x9b31m.w",
    "bidi": "x\u202eevil\u202c.w",
    "markup": "x[link=http://evil.example]click[/link].w",
    "workflow": "x\n::warning file=a::injected\n.w",
    "percent": "x%0A::error::fake.w",
}
# What must never reach the terminal raw: C0 controls other than the line feeds the tables are made of, DEL, C1,
# and the bidi overrides.
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def hostile_ck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    return write_shard(folder / "hostile.safetensors", {**LINEAR_TENSORS, **{n: ("U8", [1]) for n in HOSTILE.values()}})


@pytest.fixture(scope="module")
def runs(hostile_ck: Path) -> dict:
    return {fmt: cli("check", *LINEAR, "-k", hostile_ck, "--format", fmt) for fmt in ("table", "github", "json")}


def test_table_shows_names_escaped(runs: dict) -> None:
    r = runs["table"]
    assert r.returncode == 1, r.stderr  # checkpoint-only tensors nothing explains: a mismatch, honestly
    assert not _RAW.search(r.stdout + r.stderr), repr(_RAW.search(r.stdout + r.stderr))
    assert "\\x1b]0;pwned\\x07" in r.stdout and "\\x9b31m" in r.stdout and "\\u202e" in r.stdout
    assert "[link=http://evil.example]click[/link]" in r.stdout  # shown as text, not read as markup
    assert "checkpoint check: mismatch" in r.stdout
    assert "\\rcheckpoint check: match" in r.stdout  # the fake verdict is visible as what it is


def test_github_lines_cannot_inject_workflow_commands(runs: dict) -> None:
    r = runs["github"]
    assert r.returncode == 1, r.stderr
    assert not _RAW.search(r.stdout), repr(_RAW.search(r.stdout))
    lines = r.stdout.splitlines()
    assert lines and all(ln.startswith(("::error ", "::notice ")) for ln in lines), lines
    assert not any(ln.startswith(("::warning", "::set-", "::add-", "::stop-")) for ln in lines)
    for ln in lines:
        props, _, message = ln.partition("::")[2].partition("::")
        assert "::" not in props  # the command's properties end where they should
        for value in re.findall(r"=([^,]*)", props):
            assert ":" not in value and "\n" not in value
        assert "%0A::" not in message.replace("%250A", "")  # a literal %0A from a name stays escaped (%25)
    assert "::x%250A::error::fake: mismatch" in r.stdout  # the name's own "%" escaped as GitHub reads it


def test_json_keeps_exact_names_and_no_raw_controls(runs: dict) -> None:
    r = runs["json"]
    assert r.returncode == 1, r.stderr
    assert not _RAW.search(r.stdout)
    names = {c["name"] for c in json.loads(r.stdout)["checkpoint_only"]}
    assert names == set(HOSTILE.values())  # data, not display: every byte of every name kept


def test_error_lines_escape_what_they_quote(tmp_path: Path) -> None:
    bad = tmp_path / "ck\x1b[2J\x1b]0;t\x07.safetensors"
    r = cli("check", *LINEAR, "-k", bad)
    line = refused(r, "no such file")
    assert not _RAW.search(r.stderr)
    assert "\\x1b[2J" in line
    # an unknown dtype under a hostile name: the header error quotes the name escaped
    ck = tmp_path / "h.safetensors"
    write_shard(ck, {"w\x1b[31m\u202e": ("U8", [1])})
    ck.write_bytes(ck.read_bytes().replace(b'"U8"', b'"Q8"'))
    r = cli("check", *LINEAR, "-k", ck)
    line = refused(r, "unknown dtype")
    assert not _RAW.search(r.stderr) and "\\x1b[31m" in line

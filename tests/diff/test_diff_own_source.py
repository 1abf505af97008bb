"""`archviz diff` of a model's records against its own source compares only what both sides carry: a records file
without the meta pass, with it, or with a cost pass compares identical to the source it was written from, and the
output says what was left out. The same source changed in what the meta pass notes is still found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.records import loads

BRANCHY = Path(__file__).resolve().parent.parent / "fixtures" / "branchy"
SRC = [str(BRANCHY / "model.py"), "--config", str(BRANCHY / "config.json")]


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture's records as `walk` (without and with the meta pass) and `cost -o` write them."""
    folder = tmp_path_factory.mktemp("records")
    out = {name: folder / f"{name}.json" for name in ("plain", "shapes", "cost")}
    for args in (("walk", *SRC, "--no-shapes", "-o", out["plain"]), ("walk", *SRC, "--shapes", "-o", out["shapes"]),
                 ("cost", *SRC, "-o", out["cost"])):
        code, _, err = cli(*args)
        assert code == 0, err
    # what makes this fixture a test of the notes: its meta pass assumes a boolean test on a tensor, in every layer
    noted = {m.path for m in loads(out["shapes"].read_text()).modules
             if any("a boolean test on a tensor: assumed true" in a for a in m.assumptions)}
    assert noted == {"layers.0", "layers.1"}
    assert not any(m.assumptions for m in loads(out["plain"].read_text()).modules)
    return out


def diff(a: object, b: object, *more: str) -> tuple[int, dict]:
    args = ["diff", a, b, *more, "--json"]
    if b == SRC[0]:
        args[3:3] = ["--config-b", SRC[2]]
    code, stdout, err = cli(*args)
    assert code in (0, 1), err
    return code, json.loads(stdout)


@pytest.mark.parametrize("kind, left_out", [
    ("plain", "not compared: A has no meta pass"),
    ("shapes", None),
    ("cost", "FLOPs and KV-cache figures not compared: only A carries a cost pass"),
])
def test_records_against_their_own_source_are_identical(records: dict[str, Path], kind: str,
                                                        left_out: str | None) -> None:
    code, d = diff(records[kind], SRC[0])
    assert (code, d["verdict"], d["groups"]) == (0, "identical", []), d
    notes = " ".join(d["notes"])
    if left_out is None:
        assert "not compared" not in notes
    else:
        assert left_out in notes


@pytest.mark.parametrize("a, b, left_out", [
    ("plain", "shapes", "not compared: A has no meta pass"),
    ("shapes", "plain", "not compared: B has no meta pass"),
    ("cost", "plain", "only A carries a cost pass"),
    ("plain", "cost", "only B carries a cost pass"),
    ("cost", "shapes", "the meta passes ran at different sizes"),
])
def test_records_against_each_other_are_identical(records: dict[str, Path], a: str, b: str, left_out: str) -> None:
    code, d = diff(records[a], records[b])
    assert (code, d["verdict"]) == (0, "identical"), d
    assert left_out in " ".join(d["notes"])


def test_a_changed_note_is_still_found_where_both_have_the_pass(records: dict[str, Path], tmp_path: Path) -> None:
    """The test the meta pass assumes, removed from the forward: the same modules, one note fewer."""
    folder = tmp_path / "branchy"
    folder.mkdir()
    text = (BRANCHY / "model.py").read_text()
    test_line = next(ln for ln in text.splitlines() if ln.strip().startswith("if h.abs().amax() > 0"))
    changed = text.replace(test_line + "\n", "    " * 2 + "if True:\n")
    assert changed != text
    (folder / "model.py").write_text(changed)
    (folder / "config.json").write_text((BRANCHY / "config.json").read_text())
    code, stdout, err = cli("diff", records["shapes"], folder / "model.py", "--config-b", folder / "config.json",
                            "--ignore", "lines", "--json")
    assert code == 1, err
    changes = [c for g in json.loads(stdout)["groups"] for c in g.get("changes", [])]
    assert [c["aspect"] for c in changes] == ["notes"], changes
    assert "assumed true" in changes[0]["a"] and changes[0]["b"] is None
    # and a records file without the pass does not see it
    code, _, err = cli("diff", records["plain"], folder / "model.py", "--config-b", folder / "config.json",
                       "--ignore", "lines", "--json")
    assert code == 0, err

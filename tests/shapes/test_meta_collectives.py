"""The meta pass of one rank (`--world-size N --rank R`, issue 34): the fixture's `dist.all_reduce` and
`dist.all_gather` are answered in place on meta, so a rank's shapes are recorded: a row-parallel layer takes its
share of the input features, the gathered logits span the whole vocabulary, and each collective is noted."""

from __future__ import annotations

import json
import pathlib

from typer.testing import CliRunner

from archviz.cli import app

FIX = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "dsv3like"
CONFIG = json.loads((FIX / "config.json").read_text())


def _inspect(path: str) -> dict:
    result = CliRunner().invoke(app, ["inspect", str(FIX / "model.py"), "--world-size", "2", "--rank", "1", path,
                                      "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_rank_meta_pass_records_its_shares_and_notes_each_collective():
    wo = _inspect("layers.0.attn.wo")
    assert wo["inputs"] == [["B", "T", CONFIG["n_heads"] * CONFIG["v_head_dim"] // 2]]
    assert wo["outputs"] == [["B", "T", CONFIG["dim"]]]
    assert any(a.startswith("dist.all_reduce ") and "answered as rank 1 of 2" in a for a in wo["assumptions"])
    model = _inspect("")
    assert model["outputs"] == [["B", CONFIG["vocab_size"]]]  # each rank's half of the head, gathered
    assert any(a.startswith("dist.all_gather ") and "answered as rank 1 of 2" in a for a in model["assumptions"])

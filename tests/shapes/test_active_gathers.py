"""Active parameters from what the meta pass reads by index (issue 29): experts stacked in [E, ...] parameters and
indexed by the router's top-k count k of E (gpt-oss's layout), and a lookup table counts the rows a token reads
(Engram's n-gram tables), shown as their own row in `summary`. Figures derived here from the fixtures' configs."""

from __future__ import annotations

import json
import pathlib

from typer.testing import CliRunner

import archviz
from archviz.cli import app
from archviz.shapes import trace_shapes
from archviz.sources import BuildOptions
from archviz.sources.dispatch import build
from archviz.walk import walk

FIX = pathlib.Path(__file__).parent.parent / "fixtures"
STACKED = FIX / "stackedmoe"
DSV41 = FIX / "dsv41like"


def _stacked_expected(cfg: dict) -> dict[str, int]:
    V, D, I, L = cfg["vocab_size"], cfg["dim"], cfg["inter_dim"], cfg["n_layers"]
    E, k = cfg["num_experts"], cfg["experts_per_token"]
    per_expert = 2 * I * D + 2 * I + D * I + D  # mlp1 weight and bias, mlp2 weight and bias
    gate = D * E + E
    table = cfg["ngram_rows"] * D
    total = 2 * V * D + L * (gate + E * per_expert) + table
    active = 2 * V * D + L * (gate + k * per_expert) + cfg["ngram_heads"] * D
    return {"total": total, "active": active, "per_expert": per_expert, "table": table, "input": V * D}


def test_stacked_experts_and_a_lookup_table_count_what_a_token_reads():
    cfg = json.loads((STACKED / "config.json").read_text())
    want = _stacked_expected(cfg)
    real = build(str(STACKED / "model.py"), BuildOptions(config=str(STACKED / "config.json"), device="cpu"))
    assert sum(p.numel() for p in real.model.parameters()) == want["total"]  # the formula, checked on a real build

    result = CliRunner().invoke(app, ["summary", str(STACKED / "model.py"), "--config", str(STACKED / "config.json"),
                                      "--json", "--no-cache"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["parameters"] == want["total"]
    assert got["active_parameters"] == want["active"]
    assert got["active_parameters_without_input_embedding"] == want["active"] - want["input"]
    assert [(m["path"], m["experts"], m["top_k"], m["per_expert"]) for m in got["moe"]] == \
        [(f"layers.{i}.mlp", cfg["num_experts"], cfg["experts_per_token"], want["per_expert"])
         for i in range(cfg["n_layers"])]
    assert got["lookup_tables"] == [{"path": f"layers.{cfg['ngram_layer']}.ngram.table.weight",
                                     "rows": cfg["ngram_rows"], "rows_per_token": cfg["ngram_heads"],
                                     "parameters": want["table"], "active": cfg["ngram_heads"] * cfg["dim"]}]

    table = CliRunner().invoke(app, ["summary", str(STACKED / "model.py"), "--config", str(STACKED / "config.json"),
                                     "--no-cache"], env={"COLUMNS": "160"})
    rows = [" ".join(line.replace("│", " ").split()) for line in table.stdout.splitlines()]
    assert any(r.startswith(f"lookup tables, rows read {cfg['ngram_heads'] * cfg['dim']:,} of ") for r in rows), \
        table.stdout


def test_engram_tables_count_the_rows_a_token_reads():
    """The V4.1-style fixture's Engram: each position reads (max_ngram_size - 1) × n_heads rows of head_dim values
    from each Engram layer's table; the rest of the table is not active."""
    cfg = json.loads((DSV41 / "config.json").read_text())
    built = archviz.build(str(DSV41 / "model.py"), config=str(DSV41 / "config.json"))
    walked = walk(built)
    traced = trace_shapes(built, walked)
    read = (cfg["engram_max_ngram_size"] - 1) * cfg["engram_n_heads"]
    not_read = sum((rows - read) * cfg["engram_head_dim"] for rows in cfg["engram_num_embeddings"])
    assert walked.summary.active_parameters - traced.summary.active_parameters == not_read
    assert [(t["path"], t["rows"], t["rows_per_token"]) for t in traced.extra("shapes")["gathered"]] == \
        [(f"layers.{i}.engram.table.weight", rows, read)
         for i, rows in zip(cfg["engram_layer_ids"], cfg["engram_num_embeddings"])]
    assert traced.summary.parameters == walked.summary.parameters

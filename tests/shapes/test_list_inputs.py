"""A forward that takes the lengths of packed sequences beside their token ids (`seqlens: List[int]`,
mistral-inference's style, issue 29): the pass makes them up from the annotation (one sequence of all the tokens),
notes it, and `--input seqlens=list:...` gives others; xformers' block-diagonal mask then costs each sequence's own
block. The fixture's config leaves max_batch_size at its default 0, which its loader would set.

Every figure is worked out here from the fixture's config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import archviz
from archviz.cli import app
from archviz.errors import ShapeError
from archviz.input_specs import check_input_specs
from archviz.shapes import parse_inputs, trace_shapes
from archviz.sources.reference import PASS_BATCH_LIMIT
from archviz.walk import walk

FIX = Path(__file__).resolve().parent.parent / "data" / "firsttry" / "packed"
MODEL, CONFIG = str(FIX / "model.py"), str(FIX / "config.json")
CFG = json.loads((FIX / "config.json").read_text())


def _cost(*extra: str) -> dict:
    r = CliRunner().invoke(app, ["cost", MODEL, "--config", CONFIG, "--seq", "64", "--json", "--no-cache", *extra],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _attention_flops(out: dict) -> int:
    return next(n for n in out["nodes"] if n["representative"] == "layers.0.attention")["prefill"]["per_call"]


def _projections(t: int) -> int:
    d, h, kv, hd = CFG["dim"], CFG["n_heads"], CFG["n_kv_heads"], CFG["head_dim"]
    return 2 * t * d * (2 * h * hd + 2 * kv * hd)  # wq and wo, wk and wv


def test_seqlens_made_up_and_traced():
    built = archviz.build(MODEL, config=CONFIG)
    record = trace_shapes(built, walk(built))
    d, v, n = CFG["dim"], CFG["vocab_size"], CFG["n_layers"]
    hd, h, kv, f = CFG["head_dim"], CFG["n_heads"], CFG["n_kv_heads"], CFG["hidden_dim"]
    layer = 2 * d + d * hd * (2 * h + 2 * kv) + 3 * d * f
    assert record.summary.parameters == 2 * v * d + n * layer + d
    by_path = {m.path: m for m in record.modules}
    assert by_path["tok_embeddings"].calls[0].inputs == (("T",),)  # packed: no batch dim
    assert by_path["layers.0"].calls[0].outputs == (("T", d),)
    assert "xformers.ops.fmha.memory_efficient_attention" in by_path["layers.0.attention"].kernels
    notes = record.extra("shapes")["notes"]
    assert any(note.startswith("seqlens=[T]: one sequence") and "List[int]" in note for note in notes)
    assert dict(record.source.config)["max_batch_size"] == PASS_BATCH_LIMIT  # its default 0 takes no sequence
    assert any("max_batch_size" in note for note in record.source.notes)


def test_block_diagonal_attention_costs_each_sequence():
    """One sequence of 64 tokens attends 64² pairs a head; two of 16 and 48 tokens, 16² + 48²."""
    h, hd = CFG["n_heads"], CFG["head_dim"]
    one = _cost()
    assert _attention_flops(one) == _projections(64) + 2 * h * 64 * 64 * (hd + hd)
    two = _cost("--input", "seqlens=list:16,48")  # the token ids still [T], as the code reads them
    assert _attention_flops(two) == _projections(64) + 2 * h * (16 * 16 + 48 * 48) * (hd + hd)


def test_list_spec_grammar():
    assert check_input_specs(["seqlens=list:T,512"]) == [("seqlens", "list", ("T", 512))]
    assert parse_inputs(["seqlens=list:T,B,3"], 5, 64)[1] == {"seqlens": [64, 5, 3]}
    assert parse_inputs(["input_ids=T"], 5, 64)[1]["input_ids"].dtype.is_floating_point is False  # token ids
    for bad in ("seqlens=list:", "seqlens=list:0", "seqlens=list:x,3", "seqlens=list:1,,2"):
        with pytest.raises(ShapeError) as e:
            check_input_specs([bad])
        assert "list:T" in e.value.hint


def test_probe_runs_the_packed_model_for_real():
    """The reduced copy runs on the CPU with the token ids [T] and seqlens the meta pass took, its attention through
    the xformers rule with the block-diagonal mask: every call's shapes agree."""
    r = CliRunner().invoke(app, ["probe", MODEL, "--config", CONFIG, "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["ok"] and out["agreement"] == 1.0

"""FLOPs as written and FLOPs attended (issue 35): attention that scores every position and masks most of them
computes them all (`flops`); `attended_flops` counts the products over the positions the mask keeps. The fixture
(tests/data/masked/model.py) masks in four styles; each expected figure is the formula written here:

    written   per layer: 4·B·H·Tq·Tk·D (QKᵀ and P·V over every position the code scores)
    attended  the same over the kept (query, key) pairs only

and everything else (projections, the head, an indexer's own scores) is the same in both.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.cli import app

MASKED = Path(__file__).resolve().parent.parent / "data" / "masked"
CFG = json.loads((MASKED / "config.json").read_text())
B, T, L = 2, 40, 100


def _cost(mask: str, *more: str) -> dict:
    result = CliRunner().invoke(app, ["cost", str(MASKED / "model.py"), "--config", str(MASKED / "config.json"),
                                      "--set", f"mask={json.dumps(mask)}", "--batch", str(B), "--seq", str(T),
                                      "--context", str(L), "--json", *more])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _attention(tq: int, pairs: int) -> int:
    """QKᵀ and P·V over `pairs` (query, key) pairs of each head and sequence, every layer."""
    H, D, n = CFG["n_heads"], CFG["head_dim"], CFG["n_layers"]
    return n * 4 * B * H * pairs * D


def _causal_pairs(t: int) -> int:
    return t * (t + 1) // 2


def _window_pairs(tq: int, start: int, W: int) -> int:
    """Query i (at position start + i) keeps the keys start + i − W + 1 .. start + i that exist."""
    return sum(min(start + i + 1, W) for i in range(tq))


@pytest.mark.parametrize("style", ["triu", "einsum", "sdpa"])
def test_causal_prefill_attends_the_lower_triangle(style):
    """A -inf mask made with triu_ (over [b, h, s, t] or einsum's [b, s, h, t] scores), or sdpa's is_causal:
    T(T+1)/2 of the T² pairs."""
    d = _cost(style)
    p = d["prefill"]
    written, kept = _attention(T, T * T), _attention(T, _causal_pairs(T))
    assert p["flops"] - p["attended_flops"] == written - kept
    assert sum(p["masked_flops"].values()) == written - kept
    assert set(p["masked_flops"]) == {f"layers.{i}.attn" for i in range(CFG["n_layers"])}
    # a decode step's causal mask keeps every cached position: nothing masked
    assert d["decode"]["attended_flops"] == d["decode"]["flops"]


def test_sliding_window_done_by_masking():
    """A bool band tril(start).triu(start − W + 1), the rest -inf: every position is scored, W kept."""
    d = _cost("window")
    W = CFG["window"]
    p, s = d["prefill"], d["decode"]
    assert p["flops"] - p["attended_flops"] == _attention(T, T * T) - _attention(T, _window_pairs(T, 0, W))
    assert s["flops"] - s["attended_flops"] == _attention(1, L + 1) - _attention(1, W)
    # as written, the decode step scores all L + 1 positions
    assert s["flops"] >= _attention(1, L + 1)


def test_top_k_index_mask_over_the_cached_positions():
    """An indexer scores all L + 1 positions and keeps its top k; the attention scores them all and masks all but
    those k with a -inf mask made by scatter_: k of L + 1 attended. The indexer's own scores are not masked."""
    d = _cost("topk")
    K = CFG["index_topk"]
    s, p = d["decode"], d["prefill"]
    assert s["flops"] - s["attended_flops"] == _attention(1, L + 1) - _attention(1, K)
    assert p["flops"] - p["attended_flops"] == _attention(T, T * T) - _attention(T, T * K)
    # the indexer (2·B·Tq·Tk·heads·dim) is counted in both
    index = CFG["n_layers"] * 2 * B * 1 * (L + 1) * CFG["index_heads"] * CFG["index_dim"]
    assert s["attended_flops"] >= index + _attention(1, K)


def test_index_mask_plus_causal_mask():
    """An index mask that keeps every position (top-k ≥ T) added to the causal mask is the causal mask; one that
    keeps k < T added to it keeps positions archviz cannot count from layouts (which of the k are causal), so the
    figure is the one as written, never a guess."""
    wide = _cost("topk_causal", "--set", f"index_topk={T}")["prefill"]
    assert wide["flops"] - wide["attended_flops"] == _attention(T, T * T) - _attention(T, _causal_pairs(T))
    narrow = _cost("topk_causal")["prefill"]
    assert narrow["attended_flops"] == narrow["flops"]


def test_bounds_say_they_use_the_attended_figure():
    result = CliRunner().invoke(app, ["cost", str(MASKED / "model.py"), "--config", str(MASKED / "config.json"),
                                      "--set", 'mask="window"', "--seq", "16", "--context", str(L),
                                      "--hardware", "h100"])
    assert result.exit_code == 0, result.output
    assert "attended" in result.stdout


def test_band_count_is_the_row_by_row_count():
    """band_count sums runs of rows at once: the same as counting row by row, for every kind of band (open ends,
    bands past either edge, empty ones), and a million rows at once."""
    import itertools

    from archviz.cost.masks import band_count

    def by_rows(tq, tk, lo, hi):
        return sum(1 for i in range(tq) for j in range(tk) if lo <= j - i <= hi)

    ends = (-math.inf, -9, -4, -1, 0, 2, 7, math.inf)
    for tq, tk in ((0, 3), (1, 1), (5, 9), (9, 5), (8, 8)):
        for lo, hi in itertools.product(ends, ends):
            assert band_count(tq, tk, lo, hi) == by_rows(tq, tk, lo, hi), (tq, tk, lo, hi)
    n, w = 10**6, 4096
    assert band_count(n, n, 1 - w, 0) == w * (w + 1) // 2 + (n - w) * w  # the first w rows grow to w

"""Flex attention says how many positions it attends over, as sdpa and explicit softmax(QKᵀ)V do (issue 42): its
BlockMask's mask_mod is read on the CPU (every pair, or as a band where the pairs are many), and a mask_mod whose
layout is not known on meta (it reads the data) is counted as causal, said in a note. The fixture
(tests/data/flexmask/model.py) makes its BlockMask in forward; each figure is the formula written here:

    written   per layer: 4·B·H·T²·D (the dense reference scores every pair) + the projections
    attended  the same over the kept (query, key) pairs only
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from archviz.cost.masks import band_count, mask_mod_share

FLEX = Path(__file__).resolve().parent.parent / "data" / "flexmask" / "model.py"
B, T = 2, 64
DIM, H, LAYERS, VOCAB, W = 32, 4, 2, 64, 16  # the fixture's Config defaults


def _written() -> int:
    rows = B * T
    per_layer = 2 * rows * DIM * 3 * DIM + 2 * rows * DIM * DIM + 4 * B * H * T * T * (DIM // H)
    return LAYERS * per_layer + 2 * rows * DIM * VOCAB


def _attention(pairs: int) -> int:
    return LAYERS * 4 * B * H * pairs * (DIM // H)


def _cost(cli, mask: str) -> dict:
    r = cli("cost", FLEX, "--set", f"mask={json.dumps(mask)}", "--batch", B, "--seq", T, "--context", 8, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["prefill"]


@pytest.mark.parametrize("mask, pairs", [("causal", T * (T + 1) // 2),
                                         ("window", sum(min(i + 1, W) for i in range(T)))])
def test_flex_attended_from_the_block_masks_mask_mod(archviz_cli, mask, pairs):
    p = _cost(archviz_cli, mask)
    assert p["flops"] == _written()
    assert p["attended_flops"] == _written() - _attention(T * T) + _attention(pairs)
    assert set(p["masked_flops"]) == {f"layers.{i}" for i in range(LAYERS)}
    assert not any("flex" in n for n in p["notes"])


def test_a_layout_read_from_the_data_is_assumed_causal_and_said(archviz_cli):
    p = _cost(archviz_cli, "document")
    assert p["attended_flops"] == _written() - _attention(T * T) + _attention(T * (T + 1) // 2)
    assert any("flex attention" in n and "causal" in n and "assumed" in n for n in p["notes"])


def test_many_pairs_are_read_as_a_band():
    """Past the pairs evaluated one by one, sampled rows give the band: causal, a sliding window; a layout that is
    no band (blocks along the diagonal) is not known."""
    n, w = 1 << 13, 1024
    assert mask_mod_share(lambda b, h, q, kv: q >= kv, n, n) == (n * (n + 1) // 2) / (n * n)
    window = w * (w + 1) // 2 + (n - w) * w
    assert mask_mod_share(lambda b, h, q, kv: (q >= kv) & (q - kv < w), n, n) == window / (n * n)
    assert band_count(n, n, -(w - 1), 0) == window
    assert mask_mod_share(lambda b, h, q, kv: q // 64 == kv // 64, n, n) is None
    assert math.isclose(mask_mod_share(lambda b, h, q, kv: q // 64 == kv // 64, 1024, 1024), 64 / 1024)

"""FLOPs of blocks answered from the memo (archviz/cost/flops.py) when layers are called with their number as an
argument: the FLOP counter keys a block's run as the memo keys it (the layer number left out), so every layer gets
the FLOPs of the one that ran, none "unknown". Counts from the fixture's config: each layer's projection and the
output head, 2·T·in·out each (the scan's elementwise ops are not counted, as no elementwise op is)."""

from __future__ import annotations

import json

import pytest

from helpers import TESTS

FIX = TESTS / "data" / "numberedlayers"
T = 8


@pytest.fixture(scope="module")
def costs():
    from archviz.cost.measure import measure
    from archviz.cost.options import CostOptions
    from archviz.sources import BuildOptions

    build = BuildOptions(config=str(FIX / "config.json"))
    return {every: measure(str(FIX / "model.py"), build, CostOptions(seq=T, context=64, every_block=every))
            .extra("cost") for every in (False, True)}


def test_numbered_layers_get_the_flops_of_the_one_that_ran(costs):
    c = json.loads((FIX / "config.json").read_text())
    D, V, n = c["dim"], c["vocab_size"], c["n_layers"]
    memo, every = costs[False], costs[True]
    for stage, tokens in (("prefill", T), ("decode", 1)):
        assert not memo[stage]["unknown"] and not every[stage]["unknown"]
        assert memo[stage]["flops"] == every[stage]["flops"]
        assert sum(memo[stage]["flops"].values()) == n * 2 * tokens * D * D + 2 * tokens * D * V
        assert [memo[stage]["flops"][f"layers.{i}.proj"] for i in range(n)] == [2 * tokens * D * D] * n

"""The block memo across a transformers cache (archviz/shapes/cachememo.py): identical decoder layers called with
`past_key_values` are answered from the first one's run, each leaving its own cache layer as that one's was left.

The reference is the same pass with every block run (`--every-block`): the per-module decode FLOPs, the cache
entries read after the two fills, and the decode FLOPs at more context lengths must be the same, and the memo must
actually have answered layers in the cache passes.
"""

from __future__ import annotations

import pytest

from helpers import TINY


@pytest.mark.parametrize("model_type", ["deepseek_v3", "deepseek_v4", "gpt_oss"])
def test_memo_with_a_cache_equals_every_block(model_type):
    from archviz.cost.measure import measure
    from archviz.cost.options import CostOptions
    from archviz.shapes import memo
    from archviz.sources import BuildOptions

    build = BuildOptions(overrides=tuple(TINY[model_type].items()))

    hits: list[int] = []
    remove = memo.BlockMemo.remove

    def counted(self):
        hits.append(self.hits)
        remove(self)

    memo.BlockMemo.remove = counted
    try:
        a = measure(f"hf:{model_type}", build, CostOptions(seq=32, context=512, contexts=(64, 1024)))
    finally:
        memo.BlockMemo.remove = remove
    b = measure(f"hf:{model_type}", build, CostOptions(seq=32, context=512, contexts=(64, 1024), every_block=True))
    ca, cb = a.extra("cost"), b.extra("cost")
    assert ca["decode"]["flops"] == cb["decode"]["flops"] and sum(ca["decode"]["flops"].values()) > 0
    assert ca["kv"]["entries"] == cb["kv"]["entries"] and ca["kv"]["entries"]
    assert ca["curve"] == cb["curve"] and [p["L"] for p in ca["curve"]] == [64, 512, 1024]
    # forwards: the prefill, the two cache fills (one tracer) and the decode steps (another); past the prefill,
    # the cache passes answered layers from the memo too
    assert len(hits) == 3 and hits[1] > 0 and hits[2] > 0, hits

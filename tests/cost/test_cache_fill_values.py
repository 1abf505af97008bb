"""A cache object that keeps how full it is in a tensor's values (issue 42 item 7; tests/fixtures/anyinput/
seqlencache.py, in the style of an inference codebase's buffer cache: `filled` [B] made on the storage's device,
read with `.tolist()`, `.item()` and a truth test to decide the keys a step attends over). Meta holds no values, so
the code's bookkeeping keeps them in CPU twins (archviz.sources.kept_values, the meta build's twins): the decode
step at context C attends over the C cached tokens and the new one, as a real CPU run of the same step does. The
same in a package whose cache class lives in the engine module the model's file never imports
(tests/fixtures/enginecache, in the style of a chat codebase: `self.model.forward(ids, kv_cache=...)` in the loop, the
cache made from `m = self.model.config` and `**kw`, a dict of its keywords), found by data flow and made."""

from __future__ import annotations

import sys

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers import ANYINPUT, TESTS, anyinput

from archviz.cost.measure import measure
from archviz.cost.options import CostOptions
from archviz.sources.kept_values import values_kept
from archviz.sources.options import BuildOptions


def _real_step(m, a, context: int) -> int:
    """torch's count of one token after a fill of `context`, the cache made as the fixture's generate makes it."""
    torch.manual_seed(0)
    model = m.Decoder(a).eval()
    cache = m.SlotCache(a.n_layers, a.max_batch_size, context + 1, a.n_kv_heads, a.dim // a.n_heads)
    cache.reset()
    with torch.no_grad():
        model(torch.zeros(1, context, dtype=torch.long), cache=cache)
        assert cache.filled.tolist() == [context]
        with FlopCounterMode(display=False) as fc:
            model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
    return fc.get_total_flops()


def test_a_cache_whose_fill_level_is_a_tensor_attends_over_the_context():
    m = anyinput("seqlencache")
    a = m.Args()
    C = 40
    cost = measure(str(ANYINPUT / "seqlencache.py"), BuildOptions(), CostOptions(batch=1, seq=8, context=C)
                   ).extra("cost")
    hd = a.dim // a.n_heads
    weights = 2 * a.n_layers * (a.dim * (a.n_heads + 2 * a.n_kv_heads) * hd + a.n_heads * hd * a.dim
                                + 2 * a.dim * a.hidden) + 2 * a.dim * a.vocab_size
    attention = a.n_layers * 2 * 2 * (C + 1) * a.n_heads * hd  # scores and weighted values over C cached + 1 new
    real = _real_step(m, a, C)
    assert real == weights + attention
    assert sum(cost["decode"]["flops"].values()) == real
    notes = " ".join(cost["notes"])
    assert "lower bound" not in notes and "do not grow with the context" not in notes
    assert "kept their values" in notes and "tolist() of a tensor kept at seqlencache.py" in notes
    assert cost["kv"]["entries"] and any(e["name"] == "filled" and e["ratio"] is None for e in cost["kv"]["entries"])


def test_a_cache_made_in_a_module_the_model_does_not_import_is_found_and_filled():
    C = 40
    cost = measure(str(TESTS / "fixtures" / "enginecache" / "model.py"), BuildOptions(),
                   CostOptions(batch=1, seq=8, context=C)).extra("cost")
    sys.path.insert(0, str(TESTS / "fixtures"))
    try:
        from enginecache.engine import KVCache
        from enginecache.model import TinyConfig, TinyGPT
    finally:
        sys.path.remove(str(TESTS / "fixtures"))
    c = TinyConfig()
    model = TinyGPT(c).eval()
    cache = KVCache(1, c.n_kv_head, C + 1, c.n_embd // c.n_head, c.n_layer, "cpu", torch.float32)
    with torch.no_grad():
        model(torch.zeros(1, C, dtype=torch.long), kv_cache=cache)
        with FlopCounterMode(display=False) as fc:
            model(torch.zeros(1, 1, dtype=torch.long), kv_cache=cache)
    d, kv = c.n_embd, 2 * c.n_kv_head * (c.n_embd // c.n_head)
    weights = 2 * c.n_layer * (d * d + d * kv + d * d + 2 * (d * 2 * d)) + 2 * d * c.vocab_size  # q, kv, proj, MLP
    attention = c.n_layer * 2 * 2 * (C + 1) * c.n_embd  # over C cached + 1 new keys; n_head · head_dim = n_embd
    assert fc.get_total_flops() == weights + attention
    assert sum(cost["decode"]["flops"].values()) == fc.get_total_flops()
    assert any("KVCache(batch_size=1, seq_len=41" in n and "engine.py" in n for n in cost["notes"]), cost["notes"]


def test_small_integer_tensors_keep_their_values_and_the_rest_stays_on_meta():
    with values_kept() as notes:
        filled = torch.zeros((2,), dtype=torch.long, device="meta")
        filled += torch.tensor([5, 7], device="meta")
        assert filled.is_meta and filled.clamp(max=6).tolist() == [5, 6]
        assert [int(n) for n in filled] == [5, 7] and bool((filled > 4).all())
        ids = torch.tensor([[3, 1, 4]]).to("meta")  # values made on the CPU, moved to the pass's device
        assert ids.is_meta and ids.sum().item() == 8
        storage = torch.zeros((3, 4), device="meta")  # floating point: no values kept
        big = torch.arange(1 << 13, device="meta")  # past the twins' size: meta only
        for unknown in (storage.sum(), big):
            with pytest.raises((NotImplementedError, RuntimeError)):
                unknown.tolist()
    assert any("tolist() of a tensor kept at" in n for n in notes.items)


def test_the_token_ids_archviz_feeds_keep_no_values():
    """All zeros, they stand for no real input: a test on them is the pass's policy's, not an answer from zeros."""
    import archviz
    from archviz.shapes.inputs import default_inputs
    from archviz.sources import kept_values

    built = archviz.build(str(TESTS / "fixtures" / "enginecache" / "model.py"))
    with values_kept(), torch.device("meta"):
        args, kwargs = default_inputs(built, 1, 8)
        ids = [*args, *kwargs.values()][0]
        assert ids.is_meta and kept_values.kept_value(ids, "tolist") is None

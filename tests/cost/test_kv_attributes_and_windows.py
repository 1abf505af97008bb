"""KV caches a reference model keeps as plain tensor attributes (Llama 3's `self.cache_k = torch.zeros(...)`) and a
cache of `window_size + max_seq_len // compress_ratio` slots (DeepSeek-V4's) (issue 29): `cost` finds both, and its
bytes at every context length L equal what the model allocates when built for real on the CPU with max_seq_len = L
(each cache then holds exactly L tokens' worth)."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

from archviz.cost.kv import entry_bytes, per_token_bytes
from archviz.cost.measure import measure
from archviz.cost.options import CostOptions
from archviz.sources import BuildOptions
from archviz.sources.dispatch import build

FIX = pathlib.Path(__file__).parent.parent / "fixtures" / "kvcaches"
MODEL, CONFIG = str(FIX / "model.py"), str(FIX / "config.json")
CFG = json.loads((FIX / "config.json").read_text())
B = 2


@pytest.fixture(scope="module")
def entries():
    record = measure(MODEL, BuildOptions(config=CONFIG), CostOptions(batch=B, seq=16, context=1000))
    return record.extra("cost")["kv"]["entries"]


def _real_cache_bytes(L: int) -> int:
    """Bytes of every cache of the model built on the CPU for B sequences of L tokens, after a real prefill and a
    decode step up to L tokens (so the code that fills them ran)."""
    real = build(MODEL, BuildOptions(config=CONFIG, device="cpu", overrides=(("max_seq_len", L),
                                                                             ("max_batch_size", B))))
    model = real.model
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.02)
    with torch.no_grad():
        tokens = torch.randint(0, CFG["vocab_size"], (B, L))
        model(tokens[:, :-1], start_pos=0)
        model(tokens[:, -1:], start_pos=L - 1)
    held = 0
    for name, mod in model.named_modules():
        for attr in ("cache_k", "cache_v", "kv_cache"):
            t = getattr(mod, attr, None)
            if isinstance(t, torch.Tensor):
                held += t.numel() * t.element_size()
    return held


def test_both_kinds_of_cache_are_found(entries):
    layers = CFG["n_layers"]
    names = sorted((e["name"], e["layer"], e["ratio"], e.get("fixed", 0)) for e in entries)
    even = [i for i in range(layers) if i % 2 == 0]
    odd = [i for i in range(layers) if i % 2 == 1]
    assert names == sorted([(n, i, 1, 0) for n in ("cache_k", "cache_v") for i in even] +
                           [("kv_cache", i, CFG["compress_ratio"], CFG["window_size"]) for i in odd])
    head_dim = CFG["dim"] // CFG["n_heads"]
    per_token = len(even) * 2 * CFG["n_kv_heads"] * head_dim * 4 + len(odd) * CFG["dim"] * 4 / CFG["compress_ratio"]
    assert sum(per_token_bytes(e) for e in entries) == pytest.approx(per_token)


@pytest.mark.parametrize("L", [CFG["window_size"], 60, 97, 240])
def test_cache_bytes_at_every_length_agree_with_a_real_build(entries, L):
    assert sum(entry_bytes(e, B, L) for e in entries) == _real_cache_bytes(L)

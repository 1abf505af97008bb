"""The FLOP split by what the code does: a retention layer's scores and decayed weighted sum are attention, a
feed-forward pair named `glu` or `ff1` is the MLP; a pass over a latent is costed per denoising step with its real
sizes in the header; T never passes the model's own limit. Figures derived here from the fixtures' configs, or
counted by torch's FlopCounterMode on a real CPU run of the same fixture."""

from __future__ import annotations


import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers import ANYINPUT, anyinput

from archviz.cost.measure import measure
from archviz.cost.options import CostOptions
from archviz.cost.report import cost_report
from archviz.render.cost import cost_tables
from archviz.sources.options import BuildOptions

FIX = ANYINPUT
_module = anyinput


def test_a_retention_layer_is_attention_and_a_glu_the_mlp():
    c = _module("retention").Config()
    T = 64
    p = cost_report(measure(str(FIX / "retention.py"), options=CostOptions(seq=T))).prefill
    d, h = c.dim, c.heads
    retention = 5 * 2 * T * d * d + 2 * (2 * h * T * T * (d // h))  # q, k, v, g, out; q·kᵀ and (·decay)·v
    glu = 3 * 2 * T * d * c.ffn
    head = 2 * T * d * c.vocab_size
    assert p.flops == c.n_layers * (retention + glu) + head
    assert (p.attention, p.mlp, p.other) == (c.n_layers * retention, c.n_layers * glu, head)


def test_a_conformer_feed_forward_pair_is_the_mlp():
    """ff1 and ff2 hold a Linear d → 4d and one back: the MLP; the block's own q·kᵀ and weighted sum, and the qkv and
    output projections beside them, are attention."""
    c = _module("audio").Cfg()
    T = 64
    r = cost_report(measure(str(FIX / "audio.py"), options=CostOptions(seq=T)))
    t = (((T - 1) // 2 + 1) - 1) // 2 + 1  # frames after two Conv1d(k=3, s=2, p=1)
    d = c.dim
    ffn = 2 * (2 * t * d * 4 * d) * 2  # two pairs a block, each up and down
    attention = 2 * t * d * 3 * d + 2 * t * d * d + 2 * (2 * t * t * d)
    assert (r.prefill.mlp, r.prefill.attention) == (c.depth * ffn, c.depth * attention)


def test_a_latent_is_costed_per_denoising_step():
    m = _module("dit")
    cfg = m.Cfg()
    r = cost_report(measure(str(FIX / "dit.py")))
    latent = (cfg.in_channels, cfg.input_size, cfg.input_size)
    model = m.DiT(cfg)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(1, *latent), torch.zeros(1), torch.zeros(1, dtype=torch.long))
    assert r.prefill.flops == counter.get_total_flops()
    assert (r.unit, r.inputs, r.prefill.per_token) == ("denoising step", "[1, 4, 16, 16], [1], [1]", r.prefill.flops)
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(cost_tables(r))
    text = console.export_text()
    assert "one pass over [1, 4, 16, 16], [1], [1] (per denoising step)" in text and "prefill T=" not in text


def test_t_never_passes_the_models_limit():
    """A config's `sequence_len` is the model's limit: asked for more with --seq, the prefill runs at the limit."""
    limit = 48
    r = measure(str(FIX / "retention.py"), BuildOptions(overrides=(("sequence_len", limit),)), CostOptions(seq=4096))
    cost = r.extra("cost")
    assert cost["seq"] == cost["prefill"]["T"] == limit
    assert any("not at the 4,096 asked" in n for n in cost["notes"])

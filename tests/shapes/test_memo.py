"""The block memo (archviz/shapes/memo.py) with layers called with their number as an argument: zamba's decoder loop
calls `layer(hidden_states, original_hidden_states, layer_idx, ...)`, and a memo keyed on that int answered no layer,
so the pass ran the Mamba scan's Python loop over every token in all 76 layers (the gallery's 900 s timeout). The
layer number is left out of the key, as the layer number a block holds is left out of its kind.

The fixture (tests/data/numberedlayers) is a recurrent model in that style; the reference is the same pass with every
block run (--every-block)."""

from __future__ import annotations

import json

import pytest

from helpers import TESTS

FIX = TESTS / "data" / "numberedlayers"


@pytest.fixture(scope="module")
def passes():
    from archviz.pipeline import records_for
    from archviz.pipeline.options import PassOptions
    from archviz.sources import BuildOptions

    build = BuildOptions(config=str(FIX / "config.json"))
    return {every: records_for(str(FIX / "model.py"), build, PassOptions(shapes=True, seq=8, every_block=every))
            for every in (False, True)}


def test_layers_called_with_their_number_are_answered_from_the_first(passes):
    layers = json.loads((FIX / "config.json").read_text())["n_layers"]
    notes = passes[False].extra("shapes")["notes"]
    assert f"{layers - 1:,} calls of repeated blocks" in " ".join(notes), notes
    assert not any("repeated blocks" in n for n in passes[True].extra("shapes")["notes"])


def test_memo_records_equal_every_block(passes):
    memo, every = (passes[k] for k in (False, True))
    by_path = {m.path: m for m in every.modules}
    for m in memo.modules:
        assert m.calls == by_path[m.path].calls, m.path
    layers = [m for m in memo.modules if m.path.startswith("layers.") and m.path.count(".") == 1]
    assert len(layers) == json.loads((FIX / "config.json").read_text())["n_layers"] and all(m.called for m in layers)


NAMED_OUTPUTS = '''
from collections import namedtuple
from dataclasses import dataclass

import torch
from torch import nn

LayerOutput = namedtuple("LayerOutput", ["hidden_states", "gate"])


@dataclass
class ModelArgs:
    dim: int = 16
    n_layers: int = 3
    vocab_size: int = 32


class Layer(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.proj = nn.Linear(args.dim, args.dim)

    def forward(self, x):
        return LayerOutput(hidden_states=x + self.proj(x), gate=x.mean(-1))


class Transformer(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Layer(args) for _ in range(args.n_layers))

    def forward(self, tokens):
        h = self.embed(tokens)
        for layer in self.layers:
            out = layer(h)
            h = out.hidden_states * out.gate[..., None]
        return h
'''


def test_a_block_answered_from_the_memo_returns_its_namedtuple(tmp_path):
    """A layer returning a namedtuple its caller reads by field name (reformer's ReformerOutput): the memo's answer
    is the same namedtuple, not a bare tuple (reformer's pass died on `layer_outputs.attn_output`)."""
    from archviz.pipeline import records_for
    from archviz.pipeline.options import PassOptions
    from archviz.sources import BuildOptions

    (tmp_path / "model.py").write_text(NAMED_OUTPUTS)
    (tmp_path / "config.json").write_text('{"dim": 16, "n_layers": 3, "vocab_size": 32}')
    build = BuildOptions(config=str(tmp_path / "config.json"))
    memo, every = (records_for(str(tmp_path / "model.py"), build, PassOptions(shapes=True, seq=8, every_block=e))
                   for e in (False, True))
    assert "2 calls of repeated blocks" in " ".join(memo.extra("shapes")["notes"])
    assert [m.calls for m in memo.modules] == [m.calls for m in every.modules]

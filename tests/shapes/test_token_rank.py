"""Token ids [T] or [B, T] (issue 29): read from the forward's first use of them where the code makes it clear --
nanoGPT's `b, t = idx.size()`, mistral-inference's `(num_toks,) = input_ids.shape` one method further -- and tried
where it does not (gpt-oss hands them to its embedding first), the note saying which decided."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

import archviz
from archviz.shapes import trace_shapes
from archviz.shapes.token_rank import first_use_rank
from archviz.walk import walk

DATA = Path(__file__).resolve().parent.parent / "data" / "firsttry"


def _traced(name: str, config: bool = True):
    folder = DATA / name
    built = archviz.build(str(folder / "model.py"), config=str(folder / "config.json") if config else None)
    record = trace_shapes(built, walk(built))
    return record, json.loads((folder / "config.json").read_text()), record.extra("shapes")["notes"]


def _calls(record, path: str):
    return next(m for m in record.modules if m.path == path).calls[0]


def test_nanogpt_style_unpacks_b_t():
    record, cfg, notes = _traced("gptstyle")
    assert _calls(record, "wte").inputs == (("B", "T"),)
    assert _calls(record, "wte").outputs == (("B", "T", cfg["n_embd"]),)
    assert any(n.startswith("token ids [B, T], as the code's first use") and "`b, t = idx.size()`" in n and
               "GPT.forward (model.py:" in n for n in notes)


def test_gpt_oss_style_decided_by_retry():
    record, cfg, notes = _traced("flat", config=False)
    assert _calls(record, "block.0").inputs == (("T", cfg["hidden_size"]),)
    assert any(n.startswith("token ids [T], not [B, T]: the code's first use of them does not say") for n in notes)
    assert record.extra("shapes")["used"] == ["T"]  # no batch dim: nothing is named B


def test_packed_read_through_a_method_of_the_model():
    record, cfg, notes = _traced("packed")
    assert _calls(record, "norm").outputs == (("T", cfg["dim"]),)
    assert any("`(num_toks,) = input_ids.shape` in Packed.forward_partial (model.py:" in n for n in notes)


class _Emb(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)


class BatchByName(_Emb):
    def forward(self, tokens):
        device = tokens.device  # says nothing: looked past
        bsz = tokens.size(0)
        return self.emb(tokens.to(device)).view(bsz, -1, 4)


class LengthByName(_Emb):
    def forward(self, tokens):
        seqlen = len(tokens)
        return self.emb(tokens)[:seqlen]


class Asserted(_Emb):
    def forward(self, x):
        assert x.dim() == 1, "packed tokens"
        return self.emb(x)


class EitherRank(_Emb):
    def forward(self, x):
        if x.dim() == 1:  # takes both: the code does not say which
            x = x[None]
        return self.emb(x)


class SecondDim(_Emb):
    def forward(self, x):
        t = x.shape[1]
        return self.emb(x[:, :t])


class ByKeyword(_Emb):
    def forward(self, x):
        return self._run(ids=x)

    def _run(self, ids):
        n, = ids.shape
        return self.emb(ids)


class EmbeddingFirst(_Emb):
    def forward(self, x):
        h = self.emb(x)
        return h


def test_first_uses():
    ranks = {cls.__name__: first_use_rank(cls()) for cls in (BatchByName, LengthByName, Asserted, EitherRank,
                                                                SecondDim, ByKeyword, EmbeddingFirst)}
    assert {k: v and v[0] for k, v in ranks.items()} == {
        "BatchByName": 2, "LengthByName": 1, "Asserted": 1, "EitherRank": None, "SecondDim": 2, "ByKeyword": 1,
        "EmbeddingFirst": None}
    assert ranks["ByKeyword"][1].startswith("`n, = ids.shape` in ByKeyword._run (test_token_rank.py:")
    # each reading agrees with the code run for real
    assert BatchByName()(torch.zeros(3, 5, dtype=torch.long)).shape == (3, 5, 4)
    assert Asserted()(torch.zeros(5, dtype=torch.long)).shape == (5, 4)


def test_probe_takes_the_rank_the_meta_pass_took():
    """gpt-oss's style: the real pass of the reduced copy feeds [T] as the meta pass found it, and agrees."""
    from typer.testing import CliRunner

    from archviz.cli import app

    r = CliRunner().invoke(app, ["probe", str(DATA / "flat" / "model.py"), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["ok"] and out["agreement"] == 1.0

"""An encoder-decoder of its own making, `forward(src, tgt)` (issue 42, inputs of every kind): both arguments are
token ids, each of its own length -- src over T, tgt over T_tgt, the config's `max_tgt_len` where no input gives
another -- and a decode step grows the target, beside the source's T. The fixture is tests/fixtures/anyinput/seq2seq.py;
its FLOPs (matmuls: Linear 2·rows·in·out, scores and weighted sums 2·2·Tq·Tk·d), by its config, at source length S
and target length U:

    encoder layer: 4 projections 2·B·S·d·d each, attention 4·B·S·S·d, feed-forward 2·2·B·S·d·ff
    decoder layer: self-attention 4·2·B·U·d·d + 4·B·U·U·d; cross q, o 2·2·B·U·d·d, k, v 2·2·B·S·d·d,
                   attention 4·B·U·S·d; feed-forward 2·2·B·U·d·ff
    output: 2·B·U·d·V_tgt
"""

from __future__ import annotations

import json

import torch

from helpers import ANYINPUT, anyinput

B = 2


def _fixture():
    return anyinput("seq2seq")


def _flops(c, S: int, U: int) -> int:
    d, ff = c.d_model, c.d_ff
    enc = 8 * B * S * d * d + 4 * B * S * S * d + 4 * B * S * d * ff
    dec = 8 * B * U * d * d + 4 * B * U * U * d + 4 * B * U * d * d + 4 * B * S * d * d + 4 * B * U * S * d + \
        4 * B * U * d * ff
    return c.n_enc * enc + c.n_dec * dec + 2 * B * U * d * c.tgt_vocab


def test_the_formula_is_a_real_runs():
    """The formula against torch's own count of the fixture run on CPU, at a source of 9 and a target of 5."""
    from torch.utils.flop_counter import FlopCounterMode

    m = _fixture()
    c = m.Config()
    src, tgt = torch.randint(0, c.src_vocab, (B, 9)), torch.randint(0, c.tgt_vocab, (B, 5))
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        m.Seq2Seq(c).eval()(src, tgt)
    assert fc.get_total_flops() == _flops(c, 9, 5)


def _cost(cli, seq: int, *more: str) -> dict:
    r = cli("cost", ANYINPUT / "seq2seq.py", "--batch", B, "--seq", seq, "--json", *more)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_target_tokens_take_their_own_length_and_decode(archviz_cli):
    c = _fixture().Config()
    d = _cost(archviz_cli, 16)  # tgt: the config's max_tgt_len; a decode step reruns the target at its longest
    assert d["prefill"]["flops"] == _flops(c, 16, c.max_tgt_len) != _flops(c, 16, 16)
    assert d["decode"]["flops"] == _flops(c, 16, c.max_tgt_len) and d["context"] == c.max_tgt_len - 1
    notes = " ".join(d["notes"])
    assert f"T_tgt = {c.max_tgt_len}: tgt is a sequence of its own beside src's T (the config's max_tgt_len)" in notes
    assert "no cache" in notes and "position table" not in notes  # src's token table is no position table
    d = _cost(archviz_cli, 9, "--input", "tgt=B,T_tgt=5", "--context", 7)  # another target length; a shorter step
    assert d["prefill"]["flops"] == _flops(c, 9, 5)
    assert d["decode"]["flops"] == _flops(c, 9, 8)  # the new target token is the 8th, the source still 9


def test_a_target_no_config_sizes_takes_its_position_tables_rows(archviz_cli, tmp_path):
    """`forward(src_seq, trg_seq, src_mask)` whose decoder holds a fixed position table [1, 6, D] and no config names
    the target's length: the target takes the table's 6 positions (not the stated 512 the table would refuse), and a
    decode step reruns at most those, with the mask given as the prefill's."""
    (tmp_path / "m.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "class Decoder(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.emb = nn.Embedding(30, 8)\n"
        "        self.register_buffer('pos_table', torch.zeros(1, 6, 8))\n"
        "        self.proj = nn.Linear(8, 8)\n\n"
        "    def forward(self, trg_seq, mem):\n"
        "        y = self.emb(trg_seq) + self.pos_table[:, :trg_seq.size(1)]\n"
        "        return self.proj(y) @ mem.transpose(1, 2)\n\n"
        "class Pair(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.src_emb = nn.Embedding(20, 8)\n"
        "        self.decoder = Decoder()\n\n"
        "    def forward(self, src_seq, trg_seq, src_mask):\n"
        "        return self.decoder(trg_seq, self.src_emb(src_seq))\n")
    r = archviz_cli("cost", tmp_path / "m.py", "--seq", 5, "--input", "src_mask=B,1,T:bool", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["prefill"]["flops"] == 2 * 6 * 8 * 8 + 2 * 6 * 8 * 5  # B = 1: proj, then [6, 8] @ [8, 5]
    assert d["decode"]["flops"] == d["prefill"]["flops"] and d["context"] == 5  # the 6th target token, the last
    assert "T_trg_seq = 6" in " ".join(d["notes"])

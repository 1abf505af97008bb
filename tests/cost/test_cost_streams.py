"""Several sequence inputs, each its own length (issue 42): a joint-attention model takes image tokens over T and
text tokens beside them; the text gets a dim of its own, T_txt, sized by the config's `max_txt_len` or by the
`input` option, never T. The fixture is tests/data/twostream/model.py; its FLOPs per denoising step, by its config:

    per block, over the joint sequence L = L_img + L_txt: qkv 2·B·L·h·3h, out 2·B·L·h², MLP 2·B·L·h·4h·2,
    scores and weighted sums 4·B·L²·h; embedders: 2·B·(L_img·C + L_txt·D_txt + 1·1 + L·3)·h; final 2·B·L_img·h·C
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

FIX = Path(__file__).resolve().parent.parent / "data" / "twostream"
B, L_IMG = 2, 16


def _fixture():
    # its own module name: another fixture's model.py may already sit in sys.modules as "model"
    spec = importlib.util.spec_from_file_location("twostream_model", FIX / "model.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _flops(c, l_img: int, l_txt: int) -> int:
    h, L = c.hidden, l_img + l_txt
    block = 2 * B * L * h * 3 * h + 2 * B * L * h * h + 2 * B * L * h * 4 * h * 2 + 4 * B * L * L * h
    embed = 2 * B * (l_img * c.in_channels + l_txt * c.text_dim + 1 + L * len(c.axes_dim)) * h
    return c.depth * block + embed + 2 * B * l_img * h * c.in_channels


def _cost(cli, *more: str) -> dict:
    r = cli("cost", FIX / "model.py", "--batch", B, "--seq", L_IMG, "--json", *more)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_formula_is_a_real_runs():
    from torch.utils.flop_counter import FlopCounterMode

    m = _fixture()
    c = m.Config()
    lt, axes = c.max_txt_len, len(c.axes_dim)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        m.JointDiT(c).eval()(torch.randn(B, L_IMG, c.in_channels), torch.randn(B, L_IMG, axes),
                             torch.randn(B, lt, c.text_dim), torch.randn(B, lt, axes), torch.rand(B))
    assert fc.get_total_flops() == _flops(c, L_IMG, lt)


@pytest.mark.parametrize("given, l_txt", [((), None), (("--input", "txt=B,T_txt=40,24"), 40)])
def test_text_tokens_take_their_own_length(archviz_cli, given, l_txt):
    c = _fixture().Config()
    l_txt = l_txt or c.max_txt_len  # the config's max_txt_len where no input gives another
    d = _cost(archviz_cli, *given)
    assert d["unit"] == "denoising step"
    assert d["prefill"]["flops"] == _flops(c, L_IMG, l_txt) != _flops(c, L_IMG, L_IMG)
    assert d["inputs"].startswith(f"[{B}, {L_IMG}, {c.in_channels}], [{B}, {L_IMG}, 3], [{B}, {l_txt}, {c.text_dim}], "
                                  f"[{B}, {l_txt}, 3]")
    notes = " ".join(d["notes"])
    assert f"T_txt = {l_txt}" in notes
    assert ("the config's max_txt_len" in notes) == (not given)


def test_an_optional_sequence_not_given_is_named(archviz_cli, tmp_path):
    """`forward(x, t, context=None)` whose context goes to a Linear: left out, the pass dies on None there; the line
    names the argument and the input spec its Linear asks for."""
    (tmp_path / "m.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "class Cross(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.x_in = nn.Linear(8, 16)\n"
        "        self.ctx_in = nn.Linear(12, 16)\n\n"
        "    def forward(self, x, t, context=None):\n"
        "        c = self.ctx_in(context)\n"
        "        return self.x_in(x) + c.mean(1, keepdim=True) + t[:, None, None]\n")
    r = archviz_cli("cost", tmp_path / "m.py", "--seq", 8)
    assert r.returncode == 2
    assert "Cross.forward's context (optional, handed to self.ctx_in, a Linear of 12 inputs) was not given" in r.stderr
    r = archviz_cli("cost", tmp_path / "m.py", "--seq", 8, "--input", "context=B,T_ctx=5,12", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prefill"]["flops"] == 2 * 8 * 8 * 16 + 2 * 5 * 12 * 16  # B = 1

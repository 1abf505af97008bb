"""`package.module:callable` sources: --set passes keyword arguments to the callable (and names dims); options that
only another kind of source reads are refused, not ignored; a child called inside torch's own module code gets its
call site there."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

import archviz
from archviz.errors import SourceError
from archviz.shapes import trace_shapes
from archviz.walk import walk


MODEL = textwrap.dedent('''
    import torch.nn as nn


    class Encoder(nn.Module):
        def __init__(self, width=32, depth=2, vocab=50):
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.blocks = nn.ModuleList(
                [nn.TransformerEncoderLayer(width, 4, 3 * width, batch_first=True) for _ in range(depth)])

        def forward(self, ids):
            h = self.embed(ids)
            for block in self.blocks:
                h = block(h)
            return h
''')


@pytest.fixture()
def encoder(tmp_path, monkeypatch):
    (tmp_path / "enc_model.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "enc_model:Encoder"
    sys.modules.pop("enc_model", None)


def layer_params(w: int) -> int:
    # TransformerEncoderLayer(w, 4, 3w): in_proj (3w x w + 3w), out_proj (w x w + w), linear1 (3w x w + 3w),
    # linear2 (w x 3w + w), two LayerNorms (2w each)
    return (3 * w * w + 3 * w) + (w * w + w) + (3 * w * w + 3 * w) + (3 * w * w + w) + 4 * w


def test_set_passes_keyword_arguments_and_names_dims(encoder):
    rec = archviz.load(encoder, overrides={"width": 64, "depth": 3})
    assert rec.summary.parameters == 50 * 64 + 3 * layer_params(64)
    assert dict(rec.source.overrides) == {"width": 64, "depth": 3}
    built = archviz.build(encoder, overrides={"width": 64})
    traced = trace_shapes(built, walk(built))  # default input: token ids [B, T]
    from archviz.render.dims import DimNames
    block = traced.module("blocks.0")
    assert [list(s) for s in block.calls[0].outputs] == [["B", "T", 64]]
    assert DimNames(dict(traced.source.config)).name(64) == "width"


def test_set_of_an_argument_the_factory_lacks_is_one_clear_error(encoder):
    with pytest.raises(SourceError) as e:
        archviz.build(encoder, overrides={"hidden": 64})
    assert "Encoder does not take hidden" in str(e.value) and "keyword arguments" in e.value.hint


def test_a_required_argument_not_given_is_asked_for_by_name(tmp_path, monkeypatch, archviz_cli):
    """A factory's argument without a default (`make(width)`): named with the option that gives it, before anything
    is built; given, the model's count follows from it."""
    (tmp_path / "req_model.py").write_text("from torch import nn\n\n\ndef make(width, *, depth):\n"
                                           "    return nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    try:
        with pytest.raises(SourceError) as e:
            archviz.build("req_model:make", overrides={"depth": 2})
        assert "make needs width" in e.value.message and e.value.options == ("set",)
        r = archviz_cli("summary", "req_model:make")
        assert r.returncode == 2 and "needs width, depth" in r.stderr and "--set width=VALUE" in r.stderr
        assert archviz.load("req_model:make", overrides={"width": 8, "depth": 3}).summary.parameters == 3 * (8 * 8 + 8)
    finally:
        sys.modules.pop("req_model", None)


@pytest.mark.parametrize("option, value, words", [
    ("world_size", 2, "`world_size`"), ("rank", 1, "`rank`"), ("model_class", "Encoder", "`model_class`"),
    ("trust_remote_code", True, "`trust_remote_code=True`"),
])
def test_options_of_another_kind_of_source_are_refused(encoder, option, value, words):
    """Refused in the words a Python caller gives the option with; the error carries the option's key."""
    with pytest.raises(SourceError) as e:
        archviz.build(encoder, **{option: value})
    assert words in str(e.value) and "package.module:callable" in str(e.value)
    assert e.value.options == (option.replace("_", "-"),) and "--" not in str(e.value)


def test_hf_refuses_reference_options_on_the_command_line(archviz_cli):
    r = archviz_cli("summary", "hf:llama", "--world-size", "2")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: hf:llama: --world-size applies to a reference model.py"), r.stderr


def test_children_of_torch_modules_are_called_where_torch_calls_them(encoder):
    import inspect as pyinspect

    built = archviz.build(encoder)
    rec = trace_shapes(built, walk(built), inputs=((torch.zeros(2, 5, dtype=torch.long, device="meta"),), {}))
    # where torch's own TransformerEncoderLayer calls its linear1 and self_attn, read from torch's source here
    src, first = pyinspect.getsourcelines(torch.nn.TransformerEncoderLayer)
    file = "torch/nn/modules/transformer.py"

    def line_of(text: str) -> int:
        return first + next(i for i, line in enumerate(src) if text in line)

    site = rec.module("blocks.0.linear1").call_sites
    assert [(s.file, s.line, s.code) for s in site] == [(file, line_of("self.linear1(x)"), "self.linear1(x)")]
    attn = rec.module("blocks.1.self_attn").call_sites
    assert len(attn) == 1 and attn[0].file == file and attn[0].code.startswith("self.self_attn(")
    # the block itself is called from the user's forward
    blocks = rec.module("blocks.0").call_sites
    assert [(s.file, s.code) for s in blocks] == [("enc_model.py", "block(h)")]

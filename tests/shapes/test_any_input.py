"""Inputs that are not token ids: the default first input comes from the module that first takes it (a Conv2d behind
a class token at the root, a Conv1d front end), a conditioned model gets its timestep and class label beside its
latent, and `--input` stands in for the default of a `forward(*args, **kwargs)`. Shapes equal a real CPU run of the
same fixture at the pass's sizes; sizes that the pass names derive from the fixture's config."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import ANYINPUT, anyinput
from realrun import real_calls, record_calls

import archviz
from archviz.cli.flags import cli_text
from archviz.errors import ShapeError
from archviz.records import to_json_dict
from archviz.shapes import trace_shapes
from archviz.walk import walk

FIX = ANYINPUT
_module = anyinput


def _traced(name: str, specs: list[str] | None = None) -> dict:
    built = archviz.build(str(FIX / f"{name}.py"))
    return to_json_dict(trace_shapes(built, walk(built), input_specs=specs))


def test_an_image_model_whose_root_holds_its_class_token():
    """The root's cls_token and position table are no consumer: the Conv2d is, and the table's 16 + 1 rows size
    the image (4 × 4 patches of 8: 32 × 32, the config's `res`), not 224."""
    m = _module("vitcls")
    cfg = m.Cfg()
    rec = _traced("vitcls")
    shapes = rec["extras"]["shapes"]
    assert shapes["used"] == ["B"]
    B = shapes["B"]
    image = (cfg.in_chans, cfg.res, cfg.res)
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", *image]]
    assert record_calls(rec, numeric={"B": B}) == real_calls(m.ViT(cfg), torch.zeros(B, *image))


def _over_time(name: str) -> tuple:
    """The fixture NAME's module, its Cfg(), its traced records and the pass's B and T, which both name dims."""
    m = _module(name)
    rec = _traced(name)
    shapes = rec["extras"]["shapes"]
    assert set(shapes["used"]) == {"B", "T"}
    return m, m.Cfg(), rec, shapes["B"], shapes["T"]


def test_a_strided_conv_front_end_keeps_the_time_axis_symbolic():
    """A spectrogram [B, n_mels, T] from the first Conv1d; the pass's T is a multiple of the two stride-2
    convolutions' product, so after them the time axis reads T/2 and T/4 (the code's (T + 2·1 − 3) // 2 + 1,
    exactly), never a constant."""
    m, cfg, rec, B, T = _over_time("audio")
    encoder = m.Encoder(cfg)
    assert T % (encoder.conv1.stride[0] * encoder.conv2.stride[0]) == 0
    calls = {x["path"]: x["calls"][0] for x in rec["modules"] if x.get("calls")}
    assert calls[""]["inputs"] == [["B", cfg.n_mels, "T"]]
    assert calls["conv1"]["outputs"] == [["B", cfg.dim, "T/2"]]
    assert calls["conv2"]["outputs"] == [["B", cfg.dim, "T/4"]]
    assert calls[""]["outputs"] == [["B", "T/4", cfg.dim]]
    half = (T + 2 - 3) // 2 + 1  # Conv1d(k=3, s=2, p=1)
    quarter = (half + 2 - 3) // 2 + 1
    real = real_calls(encoder, torch.zeros(B, cfg.n_mels, T))
    numeric = {"B": B, "T": T, "T/2": half, "T/4": quarter}
    assert record_calls(rec, numeric=numeric) == real
    assert (half, quarter) == (T / 2, T / 4)


def test_a_latent_with_its_timestep_and_class_label():
    m = _module("dit")
    cfg = m.Cfg()
    rec = _traced("dit")
    shapes = rec["extras"]["shapes"]
    B = shapes["B"]
    latent = (cfg.in_channels, cfg.input_size, cfg.input_size)
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", *latent], ["B"], ["B"]]
    real = real_calls(m.DiT(cfg), torch.zeros(B, *latent), torch.zeros(B), torch.zeros(B, dtype=torch.long))
    assert record_calls(rec, numeric={"B": B}) == real
    assert any("t=[B] float32" in n and "y=[B] int64" in n for n in shapes["notes"])


def test_input_stands_in_for_the_default_of_a_star_args_forward():
    """`forward(*args, **kwargs)`: the token ids the pass would pass positionally give way to the named input."""
    m = _module("argsfwd")
    rec = _traced("argsfwd", ["tokens=B,T", "bias=B,T,16"])
    shapes = rec["extras"]["shapes"]
    B, T = shapes["B"], shapes["T"]
    real = real_calls(m.Wrapper(m.Cfg()), tokens=torch.zeros(B, T, dtype=torch.long), bias=torch.zeros(B, T, 16))
    assert record_calls(rec, numeric={"B": B, "T": T}) == real


def _traced_class(name: str, cls: str, specs: list[str] | None = None) -> dict:
    built = archviz.build(str(FIX / f"{name}.py"), model_class=cls)
    return to_json_dict(trace_shapes(built, walk(built), input_specs=specs))


def test_a_list_of_dicts_as_a_promptable_segmenter_takes_it():
    m = _module("promptable")
    cfg = m.Config()
    size = 4 * cfg.patch
    spec = f"batched_input=[{{image: 3,{size},{size}, original_size: list:40,48}}, {{image: 3,{size},{size}, " \
           "original_size: list:40,48}]"
    rec = _traced_class("promptable", "Segmenter", [spec])
    records = [{"image": torch.zeros(3, size, size), "original_size": [40, 48]} for _ in range(2)]
    assert record_calls(rec) == real_calls(m.Segmenter(cfg), records)
    assert rec["modules"][0]["calls"][0]["outputs"] == [[1, 1, 40, 48], [1, 1, 40, 48]]
    rec = _traced_class("promptable", "Segmenter")  # without it: B records of what the code reads, at 224²
    B = rec["extras"]["shapes"]["B"]
    records = [{"image": torch.zeros(3, 224, 224), "original_size": [224, 224]} for _ in range(B)]
    assert record_calls(rec, numeric={"B": B}) == real_calls(m.Segmenter(cfg), records)


def test_a_dataclass_of_inputs():
    """forward(self, inputs: Batch) reads inputs.tokens: the pass fills the dataclass's tensor fields with token ids,
    and `--input 'inputs={tokens: B,T}'` gives them; a field it does not have is named with the fields it has."""
    m = _module("promptable")
    for specs in (None, ["inputs={tokens: B,T}"]):
        rec = _traced_class("promptable", "Tagger", specs)
        shapes = rec["extras"]["shapes"]
        B, T = shapes["B"], shapes["T"]
        assert set(shapes["used"]) == {"B", "T"}
        real = real_calls(m.Tagger(m.Config()), m.Batch(tokens=torch.zeros(B, T, dtype=torch.long)))
        got = record_calls(rec, numeric={"B": B, "T": T})
        assert got.pop("")[0]["inputs"] == [[B, T]]  # the dataclass's tensor (the real run's hooks see no tensor)
        assert got == {path: calls for path, calls in real.items() if path}
    with pytest.raises(ShapeError) as e:
        _traced_class("promptable", "Tagger", ["inputs={tokns: B,T}"])
    assert e.value.message == "Batch has no field tokns" and e.value.hint == "its fields: tokens, labels"


def test_a_fixed_audio_window_from_the_position_table():
    """n_audio_ctx rows after a stride-2 front end: a window of 2 · n_audio_ctx frames, which the forward asserts."""
    m = _module("window")
    d = m.Dims()
    rec = _traced("window")
    B = rec["extras"]["shapes"]["B"]
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", d.n_mels, 2 * d.n_audio_ctx]]
    real = real_calls(m.AudioEncoder(d), torch.zeros(B, d.n_mels, 2 * d.n_audio_ctx))
    assert record_calls(rec, numeric={"B": B}) == real


def test_patches_cut_by_a_reshape_and_embedded_by_a_linear():
    """Linear(C·p², D) after a LayerNorm, and a 2-D position table of n² + 1 rows: a [C, n·p, n·p] image."""
    m = _module("linpatch")
    c = m.Config()
    rec = _traced("linpatch")
    B = rec["extras"]["shapes"]["B"]
    image = (c.channels, c.side, c.side)
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", *image]]
    assert record_calls(rec, numeric={"B": B}) == real_calls(m.PatchViT(c), torch.zeros(B, *image))


def test_pooling_and_a_reshape_keep_the_time_axis_symbolic():
    m = _module("pool")
    c = m.Cfg()
    rec = _traced("pool")
    shapes = rec["extras"]["shapes"]
    B, T = shapes["B"], shapes["T"]
    calls = {x["path"]: x["calls"][0] for x in rec["modules"] if x.get("calls")}
    assert calls["pool"]["outputs"] == [["B", c.dim, "T/2"]]
    assert calls["proj"]["inputs"] == [["B", "T/4", 2 * c.dim]]
    real = real_calls(m.Enc(c), torch.zeros(B, c.n_mels, T))
    assert record_calls(rec, numeric={"B": B, "T": T, "T/2": T // 2, "T/4": T // 2 // 2}) == real


def test_an_inputs_file_holds_the_same_inputs(tmp_path):
    """`--input @inputs.toml` (or .json): tables of dicts, numbers and lists, as the inline form writes them."""
    m = _module("promptable")
    size = 4 * m.Config().patch
    toml = tmp_path / "inputs.toml"
    toml.write_text("multimask_output = false\n" + f'[[batched_input]]\nimage = "3,{size},{size}"\n'
                    "original_size = [40, 48]\n")
    rec = _traced_class("promptable", "Segmenter", [f"@{toml}"])
    real = real_calls(m.Segmenter(m.Config()), [{"image": torch.zeros(3, size, size), "original_size": [40, 48]}])
    assert record_calls(rec) == real
    bad = tmp_path / "bad.json"
    bad.write_text('{"batched_input": [{"image": [[1]]}]}')
    with pytest.raises(ShapeError) as e:
        _traced_class("promptable", "Segmenter", [f"@{bad}"])
    # the path as the message shows it (a long one shortened from the middle), then what is wrong where
    assert e.value.message.startswith("inputs file '") and "bad.json" in e.value.message
    assert e.value.message.endswith("': batched_input.image is neither dims, a number, a list of ints nor tables of "
                                    "them")


def _at(dim, B: int, T: int) -> int:
    """A recorded dim at (B, T), computed here: B, T, T/r (the code's // at a multiple of r) and T/r+c or T+c."""
    if isinstance(dim, int):
        return dim
    value = {"B": B, "T": T}.get(dim)
    if value is not None:
        return value
    import re
    found = re.fullmatch(r"T(?:/(\d+))?([+-]\d+)?", dim)
    assert found, f"not an expression of T: {dim}"
    return T // int(found.group(1) or 1) + int(found.group(2) or 0)


def test_a_waveform_codec_keeps_samples_and_frames_symbolic():
    """A waveform [B, channels, T] from the Conv1d stem (the LSTM's [4·H, H] input weights are no position table
    fixing a window): the pass's T is a multiple of the strides' product prod(ratios), the frames after each strided
    convolution read T over the running product (T/2, T/8, T/40 for ratios 5, 4, 2), the LSTM runs over T/40
    frames, and the decoder gives T samples back, as a real CPU run at the same B and T does."""
    m, cfg, rec, B, T = _over_time("seanet")
    hop = math.prod(cfg.ratios)
    assert T % hop == 0 and T // hop >= 2
    calls = {x["path"]: x["calls"][0] for x in rec["modules"] if x.get("calls")}
    assert calls[""]["inputs"] == [["B", cfg.channels, "T"]]
    assert calls[""]["outputs"] == [["B", cfg.channels, "T"]]
    assert calls["encoder"]["outputs"] == [["B", cfg.dimension, f"T/{hop}"]]
    width = cfg.n_filters * 2 ** len(cfg.ratios)
    lstm = next(p for p in calls if p.startswith("encoder") and p.endswith(".lstm"))
    assert calls[lstm]["inputs"] == [["B", f"T/{hop}", width]]
    model = m.Codec(cfg)
    strided = [p for p, mod in model.named_modules() if isinstance(mod, torch.nn.Conv1d) and mod.stride[0] > 1]
    running = [math.prod(list(reversed(cfg.ratios))[:i + 1]) for i in range(len(cfg.ratios))]
    assert [calls[p]["outputs"][0][-1] for p in strided] == [f"T/{r}" for r in running]
    real = real_calls(model, torch.zeros(B, cfg.channels, T))
    got = {p: [{k: [[_at(d, B, T) for d in s] for s in c[k]] for k in c} for c in cs]
           for p, cs in record_calls(rec).items()}
    assert got == real
    assert real[""][0]["outputs"] == [[B, cfg.channels, T]]

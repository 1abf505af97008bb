"""Forward inputs read from the code (issue 42 items 5 and 7): a list of dicts whose keys the forward reads, made as
B records of the image its first consumer takes, a required bool given a default, and an encoder-decoder speech
model fed a window of mel frames and token ids capped at its decoder's position table. Shapes equal a real CPU run
of the same fixture; sizes and FLOPs derive from the fixture's config or a real run counted by torch."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers import ANYINPUT, anyinput
from realrun import real_calls, record_calls

import archviz
from archviz.cli.flags import cli_text
from archviz.cost.measure import measure
from archviz.cost.options import CostOptions
from archviz.errors import ShapeError
from archviz.records import to_json_dict
from archviz.shapes import trace_shapes
from archviz.shapes.structured import record_keys
from archviz.sources.options import BuildOptions
from archviz.walk import walk


def _traced(name: str, cls: str, specs: list[str] | None = None) -> dict:
    built = archviz.build(str(ANYINPUT / f"{name}.py"), model_class=cls)
    return to_json_dict(trace_shapes(built, walk(built), input_specs=specs))


def test_record_keys_as_the_forward_reads_them():
    m = anyinput("promptreq")
    required, optional = record_keys(m.PromptSegmenter(), "batched_input")
    assert required == ["image", "original_size"]  # point_coords/point_labels only under `"point_coords" in record`
    assert optional == ["boxes", "point_coords", "point_labels"]


def test_a_list_of_dicts_and_a_required_bool_get_defaults_from_the_code():
    """The image: 3 channels of the first Conv2d at patch × n, n the grid position table's side (the config's
    img_size); original_size: the image's size; multimask_output: False (annotated bool). Noted with the --input
    forms, and `--input multimask_output=bool:true` takes the other branch."""
    m = anyinput("promptreq")
    c = m.Config()
    side = (c.img_size // c.patch) * c.patch
    rec = _traced("promptreq", "PromptSegmenter")
    shapes = rec["extras"]["shapes"]
    B = shapes["B"]
    assert shapes["used"] == ["B"]
    records = [{"image": torch.zeros(3, side, side), "original_size": [side, side]} for _ in range(B)]
    real = real_calls(m.PromptSegmenter(c), records, False)  # a call per record: the records keep each shape once
    assert record_calls(rec, numeric={"B": B}) == {k: [c for i, c in enumerate(v) if c not in v[:i]]
                                                   for k, v in real.items()}
    notes = cli_text(" ".join(shapes["notes"]))  # as the CLI prints them
    assert f"--input 'batched_input=[{{image: 3,{side},{side}, original_size: list:{side},{side}}}]'" in notes
    assert "multimask_output=False (annotated bool)" in notes and "multimask_output=bool:true" in notes
    rec = _traced("promptreq", "PromptSegmenter", ["multimask_output=bool:true"])
    decoder = next(x for x in rec["modules"] if x["path"] == "decoder")
    assert decoder["calls"][0]["outputs"] == [[1, c.n_masks, side // c.patch, side // c.patch]]


def test_a_record_key_that_cannot_be_made_is_asked_for_with_the_form():
    with pytest.raises(ShapeError) as e:
        _traced("promptreq", "Tracker")
    assert "--input 'batched_input=[{image: 3,1024,1024" in cli_text(e.value.hint)


def _real_flops(model: torch.nn.Module, *args) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(*args)
    return fc.get_total_flops()


def test_a_speech_model_gets_its_window_and_token_ids_capped_at_its_positions():
    """mel [B, n_mels, 2 · n_audio_ctx] from the Conv1d front end and the encoder's position buffer (not the
    decoder's table); tokens [B, T] for the decoder's token table. `cost` runs T = n_text_ctx (the position table
    beside the token table), its prefill FLOPs those torch counts in a real CPU run, and a decode step that fits
    the positions: the decoder alone with the kv_cache its install_kv_cache_hooks fills, as its decoding runs."""
    m = anyinput("speech")
    d = m.Dims()
    rec = _traced("speech", "SpeechModel")
    shapes = rec["extras"]["shapes"]
    B, T = shapes["B"], shapes["T"]
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", d.n_mels, 2 * d.n_audio_ctx], ["B", "T"]]
    model = m.SpeechModel(d)
    mel = torch.zeros(B, d.n_mels, 2 * d.n_audio_ctx)
    assert record_calls(rec, numeric={"B": B, "T": T}) == real_calls(model, mel, torch.zeros(B, T, dtype=torch.long))
    cost = measure(str(ANYINPUT / "speech.py"), BuildOptions(model_class="SpeechModel"),
                   CostOptions(batch=1)).extra("cost")
    assert cost["seq"] == d.n_text_ctx
    full = torch.zeros(1, d.n_text_ctx, dtype=torch.long)
    assert sum(cost["prefill"]["flops"].values()) == _real_flops(model, mel[:1], full)
    # decode as its decoding runs: the decoder alone with the cache its hooks fill, one token after n_text_ctx - 1
    L = d.n_text_ctx - 1
    cache, hooks = model.install_kv_cache_hooks()
    with torch.no_grad():
        xa = model.encoder(mel[:1])
        model.decoder(torch.zeros(1, L, dtype=torch.long), xa, kv_cache=cache)
        with FlopCounterMode(display=False) as fc:
            model.decoder(torch.zeros(1, 1, dtype=torch.long), xa, kv_cache=cache)
    assert sum(cost["decode"]["flops"].values()) == fc.get_total_flops()
    per_token = sum(e["width"] * e["element_bytes"] for e in cost["kv"]["entries"] if e["ratio"] == 1)
    assert per_token == 2 * len(model.decoder.blocks) * d.n_state * 4  # self-attention's keys and values
    fixed = sum(e["width"] * e["element_bytes"] for e in cost["kv"]["entries"] if e["ratio"] is None)
    assert fixed == 2 * len(model.decoder.blocks) * d.n_audio_ctx * d.n_state * 4  # cross-attention's, over audio
    notes = " ".join(cost["notes"])
    assert f"decode step at context {L}" in notes and "install_kv_cache_hooks() makes the cache" in notes
    assert cost["context"] == L  # the header's L is the context the step ran at, not the one asked


def test_a_cache_object_passed_into_forward_is_made_as_its_generate_makes_it():
    """`forward(tokens, cache: Optional[KVCache] = None)`: the decode step runs with a KVCache made from the
    fixture's generate (the model's args, the window as the context + 1), filled by a prefill of L tokens; its
    FLOPs equal torch's count of the same step on CPU, its KV per token 2 · layers · kv heads · head dim · 4 B."""
    m = anyinput("cachearg")
    a = m.Args()
    L = 40
    cost = measure(str(ANYINPUT / "cachearg.py"), BuildOptions(), CostOptions(batch=1, seq=8, context=L)
                   ).extra("cost")
    model = m.Decoder(a).eval()
    cache = m.KVCache(a.n_layers, a.max_batch_size, L + 1, a.n_kv_heads, a.dim // a.n_heads)
    cache.reset()
    with torch.no_grad():
        model(torch.zeros(1, L, dtype=torch.long), cache=cache)
    assert sum(cost["decode"]["flops"].values()) == _real_flops(model, torch.zeros(1, 1, dtype=torch.long), cache)
    per_token = sum(e["width"] * e["element_bytes"] for e in cost["kv"]["entries"] if e["ratio"] == 1)
    assert per_token == 2 * a.n_layers * a.n_kv_heads * (a.dim // a.n_heads) * 4
    assert any("KVCache(" in n and "made as its generate makes it" in n for n in cost["notes"])
    assert not any("do not grow with the context" in n for n in cost["notes"])  # its position is a Python int


def test_an_encoder_without_a_position_table_is_sized_by_its_img_size():
    m = anyinput("promptreq")
    c = m.ConvConfig()
    rec = _traced("promptreq", "ConvSegmenter")
    B = rec["extras"]["shapes"]["B"]
    side = c.side  # ConvEncoder.img_size
    records = [{"image": torch.zeros(3, side, side), "original_size": [side, side]} for _ in range(B)]
    real = real_calls(m.ConvSegmenter(c), records, False)
    assert record_calls(rec, numeric={"B": B}) == {k: [c for i, c in enumerate(v) if c not in v[:i]]
                                                   for k, v in real.items()}

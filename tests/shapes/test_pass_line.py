"""The pass line names only the defaults the pass used (none when every input was given in ints), only those
symbols name dims, and the grouped `inspect` tree shows each node's in/out shapes."""

from __future__ import annotations

import sys

import torch

from helpers import TESTS, TINY

sys.path.insert(0, str(TESTS / "data" / "factories"))
import tvstyle  # noqa: E402
from realrun import real_calls, record_calls  # noqa: E402
from archviz.records import loads, to_json_dict  # a records file of either version, as /1's dicts


def row(text: str, module: str) -> list[str]:
    """The cells of the grouped tree's row of `module` (the table `inspect` prints: module, class, shape in → out,
    parameters, ×, total), each stripped; dims named as name=width are read as their width."""
    import re

    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0] == module:
            return [re.sub(r"\b[A-Za-z_]\w*=(\d+)", r"\1", c) for c in cells]
    raise AssertionError(f"no row {module!r} in:\n{text}")


def test_vgg_given_in_ints_names_nothing(archviz_cli):
    r = archviz_cli("walk", "tvstyle:vgg_tiny", "--shapes", "--input", "x=2,3,224,224", "-o", "-")
    assert r.returncode == 0, r.stderr
    rec = to_json_dict(loads(r.stdout))
    assert rec["extras"]["shapes"]["used"] == []
    # the real run's 7x7 maps (224 / 2**5), equal to the default B of 7, stay 7
    real = real_calls(tvstyle.vgg_tiny(), torch.zeros(2, 3, 224, 224))
    assert real["avgpool"][0]["outputs"] == [[2, 32, 7, 7]] and rec["extras"]["shapes"]["B"] == 7
    assert record_calls(rec) == real  # ints only: no symbol left to replace
    r = archviz_cli("inspect", "tvstyle:vgg_tiny", "--input", "x=2,3,224,224", "-d", "1")
    assert r.returncode == 0, r.stderr
    assert "meta pass (eval mode): every input given with explicit sizes" in r.stdout
    assert "B = " not in r.stdout and "T = " not in r.stdout
    assert row(r.stdout, "avgpool")[:4] == ["avgpool", "AdaptiveAvgPool2d", "[2, 32, 7, 7] → [2, 32, 7, 7]", "0"]


def test_pass_line_shows_only_the_symbols_used(archviz_cli):
    r = archviz_cli("inspect", "tvstyle:vgg_tiny", "--input", "x=B,3,224,224", "--batch", "5", "-d", "1")
    assert r.returncode == 0, r.stderr
    assert "meta pass (eval mode): B = 5 (batch)" in r.stdout and "T = " not in r.stdout
    assert row(r.stdout, "vgg_tiny")[2] == "[B, 3, 224, 224] → [B, 10]"


def test_grouped_tree_shows_shapes(archviz_cli):
    cfg = TINY["llama"]
    sets = [a for k, v in cfg.items() for a in ("--set", f"{k}={v}")]
    r = archviz_cli("inspect", "hf:llama", *sets, "-d", "3")
    assert r.returncode == 0, r.stderr
    h, vocab, inter = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    text = r.stdout
    assert row(text, "embed_tokens")[1:4] == ["Embedding", f"[B, T] → [B, T, {h}]", f"{vocab * h:,}"]
    assert row(text, "lm_head")[1:4] == ["Linear", f"[B, T, {h}] → [B, T, {vocab}]", f"{vocab * h:,}"]
    assert f"[B, T, {h}] → [B, T, {inter}]" not in text  # depth 3 stops above the mlp's projections
    assert "meta pass (eval mode): B = 7 (batch), T = 13 (positions)" in text


VIT = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, image_size=32,
           patch_size=8, num_channels=3)


def _vit(archviz_cli, *extra):
    sets = [a for k, v in VIT.items() for a in ("--set", f"{k}={v}")]
    r = archviz_cli("inspect", "hf:vit", *sets, *extra, "-d", "1")
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if line.startswith("meta pass (")]


def test_pass_line_of_vision_models(archviz_cli):
    """A transformers vision model's default pixel_values are sized by B alone: the line shows B, never T; a
    factory's default image the same; every input given in ints shows no symbol; dims named without a size show
    with the size they took from the default."""
    (line,) = _vit(archviz_cli)
    assert line.startswith("meta pass (eval mode): B = ") and line.endswith("(batch)") and "T = " not in line
    (line,) = _vit(archviz_cli, "--input", "pixel_values=2,3,32,32")
    assert line == "meta pass (eval mode): every input given with explicit sizes"
    (line,) = _vit(archviz_cli, "--input", "pixel_values=B,3,H,W", "--batch", "5")
    assert line == f"meta pass (eval mode): B = 5 (batch), H = {VIT['image_size']}, W = {VIT['image_size']}"
    r = archviz_cli("inspect", "timmstyle:vit_tiny_patch8", "-d", "1")
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("meta pass (")]
    assert line.startswith("meta pass (eval mode): B = ") and "T = " not in line

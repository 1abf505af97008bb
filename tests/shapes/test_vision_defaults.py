"""Default inputs for vision models built by a factory: timm's `pretrained_cfg["input_size"]`, else the factory's
image size and channels, else the first convolution's channels at 224 x 224; when none can be inferred, the error
lists the forward's arguments. Shapes equal a real CPU run of the same model on an image batch of those sizes."""

from __future__ import annotations

import sys

import pytest
import torch

from helpers import TESTS

sys.path.insert(0, str(TESTS / "data" / "factories"))
import timmstyle  # noqa: E402
import tvstyle  # noqa: E402
from realrun import real_calls, record_calls  # noqa: E402

import archviz  # noqa: E402
from archviz.records import to_json_dict  # noqa: E402
from archviz.shapes import trace_shapes  # noqa: E402
from archviz.walk import walk  # noqa: E402


def _traced(spec: str, overrides: dict | None = None) -> dict:
    built = archviz.build(spec, overrides=overrides or {})
    return to_json_dict(trace_shapes(built, walk(built)))


@pytest.mark.parametrize("spec, overrides, model, image", [
    ("timmstyle:vit_tiny_patch8", {}, lambda: timmstyle.vit_tiny_patch8(), (3, 48, 48)),
    ("timmstyle:vit_tiny_patch8", {"img_size": 32, "in_chans": 1},
     lambda: timmstyle.vit_tiny_patch8(img_size=32, in_chans=1), (1, 32, 32)),
    ("timmstyle:convnet_no_cfg", {}, timmstyle.convnet_no_cfg, (1, 224, 224)),
    ("tvstyle:vgg_tiny", {}, tvstyle.vgg_tiny, (3, 224, 224)),
])
def test_default_image_input(spec, overrides, model, image):
    rec = _traced(spec, overrides)
    shapes = rec["extras"]["shapes"]
    assert shapes["used"] == ["B"]  # an image batch: no positions T
    B = shapes["B"]
    real = real_calls(model(), torch.zeros(B, *image))
    assert record_calls(rec, numeric={"B": B}) == real
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", *image]]
    assert any(n.startswith(f"default input: an image batch [B, {', '.join(map(str, image))}]")
               for n in shapes["notes"])


def test_a_first_linear_takes_features(archviz_cli):
    """No embedding table anywhere, and the first module that takes the input is Linear(24, 48): features
    [B, T, 24], as a real run of the same factory shows."""
    import vision

    rec = _traced("vision:build")
    shapes = rec["extras"]["shapes"]
    B, T = shapes["B"], shapes["T"]
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", "T", 24]]
    assert record_calls(rec, numeric={"B": B, "T": T}) == real_calls(vision.build(), torch.zeros(B, T, 24))


def test_no_inference_lists_the_forward_arguments(archviz_cli):
    r = archviz_cli("inspect", "vision:build_tabled")
    assert r.returncode == 2 and r.stdout == ""
    assert "Tabled.forward(pixels, kind=None)" in r.stderr  # vision.py's own signature
    assert "give each tensor argument as NAME=dims[:dtype]" in r.stderr

"""Transformers vision models get a default input: `pixel_values` [B, C, H, W] from the config's num_channels and
image_size (the first convolution's channels at 224 x 224 where the config has no image size), so `walk --shapes`
needs no --input. The shapes equal a real CPU run of the same small model (the same --set, built by transformers
itself) on an image batch of those sizes; a dim named without a size (`--input pixel_values=B,3,H,W`) takes the
default's size and is named only where the real runs at two sizes say it follows the input."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from realrun import real_calls, record_calls
from archviz.records import loads, to_json_dict

# Tiny configs: (model_type, --set fields, the image the config makes (C, H, W))
CASES = [
    ("vit", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
                 patch_size=8, num_channels=3), (3, 32, 32)),
    ("convnext", dict(hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1], image_size=64, num_channels=2), (2, 64, 64)),
    ("resnet", dict(embedding_size=8, hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1]), (3, 224, 224)),
]


def _sets(fields: dict) -> list[str]:
    return [a for k, v in fields.items() for a in ("--set", f"{k}={json.dumps(v)}")]


def _real(model_type: str, fields: dict) -> torch.nn.Module:
    cfg = transformers.AutoConfig.for_model(model_type, **fields)
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(cfg).eval()


def _distinct(calls: dict) -> dict:
    """A module called twice with the same shapes (a dropout reused) is one call in the records, as the pass keeps
    each distinct call signature once."""
    out = {}
    for path, cs in calls.items():
        kept: list = []
        for c in cs:
            if c not in kept:
                kept.append(c)
        out[path] = kept
    return out


def _walk(archviz_cli, model_type: str, fields: dict, *extra: str) -> dict:
    r = archviz_cli("walk", f"hf:{model_type}", *_sets(fields), "--shapes", *extra, "-o", "-")
    assert r.returncode == 0, r.stderr
    return to_json_dict(loads(r.stdout))


@pytest.mark.parametrize("model_type, fields, image", CASES, ids=[c[0] for c in CASES])
def test_default_pixel_values_match_a_real_run(archviz_cli, model_type, fields, image):
    rec = _walk(archviz_cli, model_type, fields)
    shapes = rec["extras"]["shapes"]
    assert shapes["used"] == ["B"]  # an image batch: no positions T
    B = shapes["B"]
    real = _distinct(real_calls(_real(model_type, fields), pixel_values=torch.zeros(B, *image)))
    assert record_calls(rec, numeric={"B": B}) == real
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", *image]]
    assert any(n.startswith(f"default input: an image batch [B, {', '.join(map(str, image))}]") and
               "passed as pixel_values" in n for n in shapes["notes"])


def test_vit_inspect_needs_no_input(archviz_cli):
    """The untouched default ViTConfig: the pooler reads [B, patches + 1, hidden] with no --input."""
    cfg = transformers.ViTConfig()
    r = archviz_cli("inspect", "hf:vit", "pooler", "--json")
    assert r.returncode == 0, r.stderr
    tokens = (cfg.image_size // cfg.patch_size) ** 2 + 1
    assert json.loads(r.stdout)["inputs"] == [["B", tokens, cfg.hidden_size]]


def test_dims_named_without_a_size(archviz_cli):
    """`--input pixel_values=B,C,H,W`: H and W take the default's 64 (the config's image size), C its 2 channels;
    a dim is named where two real runs (the pass's sizes, and another B, H and W) move it as the input moved it.
    C cannot take another size (the stem convolution fixes it), so it is named nowhere."""
    model_type, fields, image = CASES[1]
    rec = _walk(archviz_cli, model_type, fields, "--input", "pixel_values=B,C,H,W")
    shapes = rec["extras"]["shapes"]
    assert shapes["named"] == {"C": 2, "H": 64, "W": 64}
    B = shapes["B"]
    model = _real(model_type, fields)
    one = _distinct(real_calls(model, pixel_values=torch.zeros(B, 2, 64, 64)))
    two = _distinct(real_calls(model, pixel_values=torch.zeros(B + 2, 2, 64 + 16, 64 + 24)))
    moved = {(B, B + 2): "B", (64, 80): "H", (64, 88): "W"}

    def name(s1, s2):
        return [moved.get((d1, d2), d1) if d1 != d2 else d1 for d1, d2 in zip(s1, s2)]

    expected = {p: [{k: [name(s1, s2) for s1, s2 in zip(c1[k], c2[k])] for k in ("inputs", "outputs")}
                    for c1, c2 in zip(one[p], two[p])] for p in one}
    assert record_calls(rec) == expected
    assert rec["modules"][0]["calls"][0]["inputs"] == [["B", 2, "H", "W"]]  # C named nowhere: no evidence for it
    assert any("C named nowhere" in n for n in shapes["notes"])


def test_a_dim_without_a_size_to_take_is_one_line_exit_2(archviz_cli):
    r = archviz_cli("inspect", "hf:llama", "--set", "num_hidden_layers=1", "--input", "input_ids=none",
                    "--input", "inputs_embeds=B,T,D:float32")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    assert "dim 'D' is not an int, B or T, and has no size to take" in r.stderr
    assert "--input inputs_embeds=B,T,D=64" in r.stderr

"""Symbolic dims by evidence: a dim is named B (or T) only where it follows that input dim across two passes of
different sizes. The expected names are derived here the same way from two real CPU runs of the same model, at the
pass's B and at another batch: a dim is B exactly where the two real runs differ as the batch does."""

from __future__ import annotations

import sys

import pytest
import torch

from helpers import TESTS

sys.path.insert(0, str(TESTS / "data" / "factories"))
import tvstyle  # noqa: E402
from realrun import real_calls  # noqa: E402


def _expected(model, shape_at, b: int, other: int) -> dict:
    """{path: [{"inputs", "outputs"}]}: the real run at batch `b`, a dim named "B" where the run at `other` has
    `other` in its place and this one has `b`."""
    one, two = real_calls(model, torch.zeros(shape_at(b))), real_calls(model, torch.zeros(shape_at(other)))

    def name(s1, s2):
        return [("B" if (d1, d2) == (b, other) else d1) for d1, d2 in zip(s1, s2)]

    return {p: [{k: [name(s1, s2) for s1, s2 in zip(c1[k], c2[k])] for k in ("inputs", "outputs")}
                for c1, c2 in zip(one[p], two[p])] for p in one}


def _records(spec: str, *, overrides: dict | None = None, **kw):
    import archviz
    from archviz.records import to_json_dict
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    built = archviz.build(spec, overrides=overrides or {})
    rec = to_json_dict(trace_shapes(built, walk(built), **kw))
    return rec, {m["path"]: [{"inputs": c["inputs"], "outputs": c["outputs"]} for c in m["calls"]]
                 for m in rec["modules"] if m.get("calls")}


@pytest.mark.parametrize("batch", [None, 3])
def test_vgg_feature_maps_equal_to_b_stay_ints(batch):
    """224 / 2**5 = 7: the 7x7 maps equal the default B of 7; with --batch 3 the 3 input channels equal B."""
    rec, got = _records("tvstyle:vgg_tiny", input_specs=["x=B,3,224,224"], batch=batch)
    b = rec["extras"]["shapes"]["B"]
    assert b == (batch or 7)
    model = tvstyle.vgg_tiny()
    expected = _expected(model, lambda n: (n, 3, 224, 224), b, 2)
    assert got == expected
    # the premise: values equal to B that are no batch exist, and stay ints
    assert [2, 32, 7, 7] == real_calls(model, torch.zeros(2, 3, 224, 224))["avgpool"][0]["outputs"][0]
    assert got["avgpool"][0]["outputs"] == [["B", 32, 7, 7]]
    assert got[""][0]["inputs"] == [["B", 3, 224, 224]]
    assert any("dims named by evidence" in n for n in rec["extras"]["shapes"]["notes"])


def test_token_model_keeps_its_names():
    """A transformers model still reads [B, T, hidden] where the dims do follow the inputs."""
    rec, got = _records("hf:llama", overrides=dict(num_hidden_layers=1, hidden_size=64, intermediate_size=128,
                                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=256))
    assert got["model.embed_tokens"][0] == {"inputs": [["B", "T"]], "outputs": [["B", "T", 64]]}
    assert got["lm_head"][0]["outputs"] == [["B", "T", 256]]


@pytest.mark.parametrize("h, w", [(64, 96), (64, 64)])
def test_user_named_dims(h, w):
    """`--input x=B,3,H=..,W=..` names H and W where the dims follow them (the first convolutions, padding 1),
    not where they were pooled; H = W tells them apart still."""
    rec, got = _records("tvstyle:vgg_tiny", input_specs=[f"x=B,3,H={h},W={w}"])
    shapes = rec["extras"]["shapes"]
    assert shapes["named"] == {"H": h, "W": w}
    b = shapes["B"]
    model = tvstyle.vgg_tiny()
    one = real_calls(model, torch.zeros(b, 3, h, w))
    two = real_calls(model, torch.zeros(5, 3, h + 8, w + 16))  # another B, H and W, each by its own step

    def name(s1, s2):
        out = []
        for i, (d1, d2) in enumerate(zip(s1, s2)):
            moved = {(b, 5): "B", (h, h + 8): "H", (w, w + 16): "W"}
            out.append(moved.get((d1, d2), d1) if d1 != d2 else d1)
        return out

    expected = {p: [{k: [name(s1, s2) for s1, s2 in zip(c1[k], c2[k])] for k in ("inputs", "outputs")}
                    for c1, c2 in zip(one[p], two[p])] for p in one}
    assert got == expected
    assert got["features.0"][0] == {"inputs": [["B", 3, "H", "W"]], "outputs": [["B", 8, "H", "W"]]}

"""Every kind of source is traced in eval mode by default (transformers', reference models', factories'), and
--train traces training mode: an Inception's auxiliary head runs only with --train, and a DeepLab-style pooling
branch's batch norm at batch 1 runs only in eval. Shapes equal a real CPU run of the same model in the same mode."""

from __future__ import annotations

import sys

import pytest
import torch

from helpers import TESTS

sys.path.insert(0, str(TESTS / "data" / "factories"))
import tvstyle  # noqa: E402
from realrun import real_calls, record_calls  # noqa: E402

import archviz  # noqa: E402
from archviz.shapes import PassRun, trace_shapes  # noqa: E402
from archviz.walk import walk  # noqa: E402
from archviz.records import loads, to_json_dict  # a records file of either version, as /1's dicts

DSV3 = TESTS / "fixtures" / "dsv3like"


def _walk(archviz_cli, *args):
    r = archviz_cli("walk", *args, "--shapes", "-o", "-")
    assert r.returncode == 0, r.stderr
    return to_json_dict(loads(r.stdout))


@pytest.mark.parametrize("train", [False, True])
def test_inception_aux_head_runs_only_in_training(archviz_cli, train):
    rec = _walk(archviz_cli, "tvstyle:inception_tiny", "--input", "x=2,3,64,64", *(["--train"] if train else []))
    assert rec["extras"]["shapes"]["mode"] == ("train" if train else "eval")
    real = real_calls(tvstyle.inception_tiny(), torch.zeros(2, 3, 64, 64), train=train)
    assert ("AuxLogits" in real) is train  # the real model's own behaviour, for the test's premise
    assert record_calls(rec) == real


def test_batch_norm_at_batch_one(archviz_cli):
    rec = _walk(archviz_cli, "tvstyle:deeplab_tiny", "--set", "weights_backbone=None", "--input", "x=1,3,40,40")
    model = tvstyle.deeplab_tiny(weights_backbone=None)
    assert record_calls(rec) == real_calls(model, torch.zeros(1, 3, 40, 40))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        real_calls(model, torch.zeros(1, 3, 40, 40), train=True)
    r = archviz_cli("inspect", "tvstyle:deeplab_tiny", "--set", "weights_backbone=None", "--input", "x=1,3,40,40",
                    "--train")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "Expected more than 1 value per channel when training" in r.stderr
    assert "drop --train" in r.stderr


def test_pass_line_shows_the_mode(archviz_cli):
    for extra, mode in (((), "eval"), (("--train",), "train")):
        r = archviz_cli("inspect", "tvstyle:inception_tiny", "--input", "x=2,3,64,64", *extra)
        assert r.returncode == 0, r.stderr
        assert f"meta pass ({mode} mode)" in r.stdout


def test_every_kind_builds_in_eval_mode():
    for built in (archviz.build("tvstyle:inception_tiny"), archviz.build(str(DSV3 / "model.py"),
                                                                         config=str(DSV3 / "config.json")),
                  archviz.build("hf:llama", overrides={"num_hidden_layers": 1})):
        assert not any(m.training for m in built.model.modules()), built.spec


def test_modes_are_put_back_after_the_pass():
    built = archviz.build("tvstyle:inception_tiny")
    built.model.AuxLogits.train()  # one module's own mode, which the pass must not lose
    before = {p: m.training for p, m in built.model.named_modules()}
    trace_shapes(built, walk(built), input_specs=["x=2,3,64,64"], run=PassRun(train=True))
    assert {p: m.training for p, m in built.model.named_modules()} == before


def test_train_refused_without_the_pass(archviz_cli):
    r = archviz_cli("inspect", "tvstyle:inception_tiny", "--no-shapes", "--train")
    assert r.returncode == 2
    assert "--train applies to the meta forward pass" in r.stderr

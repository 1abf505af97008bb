"""`archviz probe --train`: both passes (meta, and the reduced copy run for real) trace training mode, as `walk
--train` does; the mode is shown in the report's title and in --json. On an Inception-style factory whose
auxiliary head runs only in training, the probe compares (and the records carry) the aux head's calls exactly
when --train is given, and the meta shapes equal a real CPU run of the same model in that mode."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from helpers import TESTS

sys.path.insert(0, str(TESTS / "data" / "factories"))
import tvstyle  # noqa: E402
from realrun import real_calls, record_calls  # noqa: E402

from archviz.records import loads, to_json_dict  # noqa: E402


@pytest.mark.parametrize("train", [False, True])
def test_probe_traces_the_mode_asked(archviz_cli, tmp_path, train):
    out = tmp_path / "probe.json"
    mode = ["--train"] if train else []
    r = archviz_cli("probe", "tvstyle:inception_tiny", "--input", "x=B,3,64,64", *mode, "--json", "-o", out)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] is True and report["mode"] == ("train" if train else "eval")
    rec = to_json_dict(loads(out.read_text()))
    assert rec["extras"]["shapes"]["mode"] == report["mode"] == rec["extras"]["probe"]["mode"]
    B = report["B"]
    real = real_calls(tvstyle.inception_tiny(), torch.zeros(B, 3, 64, 64), train=train)
    assert ("AuxLogits" in real) is train  # the premise: the model's own forward differs by mode
    assert record_calls(rec, numeric={"B": B}) == real
    probed = rec["extras"]["probe"]["modules"]
    assert ("AuxLogits" in probed and probed["AuxLogits"]["confirmed"]) is train


def test_probe_title_shows_the_mode(archviz_cli):
    r = archviz_cli("probe", "tvstyle:inception_tiny", "--input", "x=B,3,64,64", "--train")
    assert r.returncode == 0, r.stderr
    assert "train mode)" in r.stdout and "eval mode" not in r.stdout

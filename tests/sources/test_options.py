"""`--set key=value`: the value is JSON, else a Python literal (None, True, False, tuples, quoted strings), else a
string; the help and the hints say so. A torchvision-style factory that must get `weights_backbone=None` builds
from `--set weights_backbone=None`."""

from __future__ import annotations

import json
import math
import sys

import pytest

from archviz.sources import parse_override

from helpers import TESTS

sys.path.insert(0, str(TESTS / "data" / "factories"))
import tvstyle  # noqa: E402


@pytest.mark.parametrize("text, value", [
    ("k=None", None), ("k=null", None), ("k=True", True), ("k=true", True), ("k=False", False),
    ("k=4", 4), ("k=0.5", 0.5), ("k=[1, 2]", [1, 2]), ("k=(1, 2)", (1, 2)), ('k="None"', "None"),
    ("k='None'", "None"), ("k=gelu", "gelu"), ("k=IMAGENET1K_V1", "IMAGENET1K_V1"), ("k=", ""),
    ("k=a=b", "a=b"), ("k=__import__('os')", "__import__('os')"),
])
def test_value_readings(text, value):
    key, got = parse_override(text)
    assert key == "k"
    assert got == value and type(got) is type(value)


def _count(model) -> int:
    return sum(math.prod(p.shape) for p in model.parameters())


def test_weights_backbone_none_builds(archviz_cli):
    r = archviz_cli("summary", "tvstyle:deeplab_tiny", "--set", "weights_backbone=None", "--set", "num_classes=3",
                    "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["parameters"] == _count(tvstyle.deeplab_tiny(weights_backbone=None, num_classes=3))


def test_string_value_named_in_the_hint(archviz_cli):
    r = archviz_cli("summary", "tvstyle:deeplab_tiny", "--set", "weights_backbone=NONE")
    assert r.returncode == 2
    assert r.stdout == ""
    line = r.stderr.strip()
    assert "weights_backbone='NONE' was passed as a string" in line
    assert "Python literal (None, True, False" in line


def test_help_says_how_values_are_read(archviz_cli):
    r = archviz_cli("summary", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.replace("│", " ").split())
    assert "JSON" in text and "Python literal (None, True, False)" in text

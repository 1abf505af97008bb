"""`--kernel-rules FILE` on the command line: a user's shape rule for a kernel that cannot import lets `inspect` and
`build` run the meta pass; without it `build` renders counts only and says why; a bad rules file or --input is an
error (exit 2), never a quiet site without shapes."""

from __future__ import annotations

import json
import re

import pytest

from helpers import TESTS
MODEL = TESTS / "data" / "nokernel" / "model.py"
DIM = 16  # ModelArgs.dim in the fixture: the kernel keeps h's shape [B, T, dim]

RULES = '''
import torch
import archviz.kernels


@archviz.kernels.shape_rule("kernel.mystery_fused_op")
def mystery_fused_op(h):
    return torch.empty_like(h)
'''


@pytest.fixture(scope="module")
def runs(archviz_cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("rules")
    (d / "rules.py").write_text(RULES)
    return d, archviz_cli.many({
        "inspect": ["inspect", MODEL, "proj", "--kernel-rules", d / "rules.py", "--json"],
        "build": ["build", MODEL, "--kernel-rules", d / "rules.py", "-o", d / "site"],
        "build_without": ["build", MODEL, "-o", d / "plain"],
        "build_missing_rules": ["build", MODEL, "--kernel-rules", d / "nope.py", "-o", d / "never"],
        "build_bad_input": ["build", MODEL, "--input", "x=B,2Q", "-o", d / "never2"],
    })


def test_inspect_uses_the_rule(runs):
    _, r = runs
    res = r["inspect"]
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["inputs"] == [["B", "T", DIM]] and out["outputs"] == [["B", "T", DIM]]
    assert [s["code"] for s in out["call_sites"]] == ["self.proj(mystery_fused_op(h))"]


def test_build_uses_the_rule(runs):
    d, r = runs
    assert r["build"].returncode == 0, r["build"].stderr
    proj = next((d / "site").rglob("proj.html")).read_text()
    text = " ".join(re.sub(r"<[^>]+>", " ", proj).split())
    assert f"[B batch, T positions, {DIM} dim]" in text


def test_build_without_the_rule_says_why_it_has_no_shapes(runs):
    d, r = runs
    res = r["build_without"]
    assert res.returncode == 0, res.stderr
    assert "no shapes" in res.stderr and "kernel.mystery_fused_op" in res.stderr and "--kernel-rules" in res.stderr
    overview = next(p.read_text() for p in (d / "plain").rglob("index.html") if 'id="build"' in p.read_text())
    assert "no shapes: kernel.mystery_fused_op" in " ".join(re.sub(r"<[^>]+>", " ", overview).split())


@pytest.mark.parametrize("case, message", [
    ("build_missing_rules", "nope.py: no such file"),
    ("build_bad_input", "--input 'x=B,2Q': dim '2Q' is not an int, B or T"),
])
def test_bad_shape_options_are_errors(runs, case, message):
    d, r = runs
    res = r[case]
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in res.stderr
    assert not (d / "never").exists() and not (d / "never2").exists()

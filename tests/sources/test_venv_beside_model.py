"""A model folder with a real virtualenv inside (`proj/model.py` + `proj/.venv`, the common layout): an installed
package's optional import inside forward fails as it would anywhere (the package handles it), and is not stubbed as
model code (the model's own failing imports still are: tests/shapes/test_trace.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import torch
from archviz.records import loads, to_json_dict  # a records file of either version, as /1's dicts
from helpers import REPO

MODEL = textwrap.dedent('''
    from dataclasses import dataclass

    import torch
    from torch import nn

    import accel_helpers


    @dataclass
    class ModelArgs:
        dim: int = 16
        n_layers: int = 2


    class Transformer(nn.Module):
        def __init__(self, args: ModelArgs):
            super().__init__()
            self.embed = nn.Embedding(64, args.dim)
            self.layers = nn.ModuleList(nn.Linear(args.dim, args.dim) for _ in range(args.n_layers))

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            h = self.embed(tokens)
            for layer in self.layers:
                h = accel_helpers.act(layer(h))
            return h
''')

# An installed helper with an optional accelerator, probed inside forward as sympy probes for gmpy2.
HELPERS = textwrap.dedent('''
    import torch


    def act(x):
        try:
            import archviz_absent_accelerator as fast
        except ImportError:
            return torch.relu(x)
        return fast.relu(x)
''')


def test_installed_package_in_a_venv_is_not_model_code(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "model.py").write_text(MODEL)
    (proj / "config.json").write_text(json.dumps({"dim": 16, "n_layers": 2}))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(proj / ".venv")], check=True)
    site = next((proj / ".venv").glob("lib/python*/site-packages"))
    (site / "accel_helpers.py").write_text(HELPERS)
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "archviz.cli", "walk", str(proj / "model.py"), "--shapes", "-o", "-"],
                       cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    rec = to_json_dict(loads(r.stdout))
    assert "archviz_absent_accelerator" not in rec["source"]["stubbed_imports"]
    # the real run of the same code, with the helper importable as it is for archviz
    import importlib.util

    sys.path.insert(0, str(site))
    try:  # under its own name: other tests' "model" modules may be imported already
        spec = importlib.util.spec_from_file_location("venv_beside_model", proj / "model.py")
        real_model = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(real_model)
        m = real_model.Transformer(real_model.ModelArgs())
        out = m(torch.zeros(2, 5, dtype=torch.long))
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("accel_helpers", None)
    calls = {x["path"]: x["calls"] for x in rec["modules"] if x.get("calls")}
    B, T = rec["extras"]["shapes"]["B"], rec["extras"]["shapes"]["T"]
    assert calls[""][0]["outputs"] == [["B", "T", out.shape[-1]]] and (B, T) != (2, 5)
    assert not any("archviz_absent_accelerator" in a for x in rec["modules"] for a in x.get("assumptions", ()))

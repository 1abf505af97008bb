"""The package as `pip install` gives it: the wheel built from pyproject.toml, installed into a fresh virtualenv
with no editable install and no checkout on the path, runs `summary`, `build` and `check`.

The wheel is built (with pip's build isolation, as `pip install .` builds it) from a copy of the checkout's
packaging files in a temp folder, so the checkout gets no build/ or egg-info. The fresh venv gets the wheel alone;
its dependencies (torch, typer, ...) are read from this test venv's site-packages through a .pth line, which adds
that folder to sys.path without running its .pth files (so the editable install of archviz there stays off).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

MODEL = '''\
import json
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    vocab_size: int = 64
    dim: int = 24
    n_layers: int = 2


class Block(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.norm = nn.LayerNorm(args.dim)
        self.up = nn.Linear(args.dim, 2 * args.dim)
        self.down = nn.Linear(2 * args.dim, args.dim, bias=False)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Transformer(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args) for _ in range(args.n_layers))
        self.head = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens, start_pos=0):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)
'''
CONFIG = {"vocab_size": 64, "dim": 24, "n_layers": 2}


def _expected_parameters(c: dict) -> int:
    d, v = c["dim"], c["vocab_size"]
    block = 2 * d + (d * 2 * d + 2 * d) + 2 * d * d
    return v * d + c["n_layers"] * block + d * v


def _site_packages(prefix: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))


@pytest.mark.slow
def test_wheel_installs_and_runs_without_the_checkout(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("archviz", "templates"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (wheel,) = dist.glob("archviz-*.whl")

    # every template and static file, and every package, is in the wheel
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    for f in (REPO / "templates").rglob("*"):
        if f.is_file() and "__pycache__" not in f.parts:
            assert "archviz/templates/" + f.relative_to(REPO / "templates").as_posix() in names, f
    for init in (REPO / "archviz").rglob("__init__.py"):
        assert init.relative_to(REPO).as_posix() in names, init
    listing = subprocess.run(["unzip", "-l", str(wheel)], capture_output=True, text=True) \
        if shutil.which("unzip") else None
    if listing is not None:
        for f in ("archviz/templates/node.html", "archviz/templates/static/site.js", "archviz/templates/static/site.css"):
            assert f in listing.stdout

    # a fresh venv holding the wheel alone; its dependencies read from this venv's site-packages
    fresh = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    py = fresh / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
                        str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    site = _site_packages(fresh)
    (site / "archviz_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")

    work = tmp_path / "work"
    work.mkdir()
    (work / "model.py").write_text(MODEL)
    (work / "config.json").write_text(json.dumps(CONFIG))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ARCHVIZ_TEMPLATES", "VIRTUAL_ENV")}
    env.update(COLUMNS="200", NO_COLOR="1")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(fresh / "bin" / "archviz"), *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=300)

    # the archviz that runs is the wheel's
    r = subprocess.run([str(py), "-c", "import archviz, json, sys; print(json.dumps([archviz.__file__, sys.path]))"],
                       cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    where, path = json.loads(r.stdout)
    assert where.startswith(str(site)), where
    deps = sysconfig.get_path("purelib")
    assert [p for p in path if p and p != deps and Path(p).resolve().is_relative_to(REPO)] == []

    # a real checkpoint of the model, saved on the CPU by torch itself
    r = subprocess.run([str(py), "-c", "import json, torch; from model import ModelArgs, Transformer; "
                        "from safetensors.torch import save_file; torch.manual_seed(0); "
                        "m = Transformer(ModelArgs(**json.load(open('config.json')))); "
                        "save_file(m.state_dict(), 'model.safetensors')"], cwd=work, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr

    r = run("summary", "model.py", "--config", "config.json", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["parameters"] == _expected_parameters(CONFIG)

    r = run("build", "model.py", "--config", "config.json", "-o", "site")
    assert r.returncode == 0, r.stderr
    index = (work / "site" / "index.html").read_text()
    pages = sorted((work / "site").rglob("*.html"))
    assert len(pages) > 3
    for page in pages:  # every page's stylesheets and scripts are files the build wrote
        html = page.read_text()
        for ref in re.findall(r'(?:href|src)="([^"#?:]+\.(?:css|js))"', html):
            assert (page.parent / ref).resolve().is_file(), (page, ref)
    assert "static/site.js" in index and (work / "site" / "static" / "site.js").read_bytes() == \
        (REPO / "templates" / "static" / "site.js").read_bytes()

    r = run("check", "model.py", "--config", "config.json", "--checkpoint", "model.safetensors")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "match" in r.stdout

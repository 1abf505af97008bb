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
from helpers import REPO


BRANCHY = REPO / "tests" / "fixtures" / "branchy"  # a reference model.py + config.json


def _expected_parameters(c: dict) -> int:
    """From the fixture's config: embedding, per layer up (with bias) and down, the final norm, the head."""
    d, v = c["dim"], c["vocab_size"]
    block = (d * 2 * d + 2 * d) + 2 * d * d
    return v * d + c["n_layers"] * block + 2 * d + d * v


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
    config = json.loads((BRANCHY / "config.json").read_text())
    shutil.copy2(BRANCHY / "model.py", work / "model.py")
    shutil.copy2(BRANCHY / "config.json", work / "config.json")
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
    assert json.loads(r.stdout)["parameters"] == _expected_parameters(config)

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

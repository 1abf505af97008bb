"""`archviz.gallery([...sources], "out/")`: the gallery from Python, written by the code `archviz gallery` runs (so
the same files, and the same JSON as the command's --json). Two tiny factory models, each in a module of its own
written here; counted in this process (jobs=1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import archviz

MODEL = '''
from torch import nn


def {name}():
    return nn.Sequential(nn.Embedding(16, 8), nn.Linear(8, {width}))
'''


def _params(width: int) -> int:
    return 16 * 8 + 8 * width + width  # the embedding, the linear layer's weight and bias


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_gallery_writes_what_the_command_writes(archviz_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = tmp_path / "code"
    code.mkdir()
    for module, width in (("galib_a", 16), ("galib_b", 32)):
        (code / f"{module}.py").write_text(MODEL.format(name="make", width=width))
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(code))
    monkeypatch.syspath_prepend(str(code))
    sources = ["galib_a:make", "galib_b:make"]

    made = archviz.gallery(sources, str(tmp_path / "api"), jobs=1, cache=False)
    index = (tmp_path / "api" / "index.html").read_text()
    assert made.counts["indexed"] == 2 and made.failures == [], made.to_json()
    for width in (16, 32):  # each model's row holds its parameters, counted here from the layers' shapes
        assert f'data-sort="{_params(width)}">{_params(width)}<' in index

    r = archviz_cli("gallery", *sources, "--jobs", "1", "--no-cache", "--json", "-o", tmp_path / "cli")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {**made.to_json(), "output": str(tmp_path / "cli")}
    assert _files(tmp_path / "cli") == _files(tmp_path / "api")


def test_a_pair_outside_the_gallery_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    with pytest.raises(archviz.ArchvizError, match="hf:mistral is not in the gallery") as e:
        archviz.gallery(["hf:llama"], str(tmp_path / "out"), pairs=[("hf:llama", "hf:mistral")], jobs=1)
    assert "--" not in str(e.value) and not (tmp_path / "out").exists()

"""The walk up `__init__.py` folders to a model's package root, and up to its project root, never climbs into a
folder others can write (issue 46): from a package whose parent is world-writable (as /tmp), a planted
`__init__.py`, `setup.cfg` or a module named like a stubbed package (`tilelang.py`) there never runs, and the model
still imports as its package (relative and absolute imports)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

PLANT = "open({marker!r}, 'a').write({name!r})\n"
LAYERS = """import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
"""
MODEL = """import torch.nn as nn
import tilelang  # a kernel package absent here: archviz stubs it, never a file planted beside the package

import pkgx.layers
from .layers import Block


class Net(nn.Module):
    def __init__(self, dim: int = 8, depth: int = 3):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.head = pkgx.layers.Block(dim)
"""


@pytest.mark.skipif(os.geteuid() != 0 and sys.platform != "linux", reason="POSIX permissions")
def test_a_planted_file_in_a_writable_parent_never_runs(archviz_cli, tmp_path: Path) -> None:
    shared, marker = tmp_path / "shared", tmp_path / "ran"
    pkg = shared / "pkgx"
    pkg.mkdir(parents=True)
    shared.chmod(0o777)  # anyone may write here, as in /tmp
    for name in ("__init__", "tilelang", "setup"):
        (shared / f"{name}.py").write_text(PLANT.format(marker=str(marker), name=name))
    (shared / "setup.cfg").write_text("[metadata]\nname = planted\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(LAYERS)
    (pkg / "model.py").write_text(MODEL)
    r = archviz_cli("summary", pkg / "model.py", "--json", "--no-cache")
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    dim, depth = 8, 3
    assert json.loads(r.stdout)["parameters"] == (depth + 1) * (dim * dim + dim)
    assert not marker.exists(), marker.read_text()
    for name in ("pkgx", "pkgx.layers", "pkgx.model", "tilelang"):
        sys.modules.pop(name, None)



NET = """import torch.nn as nn


class Net(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        import statistics  # noqa: F401  (the standard library's, never the file beside this one)

        return self.proj(x)
"""


def test_a_file_named_like_a_standard_module_beside_the_model_shadows_nothing(archviz_cli, tmp_path: Path) -> None:
    """A `typing.py` and a `statistics.py` beside model.py: the model is counted and its pass runs, and neither
    runs (the folder's files were purged from sys.modules by name, the real typing with them, and the folder went
    ahead of the standard library)."""
    import json

    marker = tmp_path / "ran"
    (tmp_path / "model.py").write_text(NET)
    for name in ("typing", "statistics"):
        (tmp_path / f"{name}.py").write_text(PLANT.format(marker=str(marker), name=name))
    r = archviz_cli("summary", tmp_path / "model.py", "--json", "--no-cache")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["parameters"] == 8 * 8 + 8
    r = archviz_cli("walk", tmp_path / "model.py", "--shapes", "--input", "x=2,8:float32", "--no-cache")
    assert r.returncode == 0, r.stderr[-2000:]
    assert '"2, 8"' in r.stdout or "[2, 8]" in r.stdout or "2,8" in r.stdout.replace(" ", "")
    assert not marker.exists(), marker.read_text()

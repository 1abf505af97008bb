"""A model file or factory module whose import (or build) never ends (a busy loop, a wait for a server that never
answers) ends the command after ARCHVIZ_MODEL_TIMEOUT seconds with one line naming the file and line it was at
(issue 46); it hung the command with no limit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "adversarial"))
from adv_tools import cli_here, refused  # noqa: E402

LOOPS = """import torch.nn as nn


def spin():
    n = 0
    while True:
        n += 1


spin()


def build():
    return nn.Linear(2, 2)
"""


@pytest.mark.parametrize("form", ["model.py", "module:callable"])
def test_an_import_that_never_ends_is_stopped_where_it_is(archviz_cli, tmp_path, monkeypatch, form) -> None:
    (tmp_path / "spinning.py").write_text(LOOPS)
    monkeypatch.setenv("ARCHVIZ_MODEL_TIMEOUT", "1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # and import caches invalidated: the file is new
    source = tmp_path / "spinning.py" if form == "model.py" else "spinning:build"
    try:
        line = refused(cli_here(archviz_cli, "summary", source, "--no-cache"), "did not end within 1 s",
                       "it was at spinning.py:")
    finally:
        sys.modules.pop("spinning", None)
    assert "(spin)" in line and "ARCHVIZ_MODEL_TIMEOUT" in line


BUILD_LOOPS = """import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2, 2)
        while True:  # waits for a rendezvous that never comes
            pass
"""


def test_a_build_that_never_ends_is_stopped_where_it_is(archviz_cli, tmp_path, monkeypatch) -> None:
    (tmp_path / "model.py").write_text(BUILD_LOOPS)
    monkeypatch.setenv("ARCHVIZ_MODEL_TIMEOUT", "1")
    line = refused(cli_here(archviz_cli, "summary", tmp_path / "model.py", "--no-cache"),
                   "building Net did not end within 1 s", "it was at model.py:")
    assert "(__init__)" in line

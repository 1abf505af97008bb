"""A KeyboardInterrupt the model's own code raises while it is built is the model's failure (exit 2, one line), not
the user's Ctrl-C (exit 130, "interrupted"), which it was taken for (issue 46). The user's own Ctrl-C keeps 130: the
serial test in tests/adversarial/test_adv_remote.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "adversarial"))
from adv_tools import cli_here, refused  # noqa: E402

MODEL = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        raise KeyboardInterrupt  # as code that stops itself when something it wants is missing
"""


def test_a_keyboard_interrupt_raised_by_the_model_is_its_failure(archviz_cli, tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    line = refused(cli_here(archviz_cli, "summary", tmp_path / "model.py", "--no-cache"),
                   "the model's code raised KeyboardInterrupt (not a Ctrl-C)")
    assert "interrupted" not in line

"""What the terminal shows is data: module paths, code, file names and error lines that echo the user's input are
printed as typed, never read as rich markup ("[bold]") or emoji codes (":llama:")."""

from __future__ import annotations

import io
import textwrap

from rich.console import Console

import archviz
from archviz.render.terminal import module_card, summary_table


MODEL = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Picker(nn.Module):
        def __init__(self):
            super().__init__()
            self.key = "main"
            self.proj = nn.Linear(8, 4)

        def forward(self, x):
            feats = {"main": x, "aux": x * 2}
            return self.proj(feats[self.key])


    def build():
        return Picker()
''')


def test_cards_keep_brackets_of_code_on_a_markup_console(tmp_path, monkeypatch):
    (tmp_path / "picker_model.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    built = archviz.build("picker_model:build")
    rec = trace_shapes(built, walk(built), inputs=((__import__("torch").zeros(2, 3, 8, device="meta"),), {}))
    console = Console(file=io.StringIO(), width=200, color_system=None)  # markup and emoji on, rich's defaults
    console.print(module_card(rec, "proj"))
    console.print(summary_table(rec))
    text = console.file.getvalue()
    assert "self.proj(feats[self.key]) · picker_model.py:" in text
    assert "[B, T, 8]" in text or "[2, 3, 8]" in text  # shapes keep their brackets too


def test_error_lines_echo_what_was_typed(tmp_path, archviz_cli):
    odd = str(tmp_path / "x[bold]y:smile:z.json")
    r = archviz_cli("summary", odd)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and f"{odd}: no such file" in r.stderr, r.stderr
    r = archviz_cli("summary", "hf:llama", "--set", "hidden_act=1")  # transformers rejects it: the line names hf:llama
    assert r.returncode == 2 and "hf:llama: " in r.stderr and "\U0001f999" not in r.stderr, r.stderr

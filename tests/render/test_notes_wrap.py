"""Every labelled line the command line prints (notes, assumptions, stubbed imports, warnings) fits the terminal
(issue 42): wrapped by words at its width, each continuation indented under the text after its label, on stdout
and on stderr alike (`render.text.Labelled`, the one way they are printed). At 80 columns: `inspect … layer 1` of a
model with two layer stacks (the note naming the other stack), `cost` of a model with long notes (`summary`:
tests/sources/test_built_by_config.py)."""

from __future__ import annotations

import io
import json

from rich.console import Console

from helpers import ANYINPUT, anyinput

from archviz.render.text import Labelled

WIDTH = 80


def _fits(text: str, width: int = WIDTH) -> None:
    over = [line for line in text.splitlines() if len(line) > width]
    assert not over, over[:3]


def _unwrapped(text: str, label: str) -> list[str]:
    """The labelled lines of `text` (`label` then continuation lines indented under its text), each joined back into
    one line."""
    out: list[str] = []
    open_ = False  # the last line read is part of a labelled line
    for line in text.splitlines():
        if line.startswith(label):
            out.append(line[len(label):])
            open_ = True
        elif open_ and line.startswith(" " * len(label)) and line.strip():
            out[-1] += " " + line.strip()
        else:
            open_ = False
    return out


def test_a_labelled_line_wraps_by_words_under_its_label():
    words = " ".join(f"word{i}" for i in range(40))
    console = Console(file=io.StringIO(), width=WIDTH, color_system=None)
    console.print(Labelled("note: ", words))
    console.print(Labelled("a label that takes more than a third of the line: ", words))
    console.print(Labelled("note: ", "x" * 200))  # one word longer than the line: folded, nothing cut
    text = console.file.getvalue()
    _fits(text)
    lines = text.splitlines()
    assert lines[0].startswith("note: word0 ") and lines[1].startswith("      word")
    assert _unwrapped(text, "note: ")[0] == words
    long_at = next(i for i, line in enumerate(lines) if line.startswith("a label"))
    assert lines[long_at + 1].startswith("  word") and not lines[long_at + 1].startswith("   ")
    assert text.count("x") == 200


def test_inspect_layer_of_several_stacks_summary_and_cost_fit_80_columns(archviz_cli):
    cfg = anyinput("stacks").Cfg()
    stacks = ANYINPUT / "stacks.py"
    p = archviz_cli("inspect", stacks, "layer", "1", "--no-cache", columns=WIDTH)
    assert p.returncode == 0, p.stderr
    _fits(p.stdout)
    _fits(p.stderr)
    [note] = _unwrapped(p.stderr, "note: ")
    assert note.startswith(f"layer 1 of layers ({cfg.n_double} blocks") and \
        f"other stacks: single_blocks ({cfg.n_single})" in note

    args = ["cost", stacks, "--seq", "8", "--context", "64", "--no-cache"]
    notes = json.loads(archviz_cli(*args, "--json").stdout)["notes"]
    p = archviz_cli(*args, columns=WIDTH)
    assert p.returncode == 0, p.stderr
    _fits(p.stdout)
    _fits(p.stderr)
    long = [n for n in notes if len("note: " + n) > WIDTH]
    assert long and all(n in _unwrapped(p.stdout, "note: ") for n in long)  # each long note whole, wrapped

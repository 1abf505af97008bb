"""The commands the README and docs/ show: the README's are run (in-process) and print what it says they print,
every figure of its shown output found whole in the real output; every `$ archviz ...` line of the docs names a
command and options the command line has. The README starts with what archviz is, its picture and the quick start."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FIGURE = re.compile(r"\d{1,3}(?:,\d{3})+|\d+\.\d+[A-Za-z]*")


def shown(path: Path) -> list[tuple[str, str]]:
    """Each `$ archviz ...` command of the file's console blocks, with the output shown under it."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", path.read_text(), re.S):
        for part in re.split(r"^(?=\$ )", block, flags=re.M):
            if part.startswith("$ archviz "):
                line, _, rest = part.partition("\n")
                while line.endswith("\\"):  # a command continued on the next line
                    more, _, rest = rest.partition("\n")
                    line = line[:-1] + " " + more.strip()
                out.append((line[2:].split("  #")[0].strip(), rest))
    return out


def test_readme_starts_in_ten_lines() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    head = "\n".join(lines[:12])
    assert lines[0] == "# archviz" and "meta device" in head
    picture = re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", head)
    assert picture and (REPO / picture.group(1)).is_file()
    assert (REPO / picture.group(1)).stat().st_size < 200_000
    assert "pip install" in head and "make site" in head
    assert len(shown(REPO / "README.md")) == 3


@pytest.mark.parametrize("command,output", shown(REPO / "README.md"), ids=lambda x: x.split()[1] if x.startswith("archviz") else "out")
def test_readme_command_prints_what_it_shows(archviz_cli, command: str, output: str) -> None:
    args = shlex.split(command)[1:]
    r = archviz_cli(*args, columns=100)  # the width the README says its samples were printed at
    assert r.returncode in (0, 1), r.stderr
    real = r.stdout + r.stderr
    missing = [f for f in FIGURE.findall(output) if f not in real]
    assert missing == [], (command, missing)
    for line in output.splitlines():
        # a line shown whole (not cut by "..."), its words as the real output has them, spaces aside
        words = line.strip("│ ").split()
        if line and "..." not in line and not set(line) <= set("┌┐└┘─┬┴┼├┤│━┏┓┗┛┳┻╇┡┩ "):
            assert " ".join(words[:3]) in " ".join(real.split()), (command, line)


def _options() -> dict[str, set[str]]:
    import typer.main

    from archviz.cli import app

    group = typer.main.get_command(app)
    return {name: {o for p in c.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")} | {"--help"}
            for name, c in group.commands.items()}


def test_every_command_the_docs_show_is_one_the_cli_has() -> None:
    options = _options()
    wrong = []
    seen = 0
    for path in DOCS:
        for command, _ in shown(path):
            args = shlex.split(command.split(" | ")[0].split(" > ")[0])
            seen += 1
            sub = args[1]
            if sub not in options:
                wrong.append(f"{path.name}: {command}: no command {sub}")
                continue
            for a in args[2:]:
                flag = a.split("=", 1)[0]
                if flag.startswith("--") and flag not in options[sub]:
                    wrong.append(f"{path.name}: {command}: {sub} has no {flag}")
    assert seen >= 15
    assert wrong == []

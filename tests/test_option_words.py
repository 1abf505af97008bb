"""The library names the user's options by token (archviz.errors.option), never as the CLI's flags: only the CLI
spells them as its flags (archviz.cli.flags), a Python caller reads the words it gives them with (PYTHON_WORDS)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import click
import pytest
import typer.main

import archviz
from archviz.cli import app
from archviz.cli.flags import FLAGS, cli_text
from archviz.errors import PYTHON_WORDS, SourceError, option

ROOT = Path(archviz.__file__).parent
TOKEN_OPEN = "\u27e6"


def _cli_flags() -> set[str]:
    """Every long option the CLI's commands register."""
    group = typer.main.get_command(app)
    ctx = click.Context(group)
    flags: set[str] = set()
    for command in [group, *(group.get_command(ctx, name) for name in group.list_commands(ctx))]:
        for param in command.params:
            flags.update(o for o in [*param.opts, *param.secondary_opts] if o.startswith("--"))
    return flags


def test_every_option_a_message_names_is_a_flag_of_the_cli():
    assert set(FLAGS) == set(PYTHON_WORDS)
    assert set(FLAGS.values()) <= _cli_flags(), set(FLAGS.values()) - _cli_flags()
    with pytest.raises(ValueError):
        option("no-such-option")


def test_no_module_outside_the_cli_names_a_cli_flag():
    """No string constant (docstrings and f-strings' text included) of a module outside archviz/cli/ holds one of
    the CLI's own flags; other programs' flags (`git --show-toplevel`, CSS's `--jp-...`) are not the CLI's."""
    flags = sorted((f for f in _cli_flags() if f != "--version"), key=len, reverse=True)
    named = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, flags)) + r")(?![\w-])")
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if (ROOT / "cli") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and named.search(node.value):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {named.search(node.value)[0]}")
    assert not found, "\n".join(found)


def test_a_refusal_names_the_flag_on_the_cli_and_the_keyword_in_python(archviz_cli):
    """The same refusal: the CLI's line and --json error name its flag, `str(e)` names `load`'s keyword, the error
    carries the option; no output of the CLI holds a token."""
    with pytest.raises(SourceError) as e:
        archviz.load("hf:llama", world_size=2)
    assert str(e.value) == ("hf:llama: `world_size` applies to a reference model.py, and this is a transformers "
                            "model (hf:<type>, config.json or folder)")
    assert e.value.options == ("world-size",) and e.value.hint == f"drop {option('world-size')}"
    assert cli_text(e.value.line()).endswith("— drop --world-size")
    r = archviz_cli("summary", "hf:llama", "--world-size", "2", "--json")
    assert r.returncode == 2
    assert r.stderr == ("error: hf:llama: --world-size applies to a reference model.py, and this is a transformers "
                        "model (hf:<type>, config.json or folder) — drop --world-size\n")
    assert json.loads(r.stdout)["hint"] == "drop --world-size"
    assert TOKEN_OPEN not in r.stdout + r.stderr


def test_results_name_options_in_a_python_callers_words_and_the_cli_in_flags(archviz_cli, tmp_path):
    """A note a table shows (the diff's entries past `limit`): `print(result)`, its HTML and its JSON in Python
    words; the command's text, its records file (`walk -o`) none but flags."""
    tiny = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 100}
    sets = [a for k, v in tiny.items() for a in ("--set", f"{k}={v}")]
    a = tmp_path / "a.json"
    assert archviz_cli("walk", "hf:llama", *sets, "--set", "num_hidden_layers=1", "-o", a).returncode == 0
    d = archviz.diff(str(a), archviz.load("hf:llama", overrides={**tiny, "num_hidden_layers": 3}), limit=1)
    shown = str(d)
    assert "more entries (`limit` N, or `.to_json()` for all)" in shown, shown
    assert TOKEN_OPEN not in shown + d._repr_html_() + d.json() and "--limit" not in shown
    b_sets = [x if x != "--set" else "--set-b" for x in sets]
    r = archviz_cli("diff", a, "hf:llama", *b_sets, "--set-b", "num_hidden_layers=3", "--limit", "1")
    assert "more entries (--limit N, or --json for all)" in r.stdout, r.stdout
    assert TOKEN_OPEN not in r.stdout + r.stderr + a.read_text()


def test_a_sites_marker_lists_its_pages_as_written(tmp_path):
    """A page naming an option is written spelled, and the site's marker hashes it as written: the next build
    replaces the folder instead of refusing it as someone else's."""
    import hashlib

    from archviz.render.site.write import MARKER, marker_bytes, spelled_files, write_site

    files = {"index.html": f"<p>give it with {option('set')} x=1</p>".encode()}
    files[MARKER] = marker_bytes(files, ["m"])
    for _ in range(2):
        write_site(files, str(tmp_path / "site"), words=FLAGS)
    page = (tmp_path / "site" / "index.html").read_bytes()
    assert page == b"<p>give it with --set x=1</p>"
    listed = json.loads((tmp_path / "site" / MARKER).read_text())["files"]
    assert listed == {"index.html": hashlib.sha256(page).hexdigest()}
    assert spelled_files(files, PYTHON_WORDS)["index.html"] == b"<p>give it with `overrides` x=1</p>"


def test_a_python_caller_reads_records_in_its_words_the_command_line_in_its_flags(archviz_cli):
    """The records `archviz.load` returns, `archviz.build`'s notes and the records, reports and verdicts a result
    holds name an option as a Python caller gives it (`world_size`, `seq`), never by token; the command's JSON as its
    flag, and a result's `.json(words)` in whichever words it is asked (the records cache and the stages keep the
    tokens: one record serves both)."""
    from helpers import ANYINPUT

    stacks = str(ANYINPUT / "stacks.py")  # a model file with no world_size global: `world_size` given is noted
    said = "given, but the module has no world_size global"
    rec = archviz.load(stacks, world_size=2)
    assert f"{PYTHON_WORDS['world-size']} {said}" in rec.source.notes
    assert not any(TOKEN_OPEN in n for n in rec.source.notes)
    assert f"{PYTHON_WORDS['world-size']} {said}" in archviz.build(stacks, world_size=2).notes
    summary = archviz.summary(stacks, world_size=2)
    assert f"{PYTHON_WORDS['world-size']} {said}" in summary.record.source.notes
    cli = json.loads(archviz_cli("summary", stacks, "--world-size", "2", "--json").stdout)
    assert f"--world-size {said}" in cli["notes"]
    assert json.loads(summary.json(FLAGS))["notes"] == cli["notes"]

    tiny = {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 100}  # transformers' max_position_embeddings 2048: T capped
    cost = archviz.cost("hf:llama", context=1024, overrides=tiny)
    capped = [n for n in cost.report.notes if "the longest sequence the model takes" in n]
    assert capped and capped[0].endswith(f"{PYTHON_WORDS['seq']} sets another")
    assert capped == [n for n in cost.records[0].extra("cost")["notes"] if n in capped]
    assert any(n.endswith("--seq sets another") for n in json.loads(cost.json(FLAGS))["notes"])

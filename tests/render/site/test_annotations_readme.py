"""The guide's (docs/guide.md) names-file and annotations example, run as written: its two TOML blocks, on the default model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from helpers import REPO

ROOT = REPO


def readme_block(first_line: str) -> str:
    blocks = re.findall(r"```toml\n(.*?)```", (ROOT / "docs" / "guide.md").read_text(), re.S)
    hits = [b for b in blocks if b.startswith(first_line + "\n")]
    assert len(hits) == 1, f"docs/guide.md has no single ```toml block starting {first_line!r}"
    return hits[0]


def test_readme_names_and_annotations_example_builds(archviz_cli, tmp_path: Path) -> None:
    (tmp_path / "names.toml").write_text(readme_block("# names.toml"))
    (tmp_path / "notes.toml").write_text(readme_block("# notes.toml"))
    out = tmp_path / "site"
    r = archviz_cli("build", "examples/deepseek-v4-flash/config.json", "--names", tmp_path / "names.toml",
                    "--annotations", tmp_path / "notes.toml", "-o", out)
    assert r.returncode == 0, r.stderr
    pages = out / "deepseek-v4-flash" / "n"
    # layer 2's attention: its two output projections gathered under the names file's title
    attn = (pages / "model.layers.2.self_attn.html").read_text()
    assert "Grouped output" in attn
    o_a = (pages / "model.layers.2.self_attn.o_a_proj.html").read_text()
    assert "<title>Grouped output projection · deepseek-v4-flash" in o_a
    assert "Each of <code>o_groups</code> groups of heads projected on its own to <code>o_lora_rank</code>." in o_a
    assert "o-a-init" in o_a and "#L803-L805" in o_a
    o_b = (pages / "model.layers.2.self_attn.o_b_proj.html").read_text()
    assert "<title>Output projection · deepseek-v4-flash" in o_b
    cfg = json.loads((ROOT / "examples" / "deepseek-v4-flash" / "config.json").read_text())
    assert f"[B batch, T positions, {cfg['o_groups'] * cfg['o_lora_rank']} groups × rank]" in o_b  # [dims]
    assert f"{cfg['hidden_size']} d]" in o_b
    hca = (pages / "model.layers.3_5_to_41.html").read_text()
    assert 'id="description">Its compressor folds 128 tokens into one key/value entry.</p>' in hca

"""The site's cost section with `archviz build --cost --hardware` (issue 35): tokens per second against context
length on the chosen device, beside the FLOPs and KV curves. The expected rates are worked out here from the
fixture's config (tests/data/masked: float32 weights and caches) and the H200 spec sheet's 4.8 TB/s."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from archviz.cli import app

MASKED = Path(__file__).resolve().parent.parent / "data" / "masked"
CFG = json.loads((MASKED / "config.json").read_text())
FP32 = 4


def test_tokens_per_second_against_context_on_h200(tmp_path):
    out = tmp_path / "site"
    result = CliRunner().invoke(app, ["build", str(MASKED / "model.py"), "--config", str(MASKED / "config.json"),
                                      "--set", 'max_seq_len=65536', "--cost", "--hardware", "h200", "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = (out / "masked" / "index.html").read_text()
    assert 'id="cost-tps-h200"' in html
    V, D, n, hd = CFG["vocab_size"], CFG["dim"], CFG["n_layers"], CFG["n_heads"] * CFG["head_dim"]
    # every weight once but the input table, of which one row: embed, 4 projections and the FFN a layer, the head
    stored = (V * D + n * (4 * D * hd + D * D) + D * V) * FP32
    weights = stored - V * D * FP32 + D * FP32
    kv_per_token = n * 2 * hd * FP32  # k_cache and v_cache of every layer
    rows = re.findall(r'<tr data-l="(\d+)"[^>]*>(.*?)</tr>', html[html.index('id="cost-curve"'):], re.S)
    assert rows
    for L, cells in rows:
        seconds = (weights + kv_per_token * int(L)) / 4.8e12
        shown = re.sub(r"<[^>]+>", "|", cells).split("|")
        assert f"{1 / seconds:,.0f}" in shown, (L, shown)
    assert "NVIDIA H200 SXM" in html and "nvidia.com" in html


def test_hardware_without_cost_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["build", str(MASKED / "model.py"), "--config", str(MASKED / "config.json"),
                                      "--hardware", "h200", "-o", str(tmp_path / "site")])
    assert result.exit_code == 2, result.output
    assert "--cost" in result.output and not (tmp_path / "site").exists()

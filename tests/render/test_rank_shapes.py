"""Per-rank shapes on the explorer's node pages (issue 34): `archviz build SOURCE --world-size N` walks every rank's
layout and each node page says each tensor's shape on every rank; records of one rank say whose shapes they are."""

from __future__ import annotations

import json
import pathlib

from typer.testing import CliRunner

from archviz.cli import app

FIX = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "dsv3like"
CONFIG = json.loads((FIX / "config.json").read_text())


def _page(site: pathlib.Path, name: str) -> str:
    return (site / "dsv3like" / "n" / name).read_text()


def test_node_pages_show_every_ranks_shapes(tmp_path):
    site = tmp_path / "site"
    result = CliRunner().invoke(app, ["build", str(FIX / "model.py"), "--world-size", "2", "--no-shapes", "-o",
                                      str(site)])
    assert result.exit_code == 0, result.output
    # a row-parallel projection: its input features split over the 2 ranks, the same shape on each
    wo = [CONFIG["dim"], CONFIG["n_heads"] * CONFIG["v_head_dim"] // 2]
    assert f"<code>weight</code> per rank: [{wo[0]}, {wo[1]}] on each of the 2 ranks." in \
        _page(site, "layers.1-3.attn.wo.html")
    # rank 0's routed experts are held by rank 0 only
    rank0 = CONFIG["n_routed_experts"] // 2
    page = _page(site, f"layers.1-3.ffn.experts.0-{rank0 - 1}.w1.html")
    assert f"<code>weight</code> per rank: rank 0 [{CONFIG['moe_inter_dim']}, " in page
    assert "rank 1 not held." in page


def test_one_ranks_records_say_whose_shapes_they_are(tmp_path):
    site = tmp_path / "site"
    result = CliRunner().invoke(app, ["build", str(FIX / "model.py"), "--world-size", "2", "--rank", "1",
                                      "--no-shapes", "-o", str(site)])
    assert result.exit_code == 0, result.output
    page = (site / "dsv3like" / "n" / "layers.1-3.attn.wo.html").read_text()
    assert "Shapes are rank 1’s of 2 (--world-size 2 --rank 1)" in page

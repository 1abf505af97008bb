"""The site's cost figures (issue 20, item 4): the overview's decode FLOPs and KV cache against context length and
each node page's FLOPs per call × its multiplicity.

Every expected figure is worked out here from the config: decode FLOPs = 2 × the matmul weights a token uses + the
attention terms QKᵀ and P·V over the L cached positions and the new one (4·(L+1)·heads·head_dim a layer); KV bytes
= 2 (K and V) · layers · kv_heads · head_dim · dtype bytes · L; a Linear's FLOPs per call = 2·in·out·B·T. The pages
are read as HTML; the picture is checked in a real headless Chromium at 420 px.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from helpers import TESTS, TINY

ROOT = TESTS
MAX_POS = 20000  # the standard lengths up to it: 1K, 4K, 16K, then 20,000 itself
LLAMA = {**TINY["llama"], "max_position_embeddings": MAX_POS}
B, T = 1, 128


def _sets(cfg: dict) -> list[str]:
    out = []
    for k, v in cfg.items():
        out += ["--set", f"{k}={json.dumps(v, separators=(',', ':'))}"]
    return out


def _weights_per_token(c: dict) -> int:
    """Matmul weights one token uses in a llama-style model: q, k, v, o, the gated MLP, and the head."""
    H, I, n, nh, kv, V = (c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
                          c["num_key_value_heads"], c["vocab_size"])
    hd = H // nh
    return n * (H * nh * hd + 2 * H * kv * hd + nh * hd * H + 3 * H * I) + H * V


def _decode_flops(c: dict, L: int) -> int:
    nh, hd = c["num_attention_heads"], c["hidden_size"] // c["num_attention_heads"]
    return 2 * _weights_per_token(c) + c["num_hidden_layers"] * 4 * (L + 1) * nh * hd


def _kv_bytes(c: dict, L: int, dtype_bytes: int = 2) -> int:  # bf16: the configs name no dtype (issue 44)
    hd = c["hidden_size"] // c["num_attention_heads"]
    return 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * hd * dtype_bytes * L


def _num(text: str) -> int:
    return int(text.strip().replace(",", ""))


@pytest.fixture(scope="module")
def site(archviz_cli, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cost-site") / "site"
    p = archviz_cli("build", "hf:llama", *_sets(LLAMA), "--cost", "--batch", B, "--seq", T, "-o", out, "--json")
    assert p.returncode == 0, p.stderr
    return out


def _rows(page: str) -> list[dict]:
    """The overview's table against L: its rows' data attributes."""
    table = re.search(r'<table class="calc cost-table" id="cost-curve">(.*?)</table>', page, re.S)
    assert table, "no cost table on the overview"
    rows = []
    for attrs in re.findall(r"<tr (data-l[^>]*)>", table.group(1)):
        rows.append({k: int(v) for k, v in re.findall(r'data-(\w+)="(\d+)"', attrs)})
    return rows


def test_overview_decode_flops_and_kv_bytes_at_each_context(site):
    page = (site / "llama" / "index.html").read_text()
    rows = _rows(page)
    assert [r["l"] for r in rows] == [1024, 4096, 16384, MAX_POS]
    for r in rows:
        assert r["flops"] == _decode_flops(LLAMA, r["l"]), r
        assert r["kv"] == _kv_bytes(LLAMA, r["l"]), r
    # the facts: prefill at (B, T) (attention over T×T positions) and the decode step at the longest L
    nh, hd, n = LLAMA["num_attention_heads"], LLAMA["hidden_size"] // LLAMA["num_attention_heads"], \
        LLAMA["num_hidden_layers"]
    prefill = 2 * _weights_per_token(LLAMA) * B * T + n * 4 * B * nh * T * T * hd
    fact = re.search(r'<dd id="cost-prefill"><span class="num">([\d,]+)</span>', page)
    assert fact and _num(fact.group(1)) == prefill
    fact = re.search(r'<dd id="cost-decode"><span class="num">([\d,]+)</span>', page)
    assert fact and _num(fact.group(1)) == _decode_flops(LLAMA, MAX_POS)
    per_token = re.search(r'<dd id="cost-kv-token"><span class="num">([^<]+)</span>', page).group(1)
    assert per_token.strip() == f"{_kv_bytes(LLAMA, 1)} B"
    # the picture: one point per L, pre-rendered (no script draws it), labelled for a screen reader
    for cid, count in (("cost-flops", 4), ("cost-kv", 4)):
        svg = re.search(rf'<svg class="cost-chart" id="{cid}"[^>]*>(.*?)</svg>', page, re.S)
        assert svg and 'role="img"' in svg.group(0) and "aria-label=" in svg.group(0)
        assert len(re.findall(r'<circle class="pt"', svg.group(1))) == count
        assert "context length L" in svg.group(1)
    values = [float(v) for v in re.findall(r'data-v="([^"]+)"', page.split('id="cost-kv"')[1].split("</svg>")[0])]
    assert values == [float(_kv_bytes(LLAMA, L)) for L in (1024, 4096, 16384, MAX_POS)]


def test_node_page_flops_per_call_of_a_linear(site):
    H = LLAMA["hidden_size"]
    n = LLAMA["num_hidden_layers"]
    pages = list((site / "llama" / "n").glob("*self_attn.q_proj.html"))
    assert len(pages) == 1, pages
    page = pages[0].read_text()
    per_call = re.search(r'id="flops-prefill-per-call">([\d,]+)<', page)
    assert per_call and _num(per_call.group(1)) == 2 * H * H * B * T
    total = re.search(r'id="flops-prefill-total">([\d,]+)<', page)
    assert total and _num(total.group(1)) == 2 * H * H * B * T * n  # × 2 layers, as parameters are multiplied
    assert re.search(r'<span class="mult">× 2 layers</span> = <span class="num" id="flops-prefill-total">', page)
    decode = re.search(r'id="flops-decode-per-call">([\d,]+)<', page)
    assert decode and _num(decode.group(1)) == 2 * H * H  # one new token
    # the MLP's subtree: gate, up and down projections (the activation counts nothing)
    mlp = [p for p in (site / "llama" / "n").glob("*.mlp.html")][0].read_text()
    per_call = re.search(r'id="flops-prefill-per-call">([\d,]+)<', mlp)
    assert per_call and _num(per_call.group(1)) == 2 * 3 * H * LLAMA["intermediate_size"] * B * T


def test_records_of_archviz_cost_show_the_section(archviz_cli, tmp_path):
    rec = tmp_path / "llama-cost.json"
    p = archviz_cli("cost", "hf:llama", *_sets(TINY["llama"]), "--seq", 16, "--context", "4K", "-o", rec, "--json")
    assert p.returncode == 0, p.stderr
    nodes = {n["representative"]: n for n in json.loads(p.stdout)["nodes"]}
    H = TINY["llama"]["hidden_size"]
    q = nodes["model.layers.0.self_attn.q_proj"]
    assert q["prefill"]["per_call"] == 2 * H * H * 1 * 16 and q["prefill"]["times"] == 2 * q["prefill"]["per_call"]
    assert q["decode"]["per_call"] == 2 * H * H
    out = tmp_path / "site"
    p = archviz_cli("build", rec, "-o", out)
    assert p.returncode == 0, p.stderr
    page = (out / "llama" / "index.html").read_text()
    rows = _rows(page)
    # the one decode step (at 4K) is measured; the KV cache, a formula of L, is drawn at 1K too
    assert [(r["l"], r.get("flops")) for r in rows] == [(1024, None), (4096, _decode_flops(TINY["llama"], 4096))]
    assert [r["kv"] for r in rows] == [_kv_bytes(TINY["llama"], 1024), _kv_bytes(TINY["llama"], 4096)]
    # --cost on records without the cost extra: one line, exit 2
    plain = tmp_path / "plain.json"
    assert archviz_cli("walk", "hf:llama", *_sets(TINY["llama"]), "-o", plain).returncode == 0
    p = archviz_cli("build", plain, "--cost", "-o", tmp_path / "s2")
    assert p.returncode == 2 and "carry no cost" in p.stderr and "Traceback" not in p.stderr


MODEL = '''"""Two blocks whose forward calls a kernel with no FLOPs formula."""
from dataclasses import dataclass

import torch
from torch import nn

from kernel import mystery_fused_op


@dataclass
class ModelArgs:
    vocab_size: int = 32
    dim: int = 16
    n_layers: int = 2


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mystery_fused_op(self.proj(x))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args.dim) for _ in range(args.n_layers))

    def forward(self, tokens: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return h
'''


def test_node_with_unknown_flops_says_why(archviz_cli, tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "config.json").write_text('{"vocab_size": 32, "dim": 16, "n_layers": 2}')
    rules = tmp_path / "rules.py"
    rules.write_text("import torch\nimport archviz.kernels\n\n"
                     "@archviz.kernels.shape_rule('kernel.mystery_fused_op')\n"
                     "def mystery(x):\n    return torch.empty_like(x)\n")
    out = tmp_path / "site"
    p = archviz_cli("build", tmp_path / "model.py", "--config", tmp_path / "config.json", "--kernel-rules", rules,
                    "--cost", "--seq", 8, "-o", out)
    assert p.returncode == 0, p.stderr
    slug = next(d.name for d in out.iterdir() if (d / "index.html").is_file())
    pages = {f.name: f.read_text() for f in (out / slug / "n").glob("*.html")}
    block = next(v for k, v in pages.items() if re.fullmatch(r"layers\.[^.]*\.html", k))
    dd = html.unescape(re.search(r'<dd id="flops-prefill">(.*?)</dd>', block, re.S).group(1))
    assert "unknown" in dd and "layers.0" in dd and "kernel.mystery_fused_op" in dd
    proj = next(v for k, v in pages.items() if k.endswith(".proj.html"))
    assert _num(re.search(r'id="flops-prefill-per-call">([\d,]+)<', proj).group(1)) == 2 * 16 * 16 * 1 * 8
    overview = html.unescape((out / slug / "index.html").read_text())
    assert "FLOPs unknown in layers.0" in overview and "kernel.mystery_fused_op" in overview


@pytest.mark.browser
def test_picture_in_a_browser_at_420px(site, chromium):
    for js in (True, False):
        page = chromium.new_context(viewport={"width": 420, "height": 900}, java_script_enabled=js).new_page()
        page.goto((site / "llama" / "index.html").as_uri())
        for cid in ("cost-flops", "cost-kv"):
            svg = page.locator(f"svg#{cid}")
            assert svg.is_visible()
            box = svg.bounding_box()
            assert box["width"] > 200 and box["x"] >= 0 and box["x"] + box["width"] <= 420 + 0.5
            points = svg.locator("circle.pt")
            assert points.count() == 4
            for i in range(points.count()):
                pt = points.nth(i).bounding_box()
                assert box["x"] <= pt["x"] and pt["x"] + pt["width"] <= box["x"] + box["width"], (cid, i)
                assert box["y"] <= pt["y"] and pt["y"] + pt["height"] <= box["y"] + box["height"], (cid, i)
            # larger L, larger value: points run left to right and upwards
            xs = [points.nth(i).bounding_box()["x"] for i in range(4)]
            ys = [points.nth(i).bounding_box()["y"] for i in range(4)]
            assert xs == sorted(xs) and ys == sorted(ys, reverse=True)
        # nothing of the section reaches past the viewport (wide tables scroll inside their box)
        over = page.evaluate("""() => [...document.querySelectorAll('#cost, #cost *')]
            .filter(e => !e.closest('.cost-scroll') || e.classList.contains('cost-scroll'))
            .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
            .map(e => e.tagName + '.' + e.className)""")
        assert over == [], over
        page.context.close()

"""The default site (`make site`) reads at phone, tablet and desktop width in a real Chromium: no page of a sample of
each kind scrolls sideways at 390×844, 768×1024 or 1280×800, no figure breaks across lines, and the node pages read as
the seed does (the breadcrumb with no dangling separator, MoE blocks and experts with their figures). Figures are
derived here from the example's config.json, never read from archviz's output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser_readable import WIDTHS, fits, measure
from helpers import REPO

pytestmark = pytest.mark.browser

CONFIG = json.loads((REPO / "examples" / "deepseek-v4-flash" / "config.json").read_text())
# One page of each kind: the site's index, the overview, a repeating group, a layer, attention (whose function
# summaries hold long paths), the output projection (the calculation table of the issue), a compressor (a long
# `code` in its description), the experts.
PAGES = {"site-index": "../index.html", "overview": "index.html", "group": "n/model.layers.3-42_group.html",
         "layer": "n/model.layers.2.html", "attention": "n/model.layers.2.self_attn.html",
         "output-projection": "n/model.layers.2.self_attn.o_b_proj.html",
         "compressor": "n/model.layers.3_5_to_41.self_attn.compressor.html",
         "experts": "n/model.layers.2.mlp.experts.html"}


def test_sample_pages_fit_at_phone_and_desktop_width(default_site: Path, chromium) -> None:
    bad = {}
    page = chromium.new_page()
    for w, h in WIDTHS:  # one page, resized: each width costs the loads, not a new page
        page.set_viewport_size({"width": w, "height": h})
        for name, rel in PAGES.items():
            shot = name if name in ("output-projection", "attention") else None
            got = measure(page, default_site / rel, shot)
            if not fits(got):
                bad[f"{name} at {w}"] = got
    page.close()
    assert bad == {}


def _text(html: str, start: str, end: str) -> str:
    part = html[html.index(start):]
    part = part[:part.index(end)]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part)).strip()


def test_breadcrumb_ends_in_a_title_not_a_separator(default_site: Path) -> None:
    for rel in ("n/model.layers.2.self_attn.o_b_proj.html", "n/model.layers.2.mlp.experts.html"):
        crumbs = _text((default_site / rel).read_text(), 'id="crumbs"', "</nav>")
        assert crumbs and not crumbs.endswith("›") and not crumbs.startswith("›"), crumbs


def test_moe_block_and_experts_say_their_figures(default_site: Path) -> None:
    d, inter = CONFIG["hidden_size"], CONFIG["moe_intermediate_size"]
    n, k = CONFIG["n_routed_experts"], CONFIG["num_experts_per_tok"]
    one = 3 * d * inter  # gate, up and down projections of one SwiGLU expert, no bias
    shared = CONFIG["n_shared_experts"] * 3 * d * inter
    experts = _text((default_site / "n/model.layers.2.mlp.experts.html").read_text(), '<dl class="facts">', "</dl>")
    assert f"routed experts {n:,}" in experts
    assert f"experts per token (top-k) {k}" in experts
    assert f"one expert {one:,} parameters" in experts
    assert f"active per token {k * one:,} {k} × {one:,}" in experts
    block = _text((default_site / "n/model.layers.2.mlp.html").read_text(), '<dl class="facts">', "</dl>")
    assert f"shared experts {shared:,} parameters, every token" in block
    router = n * d  # the router's [experts, hidden] weight (layer 2 routes by score: no hash table)
    assert f"active per token {k * one + shared + router:,}" in block


def test_one_name_per_layer_kind(default_site: Path) -> None:
    """Layers 2, 4, 6, ... attend by compressed sparse attention (transformers' default layer pattern), layer 2
    routed by hash and layers 4, 6, ... by score (config: the first num_hash_layers route by hash): the overview and
    the group page name each kind one way, never by the bare short form."""
    assert 2 < CONFIG["num_hash_layers"] <= 4  # the two routings the names tell apart
    for rel in ("index.html", "n/model.layers.3-42_group.html", "n/model.layers.html"):
        page = (default_site / rel).read_text()
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page[page.index("<main"):]))
        bare = re.findall(r"(\S+) compressed sparse attention layer", text)
        assert bare and all(w in ("hash-routed", "score-routed") for w in bare), (rel, sorted(set(bare)))


def test_dataflow_lanes_leave_room_at_the_right_edge(default_site: Path) -> None:
    """The values used again further down run in lanes right of every box: lanes at least 16 px apart, the first
    clear of the widest box, all inside the picture."""
    page = (default_site / "n/model.layers.2.self_attn.html").read_text()
    svg = page[page.index('<svg class="dataflow"'):]
    svg = svg[:svg.index("</svg>")]
    width = float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1))
    right = max(float(x) + float(w) for x, w in re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg))
    lanes = sorted({float(x) for d in re.findall(r'<path class="e" d="([^"]+)"', svg)
                    for x in re.findall(r"H([\d.]+)$", d) if float(x) > right + 4})  # not an arrow into a box
    assert len(lanes) >= 3, lanes  # this attention reads its inputs again further down
    assert lanes[0] - right >= 16 and lanes[-1] < width, (right, lanes, width)
    assert min(b - a for a, b in zip(lanes, lanes[1:])) >= 16, lanes


def test_sizes_on_node_pages_carry_their_names(default_site: Path) -> None:
    """Sizes that several config fields (or products of two) equal are named by what stands beside them: the
    final-stream norm's 16384 by the hc_mult × hidden_size it was viewed from, the KV norm's 512 by its sibling
    projection's head_dim (index_topk is 512 too), the query norm's 1024 by q_lora_rank (so is o_lora_rank); the
    weight's [out, in] note names both."""
    c = CONFIG
    assert c["head_dim"] == c["index_topk"] and c["q_lora_rank"] == c["o_lora_rank"]  # one field alone cannot say
    streams = c["hc_mult"] * c["hidden_size"]
    assert streams == c["n_routed_experts"] * c["num_attention_heads"]  # nor one product
    want = {"n/model.hc_head.input_norm.html": f"{streams} hc_mult × hidden_size",
            "n/model.layers.2.self_attn.kv_norm.html": f"{c['head_dim']} head_dim",
            "n/model.layers.2.self_attn.q_a_norm.html": f"{c['q_lora_rank']} q_lora_rank"}
    for rel, name in want.items():
        page = (default_site / rel).read_text()
        text = _text(page, "<main", "</main>")
        assert f"in [B batch, T positions, {name}]" in text, (rel, re.findall(r"in \[[^\]]*\]", text)[:2])
        assert f"out [B batch, T positions, {name}]" in text, rel
    flow = (default_site / "n/model.hc_head.html").read_text()  # the dataflow's view to the norm's input
    assert f"[B, T, {streams} hc_mult × hidden_size]" in flow and f"[B, T, {streams}]" not in flow
    kv = _text((default_site / "n/model.layers.2.self_attn.kv_proj.html").read_text(), "<main", "</main>")
    assert f"[out, in] = [{c['head_dim']:,} head_dim, {c['hidden_size']:,} hidden_size]" in kv  # the weight's note


def test_no_size_on_a_node_page_is_left_without_a_name(default_site: Path) -> None:
    """Sizes no single field decides (issue 44 item 5): the rotary half-width by qk_rope_head_dim/2, the width the
    partial rotary leaves by head_dim − qk_rope_head_dim, the experts' top-k rows per token by k·B·T (the second
    pass names it, in the layers the memo answered too), and 64, which three fields equal, with all three: in words
    in the shapes' text, and in a legend under each picture whose short labels keep it a number. Every page is
    read."""
    c = CONFIG
    rope, heads, k = c["qk_rope_head_dim"], c["num_attention_heads"], c["num_experts_per_tok"]
    equal = sorted(f for f, v in c.items() if type(v) is int and v == heads)
    assert rope == heads and len(equal) == 3
    said = f"{heads} is {equal[0]}, {equal[1]} or {equal[2]}"
    seen: dict[str, int] = {}
    for page in sorted((default_site / "n").glob("*.html")):
        text = _text(page.read_text(), "<main", "</main>")
        legend = re.search(r"Sizes the labels leave as numbers[^:]*: (.*?)\.(?: |$)", text)
        for shape in re.findall(r"(?<![\w\])])\[(?!\s)([^\[\]]{1,200})\]", text):
            dims = re.split(r",\s+", shape)
            if any(":" in d for d in dims):
                continue  # an index, not a shape
            for d in dims:
                if d in (str(rope // 2), str(c["head_dim"] - rope)):
                    seen[page.name] = seen.get(page.name, 0) + 1
                if d == str(heads):
                    assert legend and said in legend.group(1), (page.name, shape)
    assert not seen, seen  # no bare rotary half-width or partial-rotary width on any page
    attention = _text((default_site / "n/model.layers.2.self_attn.html").read_text(), "<main", "</main>")
    assert f"{rope // 2} qk_rope_head_dim/2" in attention
    assert f"{c['head_dim'] - rope} head_dim − qk_rope_head_dim" in attention
    assert f"({equal[0]}, {equal[1]} or {equal[2]})" in attention  # in words where the text has room
    act = _text((default_site / "n/model.layers.2.mlp.experts.act_fn.html").read_text(), "<main", "</main>")
    assert f"[{k}·B·T, {c['moe_intermediate_size']} moe_intermediate_size]" in act
    experts = sorted((default_site / "n").glob("*.mlp.experts.html"))  # every layer kind's, memoised ones too
    assert len(experts) >= 3
    for page in experts:  # the tokens' rows, one per routed expert, before the experts' matmuls
        assert f"view → [{k}·B·T, {c['hidden_size']} hidden_size]" in page.read_text(), page.name

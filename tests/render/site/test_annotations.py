"""The annotations `make site` ships for its default model (examples/deepseek-v4-flash/annotations.toml).

Checked here independently of archviz's own claim check: every claim's lines against the installed transformers'
modeling file (read here, with `ast` for where classes are), the numbers the descriptions state against the
config transformers builds, and the site built as `make site` builds it (its command read from the Makefile):
titles, descriptions and "Sources" links pinned to the installed release's tag, in the HTML and in Chromium.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
from helpers import REPO

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = REPO
EXAMPLE = ROOT / "examples" / "deepseek-v4-flash"
ANNOTATIONS = EXAMPLE / "annotations.toml"
MODELING = "transformers/models/deepseek_v4/modeling_deepseek_v4.py"


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.fixture(scope="module")
def notes() -> list[dict]:
    with open(ANNOTATIONS, "rb") as f:
        return tomllib.load(f)["node"]


@pytest.fixture(scope="module")
def modeling() -> Path:
    spec = importlib.util.find_spec("transformers")
    assert spec is not None and spec.submodule_search_locations, "transformers is not installed"
    return Path(next(iter(spec.submodule_search_locations))).parent / MODELING


def claims(note: dict) -> list[dict]:
    return note.get("claim", [])


def test_transformers_is_the_release_the_links_pin() -> None:
    import transformers

    # the claims' line numbers are those of this release; pyproject pins it, the site links to its tag
    assert transformers.__version__ == "5.23.0"
    assert '"transformers==5.23.0"' in (ROOT / "pyproject.toml").read_text()


def test_every_claim_holds_at_its_lines(notes: list[dict], modeling: Path) -> None:
    lines = modeling.read_text().splitlines()
    tree = ast.parse(modeling.read_text())
    classes = {n.name: (n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    assert sum(len(claims(n)) for n in notes) >= 30
    for note in notes:
        for c in claims(note):
            assert c["file"] == MODELING, c["id"]
            start, end = c["lines"]
            assert 1 <= start <= end <= len(lines), (c["id"], start, end, len(lines))
            cited = norm(" ".join(lines[start - 1:end]))
            assert norm(c["quote"]) in cited, (c["id"], c["quote"], cited)
            # a claim cites a few lines, not a whole class
            assert end - start <= 12, c["id"]
        if "class" in note:
            # the class exists in that file, and at least one of its claims cites lines of the class itself
            assert note["class"] in classes, note["class"]
            first, last = classes[note["class"]]
            inside = [c["id"] for c in claims(note) if first <= c["lines"][0] and c["lines"][1] <= last]
            assert inside or not claims(note), (note["class"], first, last)


def test_descriptions_state_the_configs_numbers(notes: list[dict]) -> None:
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(EXAMPLE))
    by = {n.get("class") or n.get("path"): n for n in notes}
    root = norm(by["DeepseekV4ForCausalLM"]["description"])
    compressed = sum(t != "sliding_attention" for t in cfg.layer_types)
    assert f"a decoder of {cfg.num_hidden_layers} layers" in root
    assert f"compressed long-range attention in {compressed} of them" in root
    assert cfg.tie_word_embeddings is False and "not tied" in root
    four = {4: "four"}[cfg.hc_mult]
    assert f"`hc_mult` ({cfg.hc_mult}) residual streams" in norm(by["model"]["description"])
    assert f"the {four} residual streams" in by["DeepseekV4DecoderLayer"]["description"]
    assert f"Every {cfg.compress_rates['heavily_compressed_attention']} tokens" in \
        by["DeepseekV4HCACompressor"]["description"]
    csa = cfg.compress_rates["compressed_sparse_attention"]
    assert f"Every {csa} tokens" in by["DeepseekV4CSACompressor"]["description"]
    assert f"overlapping windows of {2 * csa}" in norm(by["DeepseekV4CSACompressor"]["description"])
    hashed = sum(t == "hash_moe" for t in cfg.mlp_layer_types)
    assert f"`num_hash_layers` ({hashed})" in norm(by["DeepseekV4HashRouter"]["description"])


# ---------------------------------------------------------------------------------------------------------------------
# The site `make site` builds


@pytest.fixture(scope="module")
def site(default_site: Path) -> Path:
    """The default site (tests/conftest.py's `default_site`: the Makefile's `site` recipe, built once per run)."""
    return default_site


# One page per note: which node each selector lands on follows from the config (layers 0–1 sliding, hash-routed;
# layer 2 compressed sparse; odd layers from 3 heavily compressed; even from 4 compressed sparse, score-routed).
PAGES = {
    "DeepseekV4ForCausalLM": "index",
    "model": "n/model",
    "model.embed_tokens": "n/model.embed_tokens",
    "DeepseekV4DecoderLayer": "n/model.layers.0-1",
    "model.layers.*.self_attn": "n/model.layers.2.self_attn",
    "model.layers.*.self_attn.q_a_proj": "n/model.layers.4_6_to_42.self_attn.q_a_proj",
    "model.layers.*.self_attn.q_b_proj": "n/model.layers.0-1.self_attn.q_b_proj",
    "model.layers.*.self_attn.kv_proj": "n/model.layers.3_5_to_41.self_attn.kv_proj",
    "model.layers.*.self_attn.o_a_proj": "n/model.layers.2.self_attn.o_a_proj",
    "model.layers.*.self_attn.o_b_proj": "n/model.layers.2.self_attn.o_b_proj",
    "DeepseekV4HCACompressor": "n/model.layers.3_5_to_41.self_attn.compressor",
    "DeepseekV4CSACompressor": "n/model.layers.4_6_to_42.self_attn.compressor",
    "DeepseekV4Indexer": "n/model.layers.2.self_attn.compressor.indexer",
    "DeepseekV4IndexerScorer": "n/model.layers.2.self_attn.compressor.indexer.scorer",
    "DeepseekV4HyperConnection": "n/model.layers.0-1.attn_hc",
    "model.layers.*.attn_hc": "n/model.layers.2.attn_hc",
    "model.layers.*.ffn_hc": "n/model.layers.2.ffn_hc",
    "DeepseekV4HyperHead": "n/model.hc_head",
    "DeepseekV4SparseMoeBlock": "n/model.layers.2.mlp",
    "DeepseekV4Experts": "n/model.layers.3_5_to_41.mlp.experts",
    "DeepseekV4TopKRouter": "n/model.layers.4_6_to_42.mlp.gate",
    "DeepseekV4HashRouter": "n/model.layers.0-1.mlp.gate",
    "model.layers.*.mlp.shared_experts": "n/model.layers.2.mlp.shared_experts",
    "model.rotary_emb": "n/model.rotary_emb",
    "model.norm": "n/model.norm",
    "lm_head": "n/lm_head",
}


def pinned(c: dict, version: str) -> str:
    start, end = c["lines"]
    return f"https://github.com/huggingface/transformers/blob/v{version}/src/{c['file']}#L{start}-L{end}"


def plain(html: str) -> str:
    import html as h

    return norm(h.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"</?code>", "", html))))


def rendered(markdownish: str) -> str:
    """An annotation's text as the page's text reads: `code` spans without their backticks."""
    return plain(re.sub(r"`([^`]*)`", r"\1", norm(markdownish)))


def test_default_site_shows_titles_descriptions_and_pinned_sources(site: Path, notes: list[dict]) -> None:
    import transformers

    assert set(PAGES) == {n.get("class") or n.get("path") for n in notes}
    for note in notes:
        key = note.get("class") or note.get("path")
        html = (site / f"{PAGES[key]}.html").read_text()
        text = plain(html)
        if note.get("title") and key != "DeepseekV4ForCausalLM":
            assert re.search(rf"<title>{re.escape(note['title'])} · deepseek-v4-flash", html), (key, note["title"])
        if note.get("description"):
            # the description as the page renders it: `code` spans become <code>, the rest is plain text
            assert rendered(note["description"]) in text, key
        if claims(note):
            m = re.search(r"<h2>Sources <span class=\"dim\">(\d+)</span></h2>", html)
            assert m, key
            # the node's own claims, plus those of other notes landing on it (a class and a path note)
            assert int(m.group(1)) >= len(claims(note))
            for c in claims(note):
                assert f'href="{pinned(c, transformers.__version__)}"' in html, (key, c["id"])
                assert c["id"] in text and rendered(c["text"]) in text, (key, c["id"])
                assert f"lines {c['lines'][0]}–{c['lines'][1]}" in text, (key, c["id"])
            assert f"Pinned revision v{transformers.__version__}" in html


def test_default_site_annotated_nodes_in_chromium(site: Path, notes: list[dict], chromium) -> None:
    import transformers

    by = {n.get("class") or n.get("path"): n for n in notes}
    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    try:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        # from the overview, down by the annotated titles a reader sees, to the attention of layer 2
        page.goto((site / "index.html").as_uri())
        assert "a decoder of 43 layers" in page.inner_text("body")
        page.get_by_role("link", name=by["model"]["title"], exact=True).first.click()
        page.wait_for_load_state()
        assert page.title().startswith(f"{by['model']['title']} · "), page.title()
        assert "residual streams" in page.locator("#description").inner_text()
        page.goto((site / f"{PAGES['model.layers.*.self_attn']}.html").as_uri())
        note = by["model.layers.*.self_attn"]
        assert page.title().startswith(f"{note['title']} · ")
        desc = page.locator("#description")
        assert desc.is_visible()
        assert norm(desc.inner_text()) == rendered(note["description"])
        heading = page.get_by_role("heading", name=re.compile(r"^Sources"))
        assert heading.is_visible()
        for c in claims(note):
            link = page.locator(f'a[href="{pinned(c, transformers.__version__)}"]').first
            assert link.is_visible(), c["id"]
            assert norm(link.inner_text()).startswith(f"Pinned revision v{transformers.__version__}")
        assert not errors, errors
    finally:
        page.close()


def test_every_page_of_the_default_site_passes_axe(site: Path, chromium) -> None:
    """axe-core (vendored, run in Chromium) on every page `make site` writes: no serious or critical violation."""
    from browser_tools import serious_violations

    pages = sorted(site.parent.rglob("*.html"))
    assert len(pages) > 100  # the index, the overview and every node page
    found = serious_violations(chromium, pages, "light", site.parent)
    assert found == [], "\n".join(found)


def test_default_site_search_finds_checkpoint_names_module_paths_and_titles(site: Path, chromium) -> None:
    """The site's own search (site.js, in Chromium) by every name a user has: a checkpoint suffix (`wo_b`), a
    checkpoint module path and tensor name of layer 7 (taken from the shipped manifest), transformers' module path,
    and the title "output projection"; each node at most once, each row with its path. The checkpoint's `attn.wo_b`
    is transformers' `self_attn.o_b_proj` (its deepseek_v4 conversion mapping), one Linear in each of the 43 layers."""
    import gzip
    import json

    from archviz.render.site import expand_pattern

    with gzip.open(EXAMPLE / "manifest.json.gz", "rt") as f:
        text = f.read()
    stored = sorted(set(re.findall(r'"(layers\.7\.attn\.wo_b\.[a-z]+)"', text)))
    assert "layers.7.attn.wo_b.weight" in stored, stored[:5]
    layers = json.loads((EXAMPLE / "config.json").read_text())["num_hidden_layers"]
    every = {f"model.layers.{i}.self_attn.o_b_proj" for i in range(layers)}
    page = chromium.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto((site / "index.html").as_uri())

        def found(q: str) -> list[tuple[str, str, list[str]]]:  # (href, title, module paths shown)
            page.fill("#q", q)
            rows = page.eval_on_selector_all("#results li a", "els => els.map(e => [e.getAttribute('href'), "
                                             "e.querySelector('.t').innerText, e.querySelector('.meta').innerText])")
            assert len({h for h, _, _ in rows}) == len(rows), (q, rows)  # each node once
            return [(h, t, expand_pattern(meta.split(" · ")[-1].split(" +")[0])) for h, t, meta in rows]

        for q in ("layers.7.attn.wo_b", *stored, "model.layers.7.self_attn.o_b_proj"):
            rows = found(q)
            assert len(rows) == 1 and "model.layers.7.self_attn.o_b_proj" in rows[0][2], (q, rows)
        rows = found("wo_b")
        shown = [p for _, _, paths in rows for p in paths]
        assert sorted(shown) == sorted(every), rows  # every layer's output projection, each once
        rows = found("output projection")
        exact = [r for r in rows if r[1] == "Output projection"]
        assert rows[:len(exact)] == exact and sorted(p for _, _, ps in exact for p in ps) == sorted(every), rows
    finally:
        page.close()

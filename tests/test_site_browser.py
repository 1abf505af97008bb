"""The explorer in a real headless Chromium, opened from file://: follow links down to output projections, check the
counts, shapes and call-site lines against values derived here from the configs and the code, search, keys.

Needs Debian's chromium at /usr/bin/chromium and playwright-python (never `playwright install`). Skipped with a
reason when chromium is absent outside CI; in CI (env CI set) it must run.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.render.site import expand_pattern

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "dsv41like"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# transformers' deepseek_v4, shrunk so it builds and renders in seconds
V4_SETS = {"num_hidden_layers": 4, "hidden_size": 64, "vocab_size": 256, "num_attention_heads": 4, "head_dim": 32,
           "q_lora_rank": 32, "o_lora_rank": 16, "o_groups": 2, "moe_intermediate_size": 32, "n_routed_experts": 4,
           "num_experts_per_tok": 2, "index_n_heads": 2, "index_head_dim": 16, "qk_rope_head_dim": 8}
FIXTURE_LAYER = 4
V4_LAYER = 3


def _need_browser():
    ci = bool(os.environ.get("CI"))
    if not os.path.exists(CHROMIUM):
        if ci:
            pytest.fail(f"CI: {CHROMIUM} is missing — install Debian's chromium (apt-get install -y chromium)")
        pytest.skip(f"{CHROMIUM} is absent (apt-get install -y chromium); CI runs this test")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if ci:
            pytest.fail("CI: playwright-python is missing (pip install -e '.[test]')")
        pytest.skip("playwright-python is not installed (pip install -e '.[test]')")
    return sync_playwright


def _wait_for_fixture(timeout: float = 600) -> None:
    """The fixture is written by another engineer; wait for it rather than fail while it lands."""
    t = time.monotonic()
    while not ((FIXTURE / "model.py").is_file() and (FIXTURE / "config.json").is_file()):
        if time.monotonic() - t > timeout:
            pytest.fail(f"{FIXTURE} has no model.py + config.json")
        time.sleep(5)


def _line_of(path: Path, needle: str) -> int:
    hits = [i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln]
    assert len(hits) == 1, (path, needle, hits)
    return hits[0]


def _load(source: str, sets: dict | None = None):
    from archviz.errors import ShapeError
    from archviz.pipeline import PassOptions, records_for
    from archviz.sources import BuildOptions

    build = BuildOptions(overrides=tuple((sets or {}).items()))
    try:
        return records_for(source, build, PassOptions(shapes=True), cache=True)
    except (ShapeError, ImportError) as e:  # the shape pass is another stage: pages then show counts and code only
        print(f"no shapes for {source}: {e}", file=sys.stderr)
        return records_for(source, build, cache=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    sync_playwright = _need_browser()
    _wait_for_fixture()
    from archviz.cli import app
    from archviz.records import dumps

    tmp = tmp_path_factory.mktemp("browser")
    fixture_rec = _load(str(FIXTURE / "model.py"))
    v4_rec = _load("hf:deepseek_v4", V4_SETS)
    (tmp / "fixture.json").write_text(dumps(fixture_rec))
    (tmp / "v4.json").write_text(dumps(v4_rec))

    # an annotation on the fixture's output projection, its lines found in the code here
    model_py = FIXTURE / "model.py"
    call = _line_of(model_py, "self.wo_b(")
    lines = model_py.read_text().splitlines()
    fwd = max(i for i in range(1, call) if re.match(r"\s+def forward\(", lines[i - 1]))
    (tmp / "ann.toml").write_text(f'''
[[node]]
path = "layers.*.attn.wo_b"
description = "Map the group features back to the model width."

[[node.claim]]
id = "attention-forward"
file = "model.py"
lines = [{fwd}, {call}]
quote = "self.wo_b(o.flatten(2))"
text = "The grouped output goes through wo_b last."
''')
    site = tmp / "site"
    r = CliRunner().invoke(app, ["build", str(tmp / "fixture.json"), str(tmp / "v4.json"), "-o", str(site),
                                 "--annotations", str(tmp / "ann.toml"), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["pages"] > 50
    return {"site": site, "fixture": fixture_rec, "v4": v4_rec, "playwright": sync_playwright, "tmp": tmp}


class Console:
    def __init__(self, page):
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(f"{m.type}: {m.text} @ {page.url}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e} @ {page.url}"))
        page.on("requestfailed", lambda req: self.errors.append(f"requestfailed: {req.url}"))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))


@pytest.fixture(scope="module")
def browser(built, chromium):
    return chromium


def _num(text: str) -> int:
    return int(text.strip().replace(",", ""))


def _click_part(page, pattern: str) -> None:
    link = page.locator("#children > li > a").filter(has_text=re.compile(pattern))
    assert link.count() >= 1, (pattern, page.locator("#children > li > a").all_inner_texts(), page.url)
    with page.expect_navigation():
        link.first.click()


def _check_projection(page, record, path: str, per_instance: int, rows: tuple[int, int], call_line: int,
                      in_dim: int, out_dim: int) -> None:
    m = record.module(path)
    assert _num(page.inner_text("#per-instance")) == per_instance
    weight = page.locator("#calc tr", has_text="Weight matrix").locator("td.calc-expr").inner_text()
    assert weight == f"{rows[0]:,} × {rows[1]:,} = {per_instance:,}"
    if page.locator("#total").count():
        factors = [int(x.replace(",", "")) for x in re.findall(r"× ([\d,]+)", page.inner_text("#multiplicity"))]
        total = _num(page.inner_text("#total"))
        prod = 1
        for f in factors:
            prod *= f
        assert total == per_instance * prod
    shown = [p for code in page.locator("code.path").all_inner_texts() for p in expand_pattern(code)]
    assert path in shown, (path, shown)
    # the call site: the line the test found in the code; traced by the forward pass when the records have shapes
    assert _num(page.inner_text("#callsite-line")) == call_line
    marked = page.locator("table.code tr.mark td.ln").all_inner_texts()
    assert str(call_line) in marked
    assert m.calls, f"the shape pass recorded no calls for {path}: the page can show no shapes"
    if m.calls:
        assert m.call_sites and m.call_sites[0].line == call_line
        assert "no traced forward pass" not in page.inner_text("main")
        shape_in, shape_out = page.inner_text("#shape-in"), page.inner_text("#shape-out")
        assert re.search(rf"\b{in_dim}\b", shape_in) and shape_in.startswith("[")
        assert re.search(rf"\b{out_dim}\b", shape_out)
        assert "batch" in shape_in or "B" in shape_in


def test_follow_links_to_output_projections(built, browser):
    site = built["site"]
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    con = Console(page)
    page.goto((site / "index.html").as_uri())
    assert page.locator("a.model-link").count() == 2

    # --- the V4.1-like reference fixture: index -> overview -> layer map cell -> attn -> wo_b
    cfg = json.loads((FIXTURE / "config.json").read_text())
    dim, groups, rank = cfg["dim"], cfg["o_groups"], cfg["o_lora_rank"]
    with page.expect_navigation():
        page.locator("a.model-link", has_text="dsv41like").click()
    assert _num(page.inner_text("#total-parameters")) == built["fixture"].summary.parameters
    assert page.locator(".layermap .cell").count() == cfg["n_layers"]
    assert page.locator("svg.treemap rect").count() >= 3
    with page.expect_navigation():
        page.locator(".layermap a.cell", has_text=re.compile(rf"^{FIXTURE_LAYER}$")).click()
    layer_url = page.url
    _click_part(page, r"^attn\b(?!_)")
    _click_part(page, r"^wo_b\b")
    _check_projection(page, built["fixture"], f"layers.{FIXTURE_LAYER}.attn.wo_b", dim * groups * rank,
                      (dim, groups * rank), _line_of(FIXTURE / "model.py", "self.wo_b("), groups * rank, dim)
    # the annotation: its description and the claim, checked against the code at build time
    assert page.inner_text("#description") == "Map the group features back to the model width."
    assert "Direct evidence" in page.inner_text("#sources") and "attention-forward" in page.inner_text("#sources")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "site-dsv41like-wo_b.png"), full_page=True)

    # `u` goes up to the parent (the attention page), `u` again to the layer
    with page.expect_navigation():
        page.keyboard.press("u")
    with page.expect_navigation():
        page.keyboard.press("u")
    assert page.url == layer_url

    # --- transformers' deepseek_v4
    import transformers

    modeling = Path(transformers.__file__).parent / "models" / "deepseek_v4" / "modeling_deepseek_v4.py"
    hidden, groups, rank = V4_SETS["hidden_size"], V4_SETS["o_groups"], V4_SETS["o_lora_rank"]
    page.goto((site / "index.html").as_uri())
    with page.expect_navigation():
        page.locator("a.model-link", has_text="deepseek_v4").click()
    assert _num(page.inner_text("#total-parameters")) == built["v4"].summary.parameters
    with page.expect_navigation():
        page.locator(".layermap a.cell", has_text=re.compile(rf"^{V4_LAYER}$")).click()
    _click_part(page, r"^self_attn\b")
    _click_part(page, r"^o_b_proj\b")
    _check_projection(page, built["v4"], f"model.layers.{V4_LAYER}.self_attn.o_b_proj", hidden * groups * rank,
                      (hidden, groups * rank), _line_of(modeling, "self.o_b_proj("), groups * rank, hidden)
    link = page.locator("a.upstream").first.get_attribute("href")
    assert link and link.startswith(f"https://github.com/huggingface/transformers/blob/v{transformers.__version__}/"
                                    "src/transformers/models/deepseek_v4/modeling_deepseek_v4.py#L")
    page.screenshot(path=str(ARTIFACTS / "site-deepseek_v4-o_b_proj.png"), full_page=True)
    assert con.errors == [] and con.dialogs == []
    page.close()


def test_search_and_keyboard(built, browser):
    site = built["site"]
    page = browser.new_page()
    con = Console(page)
    page.goto((site / "dsv41like" / "index.html").as_uri())
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("wo_b")
    results = page.locator("#results li a")
    results.first.wait_for()
    texts = results.all_inner_texts()
    assert texts and all("wo_b" in t for t in texts), texts
    assert any("dsv41like" in t for t in texts) and not any("deepseek_v4 ·" in t for t in texts)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "wo_b" in page.url and "wo_b" in page.inner_text("h1") + page.inner_text("code.path")

    # a raw module path finds the node that stands for it
    page.keyboard.press("/")
    page.keyboard.type(f"layers.{FIXTURE_LAYER}.attn.wo_b")
    results.first.wait_for()
    href = results.first.get_attribute("href")
    assert href and "wo_b" in href
    with page.expect_navigation():
        page.keyboard.press("Enter")
    shown = [p for code in page.locator("code.path").all_inner_texts() for p in expand_pattern(code)]
    assert f"layers.{FIXTURE_LAYER}.attn.wo_b" in shown

    # j/k move through the parts, Enter opens, u comes back
    page.goto((site / "dsv41like" / "index.html").as_uri())
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert page.locator("#children > li.sel").count() == 1
    first = page.locator("#children > li").first
    assert "sel" in (first.get_attribute("class") or "")
    target = first.locator("a").get_attribute("href")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith(target)
    with page.expect_navigation():
        page.keyboard.press("u")
    assert page.url.endswith("dsv41like/index.html")
    page.keyboard.press("ArrowDown")
    assert page.locator("#children > li.sel").count() == 1
    assert con.errors == []
    page.close()


def test_search_finds_a_layer_inside_an_every_other_layer_group(built, browser, tmp_path):
    """DeepSeek-V4 alternates two kinds of attention layer: a group of every other layer shows as
    layers.{3,5,…,13}, and the search still finds one layer of it by its raw path."""
    from archviz.cli import app
    from archviz.records import dumps

    rec = _load("hf:deepseek_v4", {**V4_SETS, "num_hidden_layers": 16})
    (tmp_path / "v4.json").write_text(dumps(rec))
    site = tmp_path / "site"
    r = CliRunner().invoke(app, ["build", str(tmp_path / "v4.json"), "-o", str(site)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    target = "model.layers.7.self_attn.o_b_proj"
    assert rec.module(target) is not None
    page = browser.new_page()
    con = Console(page)
    page.goto((site / "deepseek_v4" / "index.html").as_uri())
    page.keyboard.press("/")
    page.keyboard.type(target)
    results = page.locator("#results li a")
    results.first.wait_for()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    codes = page.locator("code.path").all_inner_texts()
    assert any("\u2026" in c for c in codes), codes  # the page names its layers as a progression
    assert target in [p for c in codes for p in expand_pattern(c)], codes
    assert con.errors == []
    page.close()


def test_payloads_stay_inert_in_the_browser(built, browser, tmp_path):
    from test_site import xss_site

    out = xss_site(tmp_path)
    page = browser.new_page()
    con = Console(page)
    pages = sorted(out.rglob("*.html"))
    assert len(pages) >= 3
    for p in pages:
        page.goto(p.as_uri())
        assert page.evaluate("document.querySelectorAll('img').length") == 0, p
        assert page.evaluate("document.querySelectorAll('script:not([src])').length") == 0, p
        assert page.evaluate("document.querySelectorAll('[onerror]').length") == 0, p
    page.goto((out / "build" / "index.html").as_uri())
    page.keyboard.press("/")
    page.keyboard.type("script")
    page.locator("#results li").first.wait_for()
    assert "<script>alert" in page.inner_text("#results")  # shown as text
    assert page.evaluate("document.querySelectorAll('#results script, #results img').length") == 0
    assert con.dialogs == [] and con.errors == []
    page.close()

"""The explorer's defects of issue 23, each in a real headless Chromium: the exact path ranks its node first, a result
line shows no empty field, the top module's own tensors are a part of the overview, a group node shows the code of
the module that holds its members, no page scrolls sideways at 420 px, the diff page's columns and root row, and node
pages read without JavaScript.

Values come from the fixtures' configs and code (line numbers found here in the source text), never from the site.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.render.site import expand_pattern
from browser_tools import Console, _need_browser, _num
from helpers import REPO

pytestmark = pytest.mark.browser

ROOT = REPO
DSV41 = ROOT / "tests" / "fixtures" / "dsv41like"
NAMES41 = ROOT / "tests" / "fixtures" / "names" / "deepseek-v4.1-flash.toml"
TOP = ROOT / "tests" / "fixtures" / "toplevel"


def _cli(*args: str, codes: tuple[int, ...] = (0,)) -> None:
    from archviz.cli import app

    r = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert r.exit_code in codes, r.output


@pytest.fixture(scope="module")
def sites(tmp_path_factory, toplevel_sites):
    playwright = _need_browser()
    tmp = tmp_path_factory.mktemp("defects")
    _cli("build", str(DSV41 / "model.py"), "--names", str(NAMES41), "-o", str(tmp / "v41"))
    return {"tmp": tmp, "top": toplevel_sites / "site", "diff": toplevel_sites / "diff", "playwright": playwright}


@pytest.fixture(scope="module")
def browser(sites, chromium):
    return chromium


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _line_of(path: Path, needle: str) -> int:
    hits = [i for i, ln in enumerate(_lines(path), 1) if needle in ln]
    assert len(hits) == 1, (path, needle, hits)
    return hits[0]


def _class_span(path: Path, cls: str, method: str) -> tuple[int, int]:
    import ast

    tree = ast.parse(path.read_text())
    c = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    f = next(n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == method)
    return f.lineno, f.end_lineno


def test_exact_path_ranks_its_node_first(sites, browser):
    """`layers.7.attn.wo_b` opens the output projection's page, not the "Grouped output" node gathering it."""
    site = sites["tmp"] / "v41"
    page = browser.new_page()
    con = Console(page)
    page.goto((site / "dsv41like" / "index.html").as_uri())
    target = "layers.7.attn.wo_b"
    page.keyboard.press("/")
    page.keyboard.type(target)
    results = page.locator("#results li a")
    results.first.wait_for()
    first = results.first.inner_text()
    assert "Output projection" in first and "Grouped output" not in first, results.all_inner_texts()
    # no result line shows an empty field ("dsv41like ·  · 754,974,720")
    for meta in page.locator("#results li a .meta").all_inner_texts():
        fields = meta.split(" · ")
        assert all(f.strip() for f in fields), meta
    grouped = [t for t in results.all_inner_texts() if t.startswith("Grouped output")]
    assert grouped, results.all_inner_texts()  # the group is found too, below
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.inner_text("h1") == "Output projection"
    shown = [p for code in page.locator("code.path").all_inner_texts() for p in expand_pattern(code)]
    assert target in shown
    # a path prefix ranks the nodes below it above mere title matches
    page.keyboard.press("/")
    page.keyboard.type("layers.7.attn")
    results.first.wait_for()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    shown = [p for code in page.locator("code.path").all_inner_texts() for p in expand_pattern(code)]
    assert "layers.7.attn" in shown, shown
    assert con.errors == []
    page.close()


def test_top_module_tensors_are_a_part(sites, browser):
    cfg = json.loads((TOP / "config.json").read_text())
    d, v, f, L = cfg["dim"], cfg["vocab_size"], cfg["inter_dim"], cfg["n_layers"]
    h, hd, g, r = cfg["n_heads"], cfg["head_dim"], cfg["o_groups"], cfg["o_lora_rank"]
    attn = d * h * hd + d * 2 * h * hd + (h * hd // g) * g * r + g * r * d
    block = 2 * d + attn + 3 * d * f
    top_own = 3 * d  # image_start, image_end, image_newline: one vector of the model width each
    total = v * d + L * block + d + d * v + top_own
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    con = Console(page)
    page.goto((sites["top"] / "toplevel" / "index.html").as_uri())
    assert _num(page.inner_text("#total-parameters")) == total
    parts = page.locator("#children > li")
    shown = [_num(x) for x in page.locator("#children > li .n").all_inner_texts()]
    assert sum(shown) == total, (shown, total)
    own = parts.filter(has_text="Top-level tensors")
    assert own.count() == 1 and _num(own.locator(".n").inner_text()) == top_own
    for name in ("image_start", "image_end", "image_newline"):
        assert name in own.inner_text()
        row = page.locator("#own-tensors tr", has_text=name)
        assert _num(row.locator("td.num").inner_text()) == d
    own.locator("a").click()
    assert page.evaluate("location.hash") == "#own-tensors"
    # the outline of all nodes lists them as well
    outline = page.locator("details.outline li", has_text="Top-level tensors")
    assert outline.count() == 1 and _num(outline.locator(".n").text_content()) == top_own
    assert con.errors == []
    page.close()


def test_group_node_shows_where_its_members_are_built_and_called(sites, browser):
    model = DSV41 / "model.py"
    init = _class_span(model, "Attention", "__init__")
    fwd = _class_span(model, "Attention", "forward")
    block_init = _class_span(model, "Block", "__init__")
    built = {_line_of(model, "self.wo_a ="), _line_of(model, "self.wo_b =")}
    called = _line_of(model, "self.wo_b(")
    used = _line_of(model, "self.wo_a.weight")
    site = sites["tmp"] / "v41" / "dsv41like"
    pages = sorted((site / "n").glob("layers.7.attn.wo_a*group*.html"))
    assert len(pages) == 1, sorted(p.name for p in (site / "n").glob("layers.7.attn*"))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    con = Console(page)
    page.goto(pages[0].as_uri())
    assert page.inner_text("h1") == "Grouped output"
    titles = page.locator("#code .ex-title").all_inner_texts()
    assert titles and all(t.startswith("Attention.") for t in titles), titles
    assert not any("Block" in t for t in titles)
    first = lambda tbl: int(tbl.locator("td.ln").first.inner_text())  # noqa: E731
    last = lambda tbl: int(tbl.locator("td.ln").last.inner_text())  # noqa: E731
    tables = page.locator("#code table.code")
    assert tables.count() == 2
    assert first(tables.nth(0)) <= init[0] and last(tables.nth(0)) == init[1]
    assert first(tables.nth(0)) > block_init[1] or last(tables.nth(0)) < block_init[0]
    assert (first(tables.nth(1)), last(tables.nth(1))) == fwd
    marks0 = {int(x) for x in tables.nth(0).locator("tr.mark td.ln").all_inner_texts()}
    marks1 = {int(x) for x in tables.nth(1).locator("tr.mark td.ln").all_inner_texts()}
    assert marks0 == built
    assert {called, used} <= marks1
    heading = page.inner_text("#code h2")
    assert f"{fwd[0]}–{fwd[1]}" in heading and f"{init[1]}" in heading
    assert con.errors == []
    page.close()


def _no_sideways(page, url: str) -> None:
    page.goto(url)
    w = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert w[0] <= w[1], (url, w, page.evaluate(
        "Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > "
        "window.innerWidth + 1).slice(-3).map(e => e.tagName + '.' + e.className + ' ' + "
        "e.textContent.slice(0, 60))"))


def test_nothing_scrolls_sideways_at_420px(sites, browser, tmp_path):
    page = browser.new_page(viewport={"width": 420, "height": 800})
    con = Console(page)
    for site in (sites["tmp"] / "v41", sites["top"]):
        for p in [site / "index.html"] + sorted(site.glob("*/index.html")) + sorted(site.glob("*/n/*.html"))[:60]:
            _no_sideways(page, p.as_uri())
    # a long code-header path: a model whose file is cited by a long display path
    long = tmp_path / "a_very_long_folder_name_for_the_model_code" / "another_long_folder_name_below_it"
    long.mkdir(parents=True)
    (long / "modeling_a_model_with_a_really_long_file_name_v4_1_flash.py").write_text(
        (TOP / "model.py").read_text())
    # V3-sized widths (counts of 13 digits in the dtype table) and a title with no place to break
    cfg = {**json.loads((TOP / "config.json").read_text()), "vocab_size": 129280, "dim": 7168, "inter_dim": 18432,
           "n_layers": 61, "n_heads": 128, "head_dim": 128, "o_groups": 16, "o_lora_rank": 1024}
    (long / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "names.toml").write_text('"layers.*.attn.wo_b" = "Output_projection_of_the_grouped_low_rank_output"\n')
    _cli("build", str(long / "modeling_a_model_with_a_really_long_file_name_v4_1_flash.py"), "--no-shapes",
         "--names", str(tmp_path / "names.toml"), "-o", str(tmp_path / "site"))
    pages = sorted((tmp_path / "site").glob("*/n/*wo_b*.html"))
    assert pages
    for p in pages + sorted((tmp_path / "site").glob("*/index.html")):
        _no_sideways(page, p.as_uri())
    assert con.errors == []
    page.close()


def test_diff_page_columns_and_root_row(sites, browser, tmp_path):
    """The "what" column wraps inside the table at 1280 px (a tensor renamed to a long name in B), nothing scrolls
    sideways at 420 px, and the top module's row names it in both columns."""
    b = tmp_path / "b"
    b.mkdir()
    long = "image_newline_marker_after_every_row_of_patches_in_the_picture_of_the_vision_tower"
    (b / "model.py").write_text((TOP / "model.py").read_text().replace("self.image_newline =", f"self.{long} ="))
    _cli("diff", str(TOP / "model.py"), str(b / "model.py"), "--config-a", str(TOP / "config.json"),
         "--config-b", str(TOP / "config.json"), "--site", str(tmp_path / "diff"), codes=(0, 1))
    for site in (tmp_path / "diff", sites["diff"]):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        con = Console(page)
        page.goto((site / "diff.html").as_uri())
        root_rows = page.locator("table.diff-entries tbody tr", has_text="image_start" if site != tmp_path / "diff"
                                 else long)
        assert root_rows.count() == 1, page.locator("table.diff-entries").inner_text()
        cells = root_rows.locator("td").all_inner_texts()
        assert cells[1].strip() == "(model)", cells  # the same path in A and B: named once
        assert root_rows.locator("td").nth(1).locator("a").get_attribute("href").endswith("/index.html")
        fits = page.evaluate("""(() => {
            const main = document.querySelector('main').getBoundingClientRect();
            const t = document.querySelector('table.diff-entries').getBoundingClientRect();
            const over = Array.from(document.querySelectorAll('table.diff-entries td'))
                .filter(td => td.scrollWidth > td.clientWidth + 1).map(td => td.textContent.slice(0, 60));
            return {inside: t.right <= main.right + 1, over: over,
                    page: document.documentElement.scrollWidth <= innerWidth}; })()""")
        assert fits == {"inside": True, "over": [], "page": True}, fits
        page.set_viewport_size({"width": 420, "height": 800})
        _no_sideways(page, (site / "diff.html").as_uri())
        assert con.errors == []
        page.close()


# A node page's #calc count, each code excerpt's first line number, where it cites and first source line, and the
# main links: the text a locator gives, as textContent.
_SHOWN = """() => ({
    calc: document.querySelectorAll('#calc').length,
    figures: [...document.querySelectorAll('figure.excerpt-fig')].map(f => ({
        line: f.querySelector('.excerpt td.ln')?.textContent ?? null,
        where: f.querySelector('.ex-where')?.textContent ?? '',
        src: f.querySelector('.excerpt td.src')?.textContent ?? ''})),
    hrefs: [...document.querySelectorAll('main a[href]')].map(a => a.getAttribute('href')),
})"""


def test_node_pages_read_without_javascript(sites, browser):
    """JavaScript off: every node page shows its code excerpts (the lines themselves), tables, shapes and links."""
    model = DSV41 / "model.py"
    src = _lines(model)
    call = _line_of(model, "self.wo_b(")
    site = sites["tmp"] / "v41" / "dsv41like"
    ctx = browser.new_context(java_script_enabled=False)
    page = ctx.new_page()
    page.goto((site / "n" / "layers.7.attn.wo_b.html").as_uri())
    rows = page.locator("#code table.code tr.mark", has_text="self.wo_b(")
    assert rows.count() >= 1
    assert int(rows.first.locator("td.ln").inner_text()) == call
    assert rows.first.locator("td.src").inner_text().strip() == src[call - 1].strip()
    assert page.locator("#calc tr").count() >= 3 and page.locator("#shape-in code").count() >= 1
    assert page.locator(".noscript").count() == 0
    pages = sorted(site.glob("n/*.html"))
    for p in pages:
        page.goto(p.as_uri())
        shown = page.evaluate(_SHOWN)  # what the page shows, read in one call (a locator a value is a round trip)
        assert shown["calc"] == 1, p
        for fig in shown["figures"]:
            assert fig["line"] is not None, p
            n = int(fig["line"])
            cited = DSV41 / fig["where"].split()[0]
            text = _lines(cited) if cited.is_file() else None
            got = fig["src"].rstrip()
            assert got == text[n - 1].rstrip() if text else got, (p, n)
        hrefs = shown["hrefs"]
        for h in hrefs:
            if h and not h.startswith(("http", "#")):
                assert (p.parent / h.split("#")[0]).resolve().is_file(), (p, h)
    ctx.close()

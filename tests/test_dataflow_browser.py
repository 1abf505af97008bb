"""The dataflow pictures in a real headless Chromium, opened from file:// (issue 23 item 2): boxes on a block's page
and on the overview, every module box a link to a page that lists that module, no two boxes overlapping on screen,
the residual edges drawn, and the picture there with JavaScript off. Needs Debian's chromium and playwright-python
(see tests/test_site_browser.py)."""

from __future__ import annotations

import sys

import pytest

import archviz
from archviz.group import group
from archviz.render.site import build_site, expand_pattern
from archviz.shapes import trace_shapes
from archviz.walk import walk
from test_dataflow import BLOCKS
from test_site_browser import Console

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory, chromium):
    tmp = tmp_path_factory.mktemp("flowsite")
    (tmp / "flow_blocks_b.py").write_text(BLOCKS)
    sys.path.insert(0, str(tmp))
    try:
        built = archviz.build("flow_blocks_b:two_kinds")
        record = group(trace_shapes(built, walk(built)))
    finally:
        sys.path.remove(str(tmp))
        sys.modules.pop("flow_blocks_b", None)
    out = tmp / "site"
    build_site([record], str(out))
    model = next(p for p in out.iterdir() if p.is_dir() and (p / "index.html").is_file() and p.name != "static")
    return {"model": model, "record": record, "browser": chromium}


def _boxes(page) -> list[dict]:
    return page.evaluate("""() => [...document.querySelectorAll('svg.dataflow .box')].map(b => {
        const r = b.querySelector('rect').getBoundingClientRect();
        return {kind: b.getAttribute('class').split(' ')[1], href: b.getAttribute('href'), path: b.dataset.path || '',
                url: b.getAttribute('href') ? new URL(b.getAttribute('href'), location.href).href : null,
                text: b.querySelector('title').textContent, x: r.x, y: r.y, w: r.width, h: r.height};
    })""")


def _no_overlap(boxes: list[dict]) -> None:
    for i, a in enumerate(boxes):
        assert a["w"] > 0 and a["h"] > 0, a
        for b in boxes[i + 1:]:
            apart = a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"] or \
                a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"]
            assert apart, (a["text"], b["text"])


def _links_resolve(page, boxes: list[dict]) -> int:
    """Every module box opens a page (no error) whose module list holds the module the box stands for."""
    linked = [b for b in boxes if b["kind"] in ("call", "fold")]
    assert linked and all(b["href"] for b in linked), linked
    for b in linked:
        response = page.goto(b["url"])
        assert response is not None and response.ok, b
        shown = [p for code in page.locator("code.path").all_inner_texts() for p in expand_pattern(code)]
        assert b["path"] in shown, (b, shown)
        assert page.locator("#title").inner_text().strip(), b
    return len(linked)


def test_block_page_shows_its_inside(site):
    page = site["browser"].new_page(viewport={"width": 1200, "height": 900})
    console = Console(page)
    block = next(p for p in (site["model"] / "n").glob("layers.0-2.html"))
    page.goto(block.as_uri())
    boxes = _boxes(page)
    layer = site["record"].module("layers.0")
    children = [c.rsplit(".", 1)[-1] for c in layer.children]
    calls = [b["path"].rsplit(".", 1)[-1] for b in boxes if b["kind"] == "call"]
    assert calls == children == ["norm1", "attn", "norm2", "mlp"]  # Block.forward calls them in this order
    assert [b["text"].split(" ")[0] for b in boxes if b["kind"] == "op"] == ["add", "add"]  # the two residuals
    # the boxes stand in forward order, read left to right and top to bottom (a row's boxes share their middle)
    order = [(round(b["y"] + b["h"] / 2), b["x"]) for b in boxes]
    assert order == sorted(order)
    _no_overlap(boxes)
    # each add reads two values, the one before it and the residual: two arrows end at its box
    adds = page.evaluate("""() => [...document.querySelectorAll('svg.dataflow .box.op rect')]
        .map(r => ['x', 'y', 'width', 'height'].map(a => +r.getAttribute(a)))""")
    ends = page.evaluate("""() => [...document.querySelectorAll('svg.dataflow path.e[marker-end]')]
        .map(p => p.getPointAtLength(p.getTotalLength())).map(e => [e.x, e.y])""")
    assert len(adds) == 2
    for x, y, w, h in adds:
        assert len([1 for ex, ey in ends if x - 3 <= ex <= x + w + 3 and y - 3 <= ey <= y + h + 3]) == 2, (adds, ends)
    assert _links_resolve(page, boxes) == 4
    assert not console.errors, console.errors
    page.close()


def test_overview_folds_the_layers_and_links_each_fold(site):
    page = site["browser"].new_page(viewport={"width": 1200, "height": 900})
    page.goto((site["model"] / "index.html").as_uri())
    boxes = _boxes(page)
    folds = [b for b in boxes if b["kind"] == "fold"]
    n = len(site["record"].module("layers").children)
    assert [f["text"].split(" · ")[0] for f in folds] == ["layers 0–2", f"layers 3–{n - 1}"]
    assert [f["path"] for f in folds] == ["layers.0", "layers.3"]
    assert len(boxes) < 12  # a box per layer would be more than the 12 layers alone
    _no_overlap(boxes)
    _links_resolve(page, boxes)
    page.close()


def test_the_picture_needs_no_javascript(site):
    context = site["browser"].new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto((site["model"] / "n" / "layers.0-2.html").as_uri())
    boxes = _boxes(page)  # evaluate runs even with the page's scripts off
    assert len([b for b in boxes if b["kind"] == "call"]) == 4
    _no_overlap(boxes)
    assert page.locator("svg.dataflow").get_attribute("aria-label").startswith("Dataflow of ")
    context.close()


def test_the_picture_stays_inside_the_page_at_420px(site):
    page = site["browser"].new_page(viewport={"width": 420, "height": 800})
    page.goto((site["model"] / "n" / "layers.0-2.html").as_uri())
    fig = page.evaluate("""() => { const f = document.querySelector('figure.dataflow-fig');
        const s = f.querySelector('svg'); return {right: f.getBoundingClientRect().right, inner: innerWidth,
        svg: s.getBoundingClientRect().width, scroll: f.scrollWidth, client: f.clientWidth}; }""")
    assert fig["right"] <= fig["inner"], fig  # the figure stays inside the page
    assert fig["svg"] > 0
    assert fig["svg"] <= fig["client"] or fig["scroll"] > fig["client"], fig  # a wider picture scrolls within it
    page.close()

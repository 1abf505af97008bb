"""What the browser tests share: where Debian's chromium is and how it is started, the skip (or, in CI, the failure)
without it or playwright, a page's console errors and dialogs, axe-core's serious violations, and the dataflow
picture's boxes as laid out on screen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


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


class Console:
    def __init__(self, page):
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(f"{m.type}: {m.text} @ {page.url}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e} @ {page.url}"))
        page.on("requestfailed", lambda req: self.errors.append(f"requestfailed: {req.url}"))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))


def _num(text: str) -> int:
    return int(text.strip().replace(",", ""))


# The rules whose every failure axe reports as minor or moderate (the rule's own impact, else the impacts of its
# checks, from axe's metadata): a serious or critical violation never comes from them, so they are not run. A check
# with no impact keeps its rule.
_SERIOUS_RULES = """() => {
    const low = ['minor', 'moderate'];
    const off = {};
    for (const rule of axe._audit.rules) {
        const impacts = rule.impact ? [rule.impact]
            : [...rule.any, ...rule.all, ...rule.none].map(c => (axe._audit.data.checks[c.id || c] || {}).impact);
        if (impacts.length && impacts.every(i => low.includes(i))) off[rule.id] = {enabled: false};
    }
    return off;
}"""


def serious_violations(browser, pages: list[Path], scheme: str, root: Path) -> list[str]:
    """axe's serious and critical violations on each of `pages`, a line each (page, rule, the first nodes), in a
    page of `browser` (the session's Chromium). Every rule axe runs by default that can report a serious or critical
    violation runs on every page; axe is compiled into each page before its own scripts (an init script: the
    renderer compiles it once, not once a page)."""
    assert AXE.read_text().startswith("/*! axe v"), "tests/vendor/axe.min.js keeps its license header"
    found = []
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    try:
        context.add_init_script(path=AXE)
        page = context.new_page()
        off = None
        for f in pages:
            page.goto(f.as_uri())
            if off is None:
                off = page.evaluate(_SERIOUS_RULES)
                assert "color-contrast" not in off and "region" in off, off  # a serious rule runs, a moderate not
            res = page.evaluate("off => axe.run(document, {resultTypes: ['violations'], rules: off})", off)
            for v in res["violations"]:
                if v["impact"] in ("serious", "critical"):
                    found.append(f"{f.relative_to(root)}: {v['id']} ({v['impact']}): {v['help']} — "
                                 + "; ".join(n["target"][0] if isinstance(n["target"][0], str) else str(n["target"])
                                             for n in v["nodes"][:5]))
    finally:
        context.close()
    return found


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

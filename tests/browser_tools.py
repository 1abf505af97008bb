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


def serious_violations(browser, pages: list[Path], scheme: str, root: Path) -> list[str]:
    """axe's serious and critical violations on each of `pages`, a line each (page, rule, the first nodes), in a
    page of `browser` (the session's Chromium)."""
    assert AXE.read_text().startswith("/*! axe v"), "tests/vendor/axe.min.js keeps its license header"
    found = []
    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    try:
        for f in pages:
            page.goto(f.as_uri())
            page.add_script_tag(url=AXE.as_uri())  # by URL, not its 500 KB text sent into each page: ~18% faster
            res = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            for v in res["violations"]:
                if v["impact"] in ("serious", "critical"):
                    found.append(f"{f.relative_to(root)}: {v['id']} ({v['impact']}): {v['help']} — "
                                 + "; ".join(n["target"][0] if isinstance(n["target"][0], str) else str(n["target"])
                                             for n in v["nodes"][:5]))
    finally:
        page.close()
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

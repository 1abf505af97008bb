"""Accessibility: axe-core (vendored in tests/vendor, run in headless Chromium from file://) finds no serious or
critical violation on any page of a built site (the index, the overview, every node and group page) and on the diff
page, in the light colour scheme; and on one page of each kind in the dark one."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_site_browser import _need_browser

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
AXE = ROOT / "tests" / "vendor" / "axe.min.js"


@pytest.fixture(scope="module")
def site(toplevel_sites):
    playwright = _need_browser()
    return toplevel_sites, playwright


def _pages(out: Path, every: bool) -> list[Path]:
    model = out / "site" / "toplevel"
    group = sorted(model.glob("n/*group*.html"))
    node = sorted(model.glob("n/*wo_b.html"))
    assert group and node, sorted(p.name for p in model.glob("n/*.html"))
    if every:  # the whole site: every page it wrote, and the diff page
        pages = sorted(out.joinpath("site").rglob("*.html"))
        assert len(pages) > 12 and node[0] in pages and group[0] in pages
        return [*pages, out / "diff" / "diff.html"]
    return [out / "site" / "index.html", model / "index.html", node[0], group[0], out / "diff" / "diff.html"]


def serious_violations(browser, pages: list[Path], scheme: str, root: Path) -> list[str]:
    """axe's serious and critical violations on each of `pages`, a line each (page, rule, the first nodes), in a
    page of `browser` (the session's Chromium)."""
    assert AXE.read_text().startswith("/*! axe v"), "tests/vendor/axe.min.js keeps its license header"
    found = []
    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    try:
        for f in pages:
            page.goto(f.as_uri())
            page.add_script_tag(path=str(AXE))
            res = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            for v in res["violations"]:
                if v["impact"] in ("serious", "critical"):
                    found.append(f"{f.relative_to(root)}: {v['id']} ({v['impact']}): {v['help']} — "
                                 + "; ".join(n["target"][0] if isinstance(n["target"][0], str) else str(n["target"])
                                             for n in v["nodes"][:5]))
    finally:
        page.close()
    return found


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_accessibility_violations(site, scheme, chromium):
    out, _ = site
    found = serious_violations(chromium, _pages(out, every=scheme == "light"), scheme, out)
    assert found == [], "\n".join(found)

"""Accessibility: axe-core (vendored in tests/vendor, run in headless Chromium from file://) finds no serious or
critical violation on any page of a built site (the index, the overview, every node and group page) and on the diff
page, in the light colour scheme; and on one page of each kind in the dark one."""

from __future__ import annotations

from pathlib import Path

import pytest

from browser_tools import _need_browser, serious_violations

pytestmark = pytest.mark.browser

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


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_accessibility_violations(site, scheme, chromium):
    out, _ = site
    found = serious_violations(chromium, _pages(out, every=scheme == "light"), scheme, out)
    assert found == [], "\n".join(found)


def test_axe_reports_what_is_serious_and_leaves_out_only_what_cannot_be(tmp_path, chromium):
    """The check itself (tests/browser_tools.py): a page of grey text on white (contrast 1.6:1, serious) and an image
    without text (critical) is reported on both; a page whose only faults are moderate (no main landmark, text outside
    any region) passes."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!doctype html><html lang="en"><head><title>t</title></head><body><main>'
                   '<p style="color:#ccc;background:#fff">faint</p><img src="data:,"></main></body></html>')
    moderate = tmp_path / "moderate.html"
    moderate.write_text('<!doctype html><html lang="en"><head><title>t</title></head><body><p>plain</p></body></html>')
    found = serious_violations(chromium, [bad, moderate], "light", tmp_path)
    assert [line.split(" (")[0] for line in found] == ["bad.html: color-contrast", "bad.html: image-alt"], found

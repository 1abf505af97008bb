"""The gallery's pages in headless Chromium: axe-core (tests/vendor) finds no serious or critical violation on the
index, the compare pages, the coverage page and a pair's diff page (light; the index and compare page dark too)."""

from __future__ import annotations

import pytest

from browser_tools import serious_violations

pytestmark = pytest.mark.browser


def test_no_serious_accessibility_violations(gallery_site, chromium):
    out = gallery_site.out
    pages = [out / "index.html", out / "compare.html", out / "compare-llama--mistral.html", out / "coverage.html",
             out / "diff-llama--mistral.html"]
    found = serious_violations(chromium, pages, "light", out)
    found += serious_violations(chromium, pages[:2], "dark", out)
    assert found == [], "\n".join(found)

"""What the "reads anywhere" browser tests share: a page measured at a viewport (does it scroll sideways, is any
figure broken across lines, how tall is it), and a screenshot of it for a person to look at."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Every figure in the page's main text (grouped digits, decimals), each a Range: its boxes must stand on one line.
# Code listings and pictures are left out (code scrolls in its own box; SVG text is laid out by the picture).
MEASURE = """() => {
  const broken = [];
  const re = /\\d{1,3}(?:,\\d{3})+(?:\\.\\d+)?|\\d+\\.\\d+/g;
  const root = document.querySelector('main') || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  let n;
  while ((n = walker.nextNode())) {
    const el = n.parentElement;
    if (!el || el.closest('table.code, svg, details:not([open]), [hidden], script')) continue;
    const t = n.textContent; let m; re.lastIndex = 0;
    while ((m = re.exec(t))) {
      const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
      const lines = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.bottom)));
      if (lines.size > 1) broken.push(m[0]);
    }
  }
  return {scroll: document.documentElement.scrollWidth, inner: innerWidth,
          height: document.documentElement.scrollHeight, broken};
}"""

WIDTHS = ((390, 844), (768, 1024), (1280, 800))  # phone, tablet, desktop
SHOTS = Path(os.environ.get("ARCHVIZ_SHOTS") or tempfile.gettempdir()) / "archviz-shots"


def measure(page, path: Path, shot: str | None = None) -> dict:
    """The page at `path` in `page` (its viewport set by the caller): scroll width, inner width, height, and the
    figures broken across lines; with `shot`, a full-page PNG under SHOTS (not in the repository)."""
    page.goto(path.as_uri())
    got = page.evaluate(MEASURE)
    if shot:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{shot}-{page.viewport_size['width']}.png"), full_page=True)
    return got


def fits(got: dict) -> bool:
    return got["scroll"] <= got["inner"] and not got["broken"]

"""The README's picture of the explorer (`make readme-picture`): one page of the default site (`make site`), the
output projection of a compressed sparse attention layer, as headless Chromium shows it at 1280×800 (the first
screen, not the whole page), written as a PNG.

    python scripts/explorer_picture.py SITE_DIR OUT.png
"""

from __future__ import annotations

import sys
from pathlib import Path

PAGE = "deepseek-v4-flash/n/model.layers.2.self_attn.o_b_proj.html"
CHROMIUM = "/usr/bin/chromium"


def main(site: str, out: str) -> int:
    from playwright.sync_api import sync_playwright

    page_file = Path(site) / PAGE
    if not page_file.is_file():
        print(f"{page_file} is missing: run `make site` first", file=sys.stderr)
        return 2
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800}, color_scheme="light")
            page.goto(page_file.resolve().as_uri())
            page.screenshot(path=out, full_page=False)
        finally:
            browser.close()
    size = Path(out).stat().st_size
    print(f"wrote {out} ({size:,} bytes){'; over 200 KB: do not commit it' if size > 200_000 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]) if len(sys.argv) == 3 else (print(__doc__, file=sys.stderr) or 2))

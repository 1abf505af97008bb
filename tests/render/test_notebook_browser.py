"""A result's notebook HTML (`_repr_html_`) in headless Chromium, inside pages themed as JupyterLab's light and dark
ones: axe-core finds no serious or critical violation, and the tree folds and unfolds with JavaScript off."""

from __future__ import annotations

from pathlib import Path

import pytest

import archviz
from browser_tools import serious_violations

pytestmark = pytest.mark.browser

TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100}
# a notebook output area's colours: JupyterLab's light theme, and its dark theme's --jp-layout-color0 / font color1
THEMES = {"light": "background:#fff;color:rgba(0,0,0,.87)", "dark": "background:#111;color:rgba(255,255,255,.87)"}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    html = archviz.inspect("hf:llama", overrides=TINY, depth=1)._repr_html_()
    out = tmp_path_factory.mktemp("notebook")
    made = {}
    for name, style in THEMES.items():
        made[name] = out / f"{name}.html"
        made[name].write_text(f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>cell output</title>'
                              f'</head><body style="{style}"><main>{html}</main></body></html>', encoding="utf-8")
    return made


def test_no_serious_accessibility_violations_in_either_theme(chromium, pages: dict[str, Path]) -> None:
    root = pages["light"].parent
    found = serious_violations(chromium, [pages["light"]], "light", root)
    found += serious_violations(chromium, [pages["dark"]], "dark", root)
    assert found == [], "\n".join(found)


def test_the_tree_folds_without_javascript(chromium, pages: dict[str, Path]) -> None:
    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(pages["dark"].as_uri())

        def node(title: str):  # the <details> whose own summary names `title`
            return page.locator(f"xpath=//details[summary[contains(., '{title}')]]").first

        q = page.locator(".leaf", has_text="q_proj").first
        assert not q.is_visible()  # below the open level: folded
        for title in ("model (LlamaModel)", "2 layers", "self_attn"):
            assert node(title).get_attribute("open") is None
            node(title).locator("xpath=./summary").click()
            assert node(title).get_attribute("open") is not None
        assert q.is_visible()
        node("model (LlamaModel)").locator("xpath=./summary").click()  # folds again
        assert not q.is_visible()
    finally:
        context.close()

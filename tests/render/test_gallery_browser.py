"""The gallery in a real headless Chromium from file://: the index sorts and filters, every row's explorer link opens
that model's overview, a compare page shows both models, the pages read with JavaScript off (axe-core:
test_gallery_a11y.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

_COLUMN = """(args) => {
  const [table, head] = args;
  const heads = [...document.querySelectorAll(`#${table} thead th`)].map(th => th.textContent.trim());
  const i = heads.indexOf(head);
  return [...document.querySelectorAll(`#${table} tbody tr`)].filter(r => !r.hidden)
    .map(r => [r.getAttribute("data-key"), r.cells[i].getAttribute("data-sort"), r.cells[i].textContent.trim()]);
}"""


@pytest.fixture(scope="module")
def browser(gallery_site, chromium):
    """The session's Chromium (conftest: one per run and xdist worker) and the gallery's folder."""
    return chromium, gallery_site.out


def _numbers(cells):
    return [None if s in (None, "") else float(s) for _, s, _ in cells]


def test_index_sorts_by_a_heading(browser):
    b, out = browser
    page = b.new_page()
    page.goto((out / "index.html").as_uri())
    before = page.evaluate(_COLUMN, ["gallery", "parameters"])
    assert len(before) == 5
    button = page.locator("#gallery thead th", has_text="parameters").first.locator("button.sort")
    button.click()
    asc = _numbers(page.evaluate(_COLUMN, ["gallery", "parameters"]))
    assert asc == sorted(asc) and len(set(asc)) == 5
    assert page.locator("#gallery thead th[aria-sort=ascending]").count() == 1
    button.click()
    assert _numbers(page.evaluate(_COLUMN, ["gallery", "parameters"])) == sorted(asc, reverse=True)
    # a column with blanks: the blanks stay last in both directions
    kv = page.locator("#gallery thead th", has_text="KV at 1M").first.locator("button.sort")
    for _ in range(2):
        kv.click()
        values = _numbers(page.evaluate(_COLUMN, ["gallery", "KV at 1M"]))
        filled = [v for v in values if v is not None]
        assert filled and values[:len(filled)] == filled and None in values
        assert filled in (sorted(filled), sorted(filled, reverse=True))
    # the sort is over rows: each model keeps its own figures
    by_key = {k: s for k, s, _ in before}
    assert {k: s for k, s, _ in page.evaluate(_COLUMN, ["gallery", "parameters"])} == by_key


def test_index_filters_as_one_types(browser):
    b, out = browser
    page = b.new_page()
    page.goto((out / "index.html").as_uri())
    attention = page.evaluate(_COLUMN, ["gallery", "attention"])
    want = sorted(k for k, _, text in attention if "sliding" in text)
    assert want == ["gemma2", "mistral"]
    page.fill("#gallery-q", "sliding")
    assert sorted(k for k, _, _ in page.evaluate(_COLUMN, ["gallery", "attention"])) == want
    assert page.locator("#gallery-shown").text_content() == "2 shown"
    page.fill("#gallery-q", "")
    assert len(page.evaluate(_COLUMN, ["gallery", "attention"])) == 5


def test_every_explorer_link_opens_its_model(browser):
    b, out = browser
    page = b.new_page()
    page.goto((out / "index.html").as_uri())
    links = page.eval_on_selector_all("#gallery a.explorer", "as => as.map(a => [a.textContent, a.href])")
    assert len(links) == 5
    for name, href in links:
        page.goto(href)
        assert page.evaluate("document.documentElement.getAttribute('data-page')") == "model", href
        assert name in page.locator("header.top a.model").text_content()
        # the explorer's way back is the gallery's index
        assert page.locator("header.top a.brand").get_attribute("href") == "../index.html"


def test_compare_pages_show_both_models(browser):
    b, out = browser
    page = b.new_page()
    page.goto((out / "index.html").as_uri())
    params = {k: text for k, _, text in page.evaluate(_COLUMN, ["gallery", "parameters"])}
    page.goto((out / "compare-llama--mistral.html").as_uri())
    row = page.locator('#compare tr[data-fig="parameters"]')
    assert row.locator(".cmp-a").text_content() == params["llama"].split()[0]
    assert row.locator(".cmp-b").text_content() == params["mistral"].split()[0]
    assert row.locator(".cmp-r").text_content().endswith("×")
    page.goto((out / "compare.html").as_uri() + "?a=gemma2&b=deepseek_v3")
    assert page.locator("#cmp-a-name").text_content() == "gemma2"
    assert page.locator("#cmp-b-name").text_content() == "deepseek_v3"
    row = page.locator('#compare tr[data-fig="parameters"]')
    assert row.locator(".cmp-a").text_content() == params["gemma2"].split()[0]
    assert row.locator(".cmp-b").text_content() == params["deepseek_v3"].split()[0]
    page.select_option("#cmp-b", "llama")
    assert row.locator(".cmp-b").text_content() == params["llama"].split()[0]


def test_pages_read_with_javascript_off(browser):
    b, out = browser
    ctx = b.new_context(java_script_enabled=False)
    page = ctx.new_page()
    page.goto((out / "index.html").as_uri())
    assert page.locator("#gallery tbody tr").count() == 5
    assert page.locator("#gallery button.sort").count() == 0  # what the script would add
    assert not page.locator("#gallery-q").is_visible()
    assert "2 layers" in page.locator('#gallery tr[data-key="llama"]').inner_text()
    page.goto((out / "compare-llama--mistral.html").as_uri())
    cells = page.locator('#compare tr[data-fig="parameters"] td')
    assert cells.count() == 3 and all(cells.nth(i).inner_text() for i in range(3))
    page.goto((out / "coverage.html").as_uri())
    assert "gemma4_assistant" in page.locator("#coverage").inner_text()
    ctx.close()


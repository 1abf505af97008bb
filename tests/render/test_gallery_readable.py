"""The small gallery (conftest's `gallery_site`) as a person reads it: no page scrolls sideways at 390×844, 768×1024
or 1280×800 and no figure breaks across lines; the diff page of two transformers types opens on its summary and is
under 4 screens tall at 1280×800; the compare page of a pair sets the two architectures side by side (figures from
transformers' own default configs and the gallery's --sets, read here); the coverage page counts every blank cell of
the index."""

from __future__ import annotations

import html
import re

import pytest
from browser_readable import WIDTHS, fits, measure
from gallery_small import SETS

pytestmark = pytest.mark.browser


def _pages(out):
    return {"index": out / "index.html", "compare": out / "compare-llama--deepseek_v3.html",
            "compare-any": out / "compare.html", "coverage": out / "coverage.html",
            "diff": out / "diff-llama--deepseek_v3.html", "llama-attention": out / "llama" / "n" /
            "model.layers.0-1.self_attn.html"}


def test_gallery_pages_fit_and_the_diff_opens_on_its_summary(gallery_site, chromium) -> None:
    bad, heights = {}, {}
    page = chromium.new_page()
    for w, h in WIDTHS:  # one page, resized
        page.set_viewport_size({"width": w, "height": h})
        for name, path in _pages(gallery_site.out).items():
            if not path.exists():
                path = next(path.parent.glob(path.name.replace("0-1", "*")))
            got = measure(page, path, f"gallery-{name}" if name in ("index", "compare", "diff") else None)
            heights[(name, w)] = got["height"]
            if not fits(got):
                bad[f"{name} at {w}"] = got
            if name == "diff":
                tops = page.evaluate("""() => ['diff-summary', 'diff-changes'].map(
                    id => document.getElementById(id).getBoundingClientRect().top + scrollY)""")
                assert tops[0] < min(tops[1], h), tops  # the summary first, on the first screen
    page.close()
    assert bad == {}
    assert heights[("diff", 1280)] < 4 * 800, heights


def _rows(page_html: str) -> dict[str, tuple[str, str]]:
    out = {}
    for key, a, b in re.findall(r'<tr data-fig="([^"]+)"><th scope="row">[^<]*</th><td class="num cmp-a"[^>]*>(.*?)'
                                r'</td><td class="num cmp-b"[^>]*>(.*?)</td>', page_html):
        out[key] = tuple(html.unescape(re.sub(r"<[^>]+>", "", x)).strip() for x in (a, b))
    return out


def test_compare_page_sets_the_architectures_side_by_side(gallery_site) -> None:
    from transformers import DeepseekV3Config, LlamaConfig

    llama = LlamaConfig(**SETS["llama"])
    v3 = DeepseekV3Config(**SETS["deepseek_v3"])
    rows = _rows((gallery_site.out / "compare-llama--deepseek_v3.html").read_text())
    want = {"hidden": (llama.hidden_size, v3.hidden_size), "heads": (llama.num_attention_heads,
                                                                     v3.num_attention_heads),
            "kv_heads": (llama.num_key_value_heads, v3.num_key_value_heads),
            "vocab": (llama.vocab_size, v3.vocab_size),
            "context": (llama.max_position_embeddings, v3.max_position_embeddings)}
    for key, (a, b) in want.items():
        assert rows[key][0].startswith(f"{a:,}") and rows[key][1].startswith(f"{b:,}"), (key, rows[key])
    assert rows["head_dim"][0].startswith(f"{llama.hidden_size // llama.num_attention_heads:,}")
    assert rows["head_dim"][1].startswith(f"{v3.qk_nope_head_dim + v3.qk_rope_head_dim:,}")  # MLA: query/key head
    assert rows["experts"][0].startswith("—") and rows["experts"][1].startswith(f"{v3.n_routed_experts:,}")
    assert rows["top_k"][1].startswith(f"{v3.num_experts_per_tok:,}")
    assert rows["layers"][0].startswith(f"{llama.num_hidden_layers}")
    for key in ("active", "kv_token", "decode_32k"):
        assert rows[key][0] != "—" and rows[key][1] != "—", key


def test_coverage_counts_every_blank_cell_of_the_index(gallery_site) -> None:
    index = (gallery_site.out / "index.html").read_text()
    body = index[index.index("<tbody>"):index.index("</tbody>")]
    blanks = sum(1 for cell in re.findall(r'<td class="num" data-sort="">(.*?)</td>', body) if cell.startswith("—"))
    coverage = (gallery_site.out / "coverage.html").read_text()
    assert re.search(rf'<span id="blank-count">{blanks}</span> blank cell', coverage), blanks
    per_model = [int(n) for n in re.findall(r'<td class="blanks"><span class="num">(\d+)</span>', coverage)]
    assert sum(per_model) == blanks
    # mistral keeps its 131,072 positions: its KV at 1M is given at its own limit, said in the cell, not blank
    mistral = re.search(r'<tr data-key="mistral">(.*?)</tr>', index, re.S).group(1)
    assert "at 131,072, its max positions" in mistral

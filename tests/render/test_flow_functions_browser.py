"""The dataflow pictures of real models' attention blocks and decoder layers in a real headless Chromium (issue 32
item 1): llama, deepseek_v3 and the default model (examples/deepseek-v4-flash, the `make site` model), each built
with few layers (the pictures of one layer are those of every layer of its kind). At most 25 boxes before
expansion, each picture on one 1280×800 screen, the rotary embedding one box named after its function with the def
line the source has, expanding it shows its ops, no two boxes overlap, and every box links (to a page that exists) or
expands (to an element of the page). Needs Debian's chromium and playwright-python (see tests/browser_tools.py)."""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path

import pytest

import archviz
from archviz.group import group
from archviz.render.site import build_site
from archviz.shapes import trace_shapes
from archviz.walk import walk
from browser_tools import Console, _boxes, _no_overlap

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
MODELS = {  # source, overrides, the transformers module whose rotary function the attention calls
    "llama": ("hf:llama", {"num_hidden_layers": 1}, "transformers.models.llama.modeling_llama"),
    "deepseek_v3": ("hf:deepseek_v3", {"num_hidden_layers": 2, "first_k_dense_replace": 1},
                    "transformers.models.deepseek_v3.modeling_deepseek_v3"),
    "default": (str(REPO / "examples" / "deepseek-v4-flash" / "config.json"), {"num_hidden_layers": 4},
                "transformers.models.deepseek_v4.modeling_deepseek_v4"),
}
MAX_BOXES = 25


@pytest.fixture(scope="module")
def browser(chromium):
    """The session's Chromium (conftest: one per run and xdist worker)."""
    return chromium


def _site(name: str, tmp: Path) -> Path:
    source, overrides, _ = MODELS[name]
    built = archviz.build(source, overrides=overrides)
    record = group(trace_shapes(built, walk(built)))
    build_site([record], str(tmp))
    return next(p for p in tmp.iterdir() if p.is_dir() and (p / "index.html").is_file() and p.name != "static")


def _pages(model: Path) -> dict[str, list[Path]]:
    """The attention and decoder-layer node pages: model.layers.<span>.self_attn.html, model.layers.<span>.html."""
    out: dict[str, list[Path]] = {"attention": [], "layer": []}
    for p in sorted((model / "n").glob("model.layers.*.html")):
        rest = p.name[len("model.layers."):-len(".html")].split(".")
        if len(rest) == 1:
            out["layer"].append(p)
        elif rest[1:] == ["self_attn"]:
            out["attention"].append(p)
    return out


def _rotary_line(module: str) -> tuple[str, dict[str, int]]:
    mod = importlib.import_module(module)
    lines = {}
    for name in ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave"):
        fn = getattr(mod, name, None)
        if fn is not None:
            lines[name] = inspect.getsourcelines(inspect.unwrap(fn))[1]
    return os.path.basename(mod.__file__), lines


@pytest.mark.parametrize("name", list(MODELS))
def test_attention_and_layer_pictures_fold_by_function(name, browser, tmp_path):
    model = _site(name, tmp_path)
    pages = _pages(model)
    assert pages["attention"] and pages["layer"], pages
    file, lines = _rotary_line(MODELS[name][2])
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    console = Console(page)
    for kind, paths in pages.items():
        for path in paths:
            page.goto(path.as_uri())
            boxes = _boxes(page)
            assert 3 <= len(boxes) <= MAX_BOXES, (path.name, len(boxes), [b["text"] for b in boxes])
            _no_overlap(boxes)
            # the picture fits on one 1280×800 screen before expansion, inside the page's column (no sideways scroll)
            fig = page.evaluate("""() => { const f = document.querySelector('figure.dataflow-fig');
                const r = f.querySelector('svg.dataflow').getBoundingClientRect();
                return {w: r.width, h: r.height, scroll: f.scrollWidth, client: f.clientWidth}; }""")
            assert fig["h"] <= 800 and fig["w"] <= 1280 and fig["scroll"] <= fig["client"], (path.name, fig)
            for b in boxes:  # every box links to a page that exists or to an element of this page
                assert b["href"], (path.name, b)
                if b["href"].startswith("#"):
                    assert page.evaluate("id => !!document.getElementById(id)", b["href"][1:]), (path.name, b)
                else:
                    assert Path(b["url"].removeprefix("file://").split("#")[0]).is_file(), (path.name, b)
            if kind != "attention":
                continue
            rotary = [b for b in boxes if b["kind"] == "fn" and b["text"].startswith("apply_rotary_pos_emb")]
            assert rotary, (path.name, [b["text"] for b in boxes])
            for b in rotary:
                fn = b["text"].split(" · ")[0]
                assert f"{fn} · {file}:{lines[fn]}" in b["text"], (b["text"], lines)
            # expanding it (following its link) opens the ops inside: as many op boxes as the box says
            box = rotary[0]
            n = int(box["text"].split(" · ")[2].split(" op")[0])
            assert n > 1
            page.click(f'svg.dataflow a[href="{box["href"]}"]')
            target = box["href"][1:]
            # the page opens it on the hashchange event, which fires after the click returns
            page.wait_for_function("id => document.getElementById(id).open", arg=target, timeout=5000)
            ops = page.evaluate("""id => [...document.getElementById(id).querySelectorAll('svg.dataflow-ops .box.op')]
                .map(b => b.querySelector('rect').getBoundingClientRect()).map(r => [r.width, r.height])""", target)
            assert len(ops) == n and all(w > 0 and h > 0 for w, h in ops), ops
    assert not console.errors, console.errors
    page.close()

"""The static explorer (`archviz build`): pages, determinism, atomicity, annotations, escaping, size and speed."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from archviz import format as fmt
from archviz.cli import app
from archviz.errors import ArchvizError
from archviz.records import (
    BIAS, WEIGHT, Call, CallSite, ModelRecord, ModuleRecord, SourceInfo, Summary, TensorRecord, Totals,
)
from archviz.render.site import (
    MARKER, Node, build_nodes, build_site, compress_paths, expand_pattern, render_site, squarify, treemap,
)
from archviz.render.site.nodes import page_names
from helpers import REPO, xss_site

ROOT = REPO
ANN = ROOT / "tests" / "data" / "annotations"
FIXTURE = ROOT / "tests" / "fixtures" / "dsv41like"
runner = CliRunner()


def cli(*args: str) -> object:
    return runner.invoke(app, list(args), catch_exceptions=False)


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def tiny_record(**kw):
    import archviz

    sys.path.insert(0, str(ANN))
    try:
        return archviz.load("tiny_model:build", **kw)
    finally:
        sys.path.remove(str(ANN))


@pytest.fixture(scope="module")
def tiny():
    from archviz.group import group

    return group(tiny_record())


@pytest.fixture(scope="module")
def tiny_raw():
    return tiny_record()


# ---------------------------------------------------------------------------------------------------------------------
# Pure pieces


@pytest.mark.parametrize("paths", [
    ["layers.0.w", "layers.1.w", "layers.2.w", "layers.4.w"],
    [f"layers.{i}.experts.{e}.w1" for i in range(3) for e in range(5)],
    ["a.0.b.1", "a.0.b.2", "a.1.b.1"],  # not a product: split
    ["embed", "head", "layers.3.attn", "layers.7.attn", "x.y"],
    [f"layers.{i}.attn" for i in range(3, 42, 2)] + ["layers.0.attn", "layers.1.attn", "layers.50.attn"],
    [""],
])
def test_compress_paths_is_exact(paths):
    pats = compress_paths(paths)
    expanded = [p for pat in pats for p in expand_pattern(pat)]
    assert sorted(expanded) == sorted(paths)
    assert len(pats) <= len(paths)


def test_compress_paths_names_a_product_in_one_pattern():
    paths = [f"layers.{i}.ffn.experts.{e}.w1" for i in range(40) for e in range(384)]
    assert compress_paths(paths) == ["layers.{0-39}.ffn.experts.{0-383}.w1"]
    assert compress_paths(["layers.0.a", "layers.1.a", "layers.2.a", "layers.5.a"]) == ["layers.{0-2,5}.a"]


def test_every_other_layer_reads_as_a_progression():
    """Interleaved models (DeepSeek-V4: compressed and sparse attention alternate) group every other layer; the
    pattern says so in a few characters, and the page name stays short and readable (no hash)."""
    odd = [f"model.layers.{i}.self_attn.compressor.indexer.kv_proj" for i in range(3, 42, 2)]
    assert compress_paths(odd) == ["model.layers.{3,5,…,41}.self_attn.compressor.indexer.kv_proj"]
    assert compress_paths([f"l.{i}.a" for i in (0, 2, 4, 6)]) == ["l.{0,2,4,6}.a"]  # short runs stay a list
    assert fmt.parse_ranges("0-1,3,5,…,11,20") == [0, 1, 3, 5, 7, 9, 11, 20]
    assert fmt.ranges_text(range(3, 42, 2)) == "3, 5, …, 41" and fmt.ranges_text([0, 1, 2, 5]) == "0–2, 5"
    for bad in ("3,…,9", "3,5,…", "3,5,…,10", "0-2,4,…,8"):
        with pytest.raises(ValueError):
            fmt.parse_ranges(bad)
    nodes = {"root": Node("root", None, ["x"], "m", "model", "M", "", [], 0, [], 0, 0),
             "x": Node("x", "root", [], "kv_proj", "linear", "Linear", odd[0], odd, 20, [], 1, 20)}
    page_names(nodes, "root")
    assert nodes["x"].file == "n/model.layers.3_5_to_41.self_attn.compressor.indexer.kv_proj.html"


@given(st.sets(st.integers(0, 200), min_size=1, max_size=60))
def test_ranges_read_back(values):
    assert fmt.parse_ranges(fmt.ranges(values)) == sorted(values)


def test_squarify_fills_the_box_in_proportion():
    values = [500, 300, 120, 50, 20, 10]
    boxes = squarify(values, 0, 0, 960, 540)
    total = sum(values)
    for v, (x, y, w, h) in zip(values, boxes):
        assert w * h == pytest.approx(960 * 540 * v / total, rel=1e-6)
        assert -1e-6 <= x and x + w <= 960 + 1e-6 and -1e-6 <= y and y + h <= 540 + 1e-6
    assert boxes == squarify(values, 0, 0, 960, 540)


def test_fallback_tree_folds_identical_list_items(tiny_raw):
    nodes, root = build_nodes(tiny_raw)
    assert tiny_raw.extra("grouping") is None
    layers = [n for n in nodes.values() if n.class_name == "Block"]
    assert len(layers) == 1, "the four identical blocks are one node"
    block = layers[0]
    assert block.paths == [f"layers.{i}" for i in range(4)]
    assert block.multiplicity == [{"factor": 4, "name": "layers"}]
    down = next(n for n in nodes.values() if n.representative == "layers.0.down")
    assert down.total == 24 * 16 * 4 and down.per_instance == 24 * 16
    page_names(nodes, root)
    files = [n.file for n in nodes.values()]
    assert len(set(files)) == len(files)
    assert nodes[root].file == "index.html"
    assert "n/layers.0-3.down.html" in files


def test_treemap_is_deterministic_and_covers_the_model(tiny):
    nodes, root = build_nodes(tiny)
    a, b = treemap(nodes, root), treemap(nodes, root)
    assert a == b
    top = [r for r in a if r["depth"] == 0]
    assert sum(r["total"] for r in top) == tiny.summary.parameters
    assert sum(float(r["w"]) * float(r["h"]) for r in top) == pytest.approx(960 * 540, rel=1e-3)


def test_treemap_reaches_the_routed_experts_of_grouped_layers():
    """The treemap answers where the parameters are: in a V4-style model whose layers group twice (layers ›
    groups of 2 › kind › MoE block), it goes down to the routed experts, and their box is their share of the model
    -- derived here from the config -- less the frames around it."""
    import archviz
    import transformers

    sets = {"num_hidden_layers": 16, "hidden_size": 64, "vocab_size": 256, "num_attention_heads": 4,
            "head_dim": 32, "q_lora_rank": 32, "o_lora_rank": 16, "o_groups": 2, "moe_intermediate_size": 32,
            "n_routed_experts": 8, "num_experts_per_tok": 2, "index_n_heads": 2, "index_head_dim": 16,
            "qk_rope_head_dim": 8}
    rec = archviz.load("hf:deepseek_v4", overrides=sets)
    cfg = transformers.AutoConfig.for_model("deepseek_v4", **sets)
    nodes, root = build_nodes(rec)
    rects = treemap(nodes, root)
    experts = [r for r in rects if nodes[r["node"]].class_name.endswith("Experts") and not r["own"]]
    assert experts, sorted({nodes[r["node"]].title for r in rects})
    # gate_up [E, 2I, H] and down [E, H, I] per MoE layer, in every layer
    routed = cfg.num_hidden_layers * cfg.n_routed_experts * 3 * cfg.moe_intermediate_size * cfg.hidden_size
    share = sum(float(r["w"]) * float(r["h"]) for r in experts) / (960 * 540)
    assert 0.6 * routed / rec.summary.parameters < share <= routed / rec.summary.parameters


def test_layer_map_of_interleaved_layers_names_each_kind_with_its_own_count(tmp_path):
    """Layers that alternate kinds fold into a periodic group (groups of 2 layers, one of each kind). The overview's
    layer map must still link each layer to its own kind's page and say that kind's count: the counts here are
    torch's numel over each layer of the same model built by hand, without archviz."""
    import archviz
    import torch
    import transformers
    from archviz.group import group
    from archviz.render.site import build_site

    sets = {"num_hidden_layers": 12, "hidden_size": 64, "vocab_size": 256, "num_attention_heads": 4,
            "head_dim": 32, "q_lora_rank": 32, "o_lora_rank": 16, "o_groups": 2, "moe_intermediate_size": 32,
            "n_routed_experts": 8, "num_experts_per_tok": 2, "index_n_heads": 2, "index_head_dim": 16,
            "qk_rope_head_dim": 8}
    rec = group(archviz.load("hf:deepseek_v4", overrides=sets))
    cfg = transformers.AutoConfig.for_model("deepseek_v4", **sets)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    per_layer = [sum(p.numel() for p in layer.parameters()) for layer in model.model.layers]
    assert len(set(per_layer[3::2]) | set(per_layer[4::2])) == 2  # the two alternating kinds differ in size

    build_site([rec], str(tmp_path / "site"))
    model_dir = next(p for p in (tmp_path / "site").iterdir() if p.is_dir() and (p / "index.html").exists())
    overview = (model_dir / "index.html").read_text()
    section = overview[overview.index('id="layers"'):overview.index("</section>", overview.index('id="layers"'))]
    cells = re.findall(r'<a role="listitem" class="cell" style="--h:(\d+)" href="([^"]+)" title="[^"]*">(\d+)</a>',
                       section)
    assert [int(n) for _, _, n in cells] == list(range(cfg.num_hidden_layers))
    legend = {hue: (href, int(layers), int(count.replace(",", "")))
              for hue, href, layers, count in re.findall(
                  r'--h:(\d+)"></span><a href="([^"]+)">[^<]*</a> <span class="cls">[^<]*</span> · (\d+) layers? · '
                  r'([\d,]+) parameters each', section)}
    assert len(legend) >= 3
    for hue, href, n in cells:
        _, layers, count = legend[hue]
        assert count == per_layer[int(n)], (n, count, per_layer[int(n)])
        # the layer opens a page of its own kind (not the page of the group of two kinds around it)
        page_html = (model_dir / href).read_text()
        assert text_of(page_html, "per-instance").replace(",", "") == str(per_layer[int(n)]), (n, href)
    for hue, (_, layers, _) in legend.items():
        assert layers == sum(1 for h, _, _ in cells if h == hue)


# ---------------------------------------------------------------------------------------------------------------------
# Pages


def page(folder: Path, model: str, pattern: str) -> str:
    hits = [p for p in (folder / model / "n").glob("*.html") if re.fullmatch(pattern, p.stem)]
    assert len(hits) == 1, (pattern, sorted(p.stem for p in (folder / model / "n").glob("*.html")))
    return hits[0].read_text()


def text_of(html: str, ident: str) -> str:
    m = re.search(rf'id="{ident}"[^>]*>(.*?)</', html, re.S)
    assert m, ident
    return re.sub(r"<[^>]+>", "", m.group(1)).strip()


def test_node_page_shows_counts_code_and_links(tiny, tmp_path):
    out = tmp_path / "site"
    res = build_site([tiny], str(out))
    assert res.pages == len(list(out.rglob("*.html")))
    assert (out / MARKER).is_file() and (out / "index.html").is_file() and (out / "search.js").is_file()
    html = page(out, "build", r"layers\.0-3\.down")
    assert text_of(html, "per-instance") == "384"  # 24 × 16, no bias
    assert "× 4 layers" in html and text_of(html, "total") == "1,536"
    assert "24 × 16 = 384" in html.replace("16 × 24", "24 × 16") or "16 × 24 = 384" in html
    assert "This projection has no bias parameter." in html
    assert "[out, in] = [16 dim, 24 hidden]" in html  # named as `nn.Linear(hidden, dim)` built it
    # the owner's code: Block.__init__ (built) and Block.forward (called), highlighted into the page itself
    assert 'data-start="7"' in html and "where down is built" in html and "where down is called" in html
    assert re.search(r'data-marks="14"', html) and re.search(r'data-marks="18"', html)
    assert text_of(html, "callsite-line") == "18"
    assert re.search(r'<tr class="mark" id="L14"><td class="ln">14</td>', html)
    assert re.search(r'<tr class="mark" id="L18"><td class="ln">18</td><td class="src">.*self\.down', 
                     re.sub(r"<span[^>]*>|</span>", "", html))
    assert '<span class="bp">self</span>' in html and not (out / "code").exists()
    # the bias-carrying sibling
    up = page(out, "build", r"layers\.0-3\.up")
    assert text_of(up, "per-instance") == f"{16 * 24 + 24:,}"
    assert "no bias" not in up
    # the overview
    ov = (out / "build" / "index.html").read_text()
    assert text_of(ov, "total-parameters") == f"{tiny.summary.parameters:,}"
    assert 'class="layermap"' in ov and ov.count('class="cell"') == 4
    assert "<svg" in ov and ov.count("<rect") >= 3
    # the search index knows every node and its raw paths, compressed
    search = (out / "search.js").read_text()
    data = json.loads(search[len("window.ARCHVIZ_SEARCH="):].rstrip().rstrip(";"))
    assert any("layers.{0-3}.down" in n[5] for n in data["nodes"])


def test_extras_light_up_checkpoint_and_probe(tiny, tmp_path):
    ck = {"source": "tiny.safetensors", "verdict": "mismatch",
          "modules": {f"layers.{i}.down": {"verdict": "match", "model": 384, "checkpoint": 384, "notes": []}
                      for i in range(4)},
          "summary": {"tensors": 17, "matched": 16}}
    ck["modules"]["layers.2.up"] = {"verdict": "mismatch", "model": 408, "checkpoint": 400,
                                    "notes": ["weight [24, 16] vs [24, 15]"]}
    for i in (0, 1, 3):
        ck["modules"][f"layers.{i}.up"] = {"verdict": "match", "model": 408, "checkpoint": 408, "notes": []}
    probe = {"modules": {f"layers.{i}.down": {"confirmed": True} for i in range(4)}}
    rec = tiny.with_extra("checkpoint", ck).with_extra("probe", probe)
    out = tmp_path / "site"
    build_site([rec], str(out))
    down = page(out, "build", r"layers\.0-3\.down")
    assert "the model total matches the checkpoint’s tensors" in down
    assert "shape confirmed by execution" in down
    up = page(out, "build", r"layers\.0-3\.up")
    assert "mismatch: the model holds 1,632 parameters, the checkpoint 1,624 (+8)" in up
    assert "weight [24, 16] vs [24, 15]" in up and "shape confirmed" not in up
    ov = (out / "build" / "index.html").read_text()
    assert "tiny.safetensors" in ov and 'class="verdict mismatch"' in ov
    # without the extras, nothing about them
    plain = tmp_path / "plain"
    build_site([tiny], str(plain))
    assert "checkpoint" not in page(plain, "build", r"layers\.0-3\.down").lower()


def test_shapes_render_with_named_dims(tiny, tmp_path):
    import dataclasses

    mods = []
    for m in tiny.modules:
        if m.path.endswith(".down"):
            m = dataclasses.replace(m, calls=(Call((("B", "T", 24),), (("B", "T", 16),)),),
                                    call_sites=(CallSite("tiny_model.py", 18, "self.down(torch.relu(h))"),),
                                    called=True)
        mods.append(m)
    rec = dataclasses.replace(tiny, modules=tuple(mods),
                              source=dataclasses.replace(tiny.source, config=(("hidden", 24), ("dim", 16))))
    out = tmp_path / "site"
    build_site([rec], str(out))
    html = page(out, "build", r"layers\.0-3\.down")
    assert text_of(html, "shape-in") == "[B batch, T positions, 24 hidden]"
    assert text_of(html, "shape-out") == "[B batch, T positions, 16 dim]"
    assert "self.down(torch.relu(h))" in html and "no traced forward pass" not in html
    assert "Map the 24 (hidden) input features to the model width (16)." in html


# ---------------------------------------------------------------------------------------------------------------------
# Annotations


def test_annotations_render_as_direct_evidence(tiny, tmp_path):
    out = tmp_path / "site"
    build_site([tiny], str(out), annotations=str(ANN / "tiny.toml"))
    html = page(out, "build", r"layers\.0-3\.down")
    assert text_of(html, "title") == "Down projection"
    assert "Map the <code>hidden</code> features back to the model width." in html
    assert html.count("Direct evidence") == 2 and "block-forward" in html and "block-init" in html
    assert 'data-marks="18"' in html and 'data-marks="14"' in html  # the quoted lines are marked
    ov = (out / "build" / "index.html").read_text()
    assert "The whole tiny model." in ov
    # the layer page's breadcrumb and parts use the annotated title too
    block = page(out, "build", r"layers\.0-3")
    assert "Down projection" in block


def _moved_model(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    text = (ANN / "tiny_model.py").read_text()
    (folder / "tiny_model_moved.py").write_text("# two new lines\n# push the code down\n" + text)
    return folder


def test_stale_claim_fails_the_build_naming_it(tmp_path):
    import archviz

    folder = _moved_model(tmp_path, "moved")
    sys.path.insert(0, str(folder))
    try:
        rec = archviz.load("tiny_model_moved:build")
    finally:
        sys.path.remove(str(folder))
    ann = tmp_path / "ann.toml"
    ann.write_text((ANN / "tiny.toml").read_text().replace('"tiny_model.py"', '"tiny_model_moved.py"'))
    out = tmp_path / "site"
    with pytest.raises(ArchvizError) as e:
        build_site([rec], str(out), annotations=str(ann))
    line = e.value.line()
    assert "'block-forward'" in line and "no longer inside the cited lines" in line
    assert "now at line 20" in line and "\n" not in line
    assert not out.exists()


def test_cli_stale_claim_is_one_line_exit_2(tmp_path, monkeypatch, archviz_cli):
    folder = _moved_model(tmp_path, "moved_cli")
    ann = tmp_path / "ann.toml"
    ann.write_text((ANN / "tiny.toml").read_text().replace('"tiny_model.py"', '"tiny_model_moved.py"'))
    monkeypatch.syspath_prepend(str(folder))
    r = archviz_cli("build", "tiny_model_moved:build", "-o", tmp_path / "site", "--annotations", ann, "--no-shapes")
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "block-forward" in lines[0], r.stderr


@pytest.mark.parametrize("toml, message", [
    ('[[node]]\npath = "nothing.here"\ntitle = "x"\n', 'path = "nothing.here"'),
    ('[[node]]\npath = "layers.*.down"\n[[node.claim]]\nid = "c1"\nfile = "nope.py"\nlines = [1, 2]\n'
     'quote = "x"\n', "no source file 'nope.py'"),
    ('[[node]]\npath = "layers.*.down"\ncolour = "red"\n', "unknown key 'colour'"),
    ('[[node]]\npath = "layers.*.down"\n[[node.claim]]\nid = "c2"\nfile = "tiny_model.py"\nlines = [90, 95]\n'
     'quote = "x"\n', "the file has only"),
    ('not toml at all = = =', "not valid TOML"),
])
def test_bad_annotations_are_one_line_errors(tiny, tmp_path, toml, message):
    ann = tmp_path / "bad.toml"
    ann.write_text(toml)
    with pytest.raises(ArchvizError) as e:
        build_site([tiny], str(tmp_path / "site"), annotations=str(ann))
    assert message in e.value.line()


# ---------------------------------------------------------------------------------------------------------------------
# Escaping


def test_payloads_in_names_docstrings_and_annotations_are_inert(tmp_path, monkeypatch, archviz_cli):
    out = xss_site(tmp_path, monkeypatch, archviz_cli)
    files = tree_bytes(out)
    pages = {k: v.decode() for k, v in files.items() if k.endswith((".html", ".js"))}
    assert len(pages) > 3
    for name, text in pages.items():
        assert "<script>alert" not in text, name
        assert "<img src=x" not in text, name
        if name.endswith(".html"):
            assert re.findall(r"<script(?![^>]*\bsrc=)", text) == [], name  # no inline scripts at all
    joined = "".join(pages.values())
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in joined  # shown, escaped
    assert "&lt;script&gt;alert(5)&lt;/script&gt;" in joined
    assert "&#34;&gt;&lt;img src=x onerror=alert(6)&gt;" in joined or "&quot;&gt;&lt;img" in joined
    search = pages["search.js"]
    assert "<" not in search and "\\u003cscript>alert(3)" in search


# ---------------------------------------------------------------------------------------------------------------------
# Determinism and atomicity


def test_two_builds_are_byte_identical(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        r = cli("build", str(FIXTURE / "model.py"), "-o", str(out), "--json")
        assert r.exit_code == 0, r.output
        info = json.loads(r.stdout)
        assert info["output"] == str(out) and info["pages"] > 20
        assert info["bytes"] == sum(len(v) for v in tree_bytes(out).values())
    ta, tb = tree_bytes(a), tree_bytes(b)
    assert ta.keys() == tb.keys()
    assert [k for k in ta if ta[k] != tb[k]] == []
    assert str(tmp_path) not in "".join(v.decode("utf-8", "replace") for v in ta.values()), "no absolute paths"


def test_failed_render_leaves_the_previous_site(tiny, tmp_path, monkeypatch):
    out = tmp_path / "site"
    build_site([tiny], str(out))
    before = tree_bytes(out)
    import archviz.render.site as site
    import archviz.files.outputs as site_write  # where write_site (outputs.write_folder) writes each file

    calls = {"n": 0}
    real = site.ModelSite.node_context

    def boom(self, nid):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("injected failure while rendering")
        return real(self, nid)

    monkeypatch.setattr(site.ModelSite, "node_context", boom)
    with pytest.raises(RuntimeError, match="injected"):
        build_site([tiny], str(out), annotations=str(ANN / "tiny.toml"))
    assert tree_bytes(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["site"], "no temp folders left"
    # a failure while writing files (after rendering) is no different
    monkeypatch.setattr(site.ModelSite, "node_context", real)
    real_write = site_write._write_member
    n = {"n": 0}

    def write_then_fail(folder, rel, data):
        n["n"] += 1
        if n["n"] == 5:
            raise OSError(28, "No space left on device")
        real_write(folder, rel, data)

    monkeypatch.setattr(site_write, "_write_member", write_then_fail)
    with pytest.raises(ArchvizError, match="no space left on the device"):
        build_site([tiny], str(out), annotations=str(ANN / "tiny.toml"))
    assert tree_bytes(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["site"]


KILLED_BUILD = textwrap.dedent('''
    import sys, time
    sys.path.insert(0, {ann!r})
    import archviz, archviz.render.site as site, archviz.files.outputs as site_write
    from archviz.group import group
    rec = group(archviz.load("tiny_model:build"))
    real = site_write._write_member
    def slow(folder, rel, data):
        real(folder, rel, data)
        print("writing", flush=True)
        time.sleep(30)
    site_write._write_member = slow
    site.build_site([rec], {out!r}, annotations={toml!r})
''')


def test_killed_build_leaves_the_previous_site(tiny, tmp_path):
    out = tmp_path / "site"
    build_site([tiny], str(out))
    before = tree_bytes(out)
    script = KILLED_BUILD.format(ann=str(ANN), out=str(out), toml=str(ANN / "tiny.toml"))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(300, proc.kill)  # never hang the suite on a stuck child
    watchdog.start()
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "writing", proc.stderr.read() if proc.stderr else ""
        temps = [p for p in tmp_path.iterdir() if p.name.startswith(".site.archviz-tmp-")]
        assert temps and any(f.is_file() for f in temps[0].rglob("*")), "it had started writing"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert tree_bytes(out) == before
    # the next build replaces the site and sweeps the dead build's temp folder
    build_site([tiny], str(out), annotations=str(ANN / "tiny.toml"))
    assert "Down projection" in page(out, "build", r"layers\.0-3\.down")
    assert [p.name for p in tmp_path.iterdir()] == ["site"]


def test_refuses_to_replace_a_folder_that_is_not_a_site(tiny, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    with pytest.raises(ArchvizError, match="not an archviz site"):
        build_site([tiny], str(out))
    assert (out / "notes.txt").read_text() == "precious"


# ---------------------------------------------------------------------------------------------------------------------
# Upstream links


def test_source_url_template_and_git_remote(tiny, tmp_path):
    out = tmp_path / "site"
    build_site([tiny], str(out), source_url="https://example.org/o/r/blob/abc123/{path}#L{start}-L{end}")
    html = page(out, "build", r"layers\.0-3\.down")
    assert 'href="https://example.org/o/r/blob/abc123/tiny_model.py#L7-L14"' in html
    assert "Pinned revision abc123" in html
    # torch's own files link to pytorch at the installed release
    import torch

    assert f"https://github.com/pytorch/pytorch/blob/v{torch.__version__.split('+')[0]}/torch/nn/modules/linear.py#L" \
        in html
    with pytest.raises(ArchvizError, match="no \\{path\\}"):
        build_site([tiny], str(out), source_url="https://example.org/x")

    # a git checkout with a remote: the lines at the checked-out commit
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(ANN / "tiny_model.py", repo / "tiny_model_git.py")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    subprocess.run(git + ["remote", "add", "origin", "git@github.com:someone/tiny.git"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    import archviz

    sys.path.insert(0, str(repo))
    try:
        rec = archviz.load("tiny_model_git:build")
    finally:
        sys.path.remove(str(repo))
    build_site([rec], str(tmp_path / "git-site"))
    html = page(tmp_path / "git-site", "build", r"layers\.0-3\.down")
    assert f'href="https://github.com/someone/tiny/blob/{commit}/tiny_model_git.py#L7-L14"' in html
    # an edited file is not what the commit holds: no pinned link
    (repo / "tiny_model_git.py").write_text((repo / "tiny_model_git.py").read_text() + "\n# edited\n")
    build_site([rec], str(tmp_path / "git-site"))
    assert "github.com/someone" not in page(tmp_path / "git-site", "build", r"layers\.0-3\.down")


def test_dtypes_are_said_once_per_dtype(tmp_path):
    """gpt-oss experts hold four tensors of one dtype: one sentence names them all, not four sentences."""
    r = cli("build", "hf:gpt_oss", "--set", "num_hidden_layers=1", "--set", "hidden_size=32", "--set",
            "intermediate_size=16", "--set", "num_local_experts=4", "--set", "num_attention_heads=4", "--set",
            "num_key_value_heads=2", "--set", "head_dim=8", "--set", "vocab_size=64", "--no-shapes",
            "-o", str(tmp_path / "site"))
    assert r.exit_code == 0, r.output
    page = next((tmp_path / "site" / "gpt_oss" / "n").glob("*mlp.experts.html")).read_text()
    text = " ".join(re.sub(r"<[^>]+>", "", page).split())
    said = re.findall(r"([^.]*) (?:is|are) stored as", text)
    assert len(said) == 1 and said[0].endswith("gate_up_proj, gate_up_proj_bias, down_proj and down_proj_bias"), said


def test_transformers_links_pin_the_installed_version(tmp_path):
    transformers = pytest.importorskip("transformers")
    r = cli("build", "hf:llama", "--set", "num_hidden_layers=2", "--set", "hidden_size=32", "--set",
            "intermediate_size=64", "--set", "num_attention_heads=4", "--set", "num_key_value_heads=2", "--set",
            "vocab_size=64", "--no-shapes", "-o", str(tmp_path / "site"))
    assert r.exit_code == 0, r.output
    html = "".join(p.read_text() for p in (tmp_path / "site" / "llama" / "n").glob("*.html"))
    want = (f"https://github.com/huggingface/transformers/blob/v{transformers.__version__}/src/"
            "transformers/models/llama/modeling_llama.py#L")
    assert want in html


# ---------------------------------------------------------------------------------------------------------------------
# CLI


def test_cli_several_sources_make_one_site_with_records_files(tmp_path, monkeypatch, archviz_cli):
    rec = tmp_path / "tiny.json"
    monkeypatch.syspath_prepend(str(ANN))
    r = archviz_cli("walk", "tiny_model:build", "-o", rec)
    assert r.returncode == 0, r.stderr
    r = cli("build", str(FIXTURE / "model.py"), str(rec), "-o", str(tmp_path / "site"), "--no-shapes", "--json")
    assert r.exit_code == 0, r.output
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="dsv41like/index.html"' in index and 'href="build/index.html"' in index
    search = (tmp_path / "site" / "search.js").read_text()
    assert '"dsv41like"' in search and '"build"' in search


def test_cli_names_passthrough(tmp_path):
    names = tmp_path / "names.toml"
    names.write_text('"layers.*.attn.wo_b" = "Output projection"\n')
    r = cli("build", str(FIXTURE / "model.py"), "-o", str(tmp_path / "site"), "--no-shapes", "--names", str(names))
    assert r.exit_code == 0, r.output
    pages = list((tmp_path / "site" / "dsv41like" / "n").glob("layers.*wo_b*.html"))
    titles = [text_of(p.read_text(), "title") for p in pages]
    assert titles and set(titles) == {"Output projection"}
    # the Code heading names the file once, then the spans where wo_b is built (from the class line, whose docstring
    # the excerpt shows, to the end of __init__) and called (forward), found here with ast
    import ast

    tree = ast.parse((FIXTURE / "model.py").read_text())
    attn = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Attention")
    spans = {f.name: (f.lineno, f.end_lineno) for f in attn.body if isinstance(f, ast.FunctionDef)}
    heading = " ".join(re.sub(r"<[^>]+>", " ", re.search(r"<h2>Code .*?</h2>", pages[0].read_text()).group(0)).split())
    (a, b), (c, d) = (attn.lineno, spans["__init__"][1]), spans["forward"]
    assert heading == f"Code model.py {a}–{b}, {c}–{d}", heading


def test_cli_usage_errors_are_one_line(tmp_path, archviz_cli):
    r = archviz_cli("build", FIXTURE / "model.py", "-o", tmp_path / "s", "--no-shapes", "--source-url",
                    "https://example.org/nothing")
    assert r.returncode == 2
    assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) == 1 and "{path}" in r.stderr
    import archviz.checkpoint as ck

    if not hasattr(ck, "compare"):
        r = cli("build", str(FIXTURE / "model.py"), "-o", str(tmp_path / "s"), "--no-shapes", "--checkpoint",
                "x.safetensors")
        assert r.exit_code == 2


# ---------------------------------------------------------------------------------------------------------------------
# Size and speed: a model of ~60,000 modules


def big_record(layers: int = 40, experts: int = 480) -> ModelRecord:
    """A V4-sized tree made directly as records (no torch): 40 layers × (attention + 480 experts × 3 linears)."""
    mods: list[ModuleRecord] = []

    def lin(path: str, i: int, o: int, bias: bool = False) -> ModuleRecord:
        ts = [TensorRecord("weight", WEIGHT, (o, i), "bfloat16", o * i, o * i, 2 * o * i)]
        if bias:
            ts.append(TensorRecord("bias", BIAS, (o,), "float32", o, o, 4 * o))
        p = sum(t.elements for t in ts)
        t = Totals(parameters=p, bytes=sum(x.bytes for x in ts))
        return ModuleRecord(path, "Linear", "torch.nn.modules.linear", (), tuple(ts), t, t,
                            attributes=(("in_features", i), ("out_features", o)))

    def parent(path: str, cls: str, kids: list[ModuleRecord]) -> ModuleRecord:
        t = Totals()
        direct = [k for k in kids if k.parent == path]
        for k in direct:
            t = t + k.totals
        return ModuleRecord(path, cls, "model", tuple(k.path for k in direct), (), t, Totals())

    layer_recs: list[list[ModuleRecord]] = []
    for li in range(layers):
        p = f"layers.{li}"
        attn_kids = [lin(f"{p}.attn.{n}", 512, 512) for n in ("wq", "wk", "wv", "wo")]
        attn = parent(f"{p}.attn", "Attention", attn_kids)
        exp_all: list[ModuleRecord] = []
        exp_tops = []
        for e in range(experts):
            ws = [lin(f"{p}.ffn.experts.{e}.{n}", 512, 256) for n in ("w1", "w2", "w3")]
            top = parent(f"{p}.ffn.experts.{e}", "Expert", ws)
            exp_tops.append(top)
            exp_all += [top] + ws
        elist = parent(f"{p}.ffn.experts", "ModuleList", exp_tops)
        gate = lin(f"{p}.ffn.gate", 512, experts, bias=li % 4 == 0)
        ffn = parent(f"{p}.ffn", "MoE", [gate, elist])
        block = parent(p, "Block", [attn, ffn])
        layer_recs.append([block, attn] + attn_kids + [ffn, gate, elist] + exp_all)
    blocks = [lr[0] for lr in layer_recs]
    llist = parent("layers", "ModuleList", blocks)
    embed = lin("embed", 512, 1000)
    head = lin("head", 512, 1000)
    root = parent("", "Transformer", [embed, llist, head])
    mods = [root, embed, llist] + [m for lr in layer_recs for m in lr] + [head]
    s = root.totals
    summary = Summary(parameters=s.parameters, active_parameters=None, scale_elements=0, table_elements=0,
                      buffer_elements=0, persistent_buffer_elements=0, bytes=s.bytes, bytes_by_dtype=(),
                      parameters_by_dtype=(), modules=len(mods))
    return ModelRecord(SourceInfo(spec="big", kind="factory", name="big", model_class="model.Transformer"),
                       tuple(mods), summary)


def _calc_rows_add_up(rec: ModelRecord) -> int:
    from archviz.render.site import CodeBank, ModelSite

    ms = ModelSite(rec, "m", CodeBank(), None, None)
    checked = 0
    for nid, n in ms.nodes.items():
        m = ms.index.get(n.representative) or rec.modules[0]
        rows, _ = ms.calculation(n, m)
        total = int(rows[-1]["params"].replace(",", ""))
        parts = sum(int(r["params"].replace(",", "")) for r in rows[:-1] if r["params"] not in ("—", ""))
        assert parts == total == n.per_instance, (n.title, rows)
        checked += 1
    return checked


def test_calculation_tables_add_up(tiny, tiny_raw):
    from archviz.group import group

    rec = big_record(layers=8, experts=6)
    for r in (tiny, tiny_raw, rec, group(rec)):
        assert _calc_rows_add_up(r) > 3
    g = group(rec).extra("grouping")
    assert any(n.get("virtual") for n in g["nodes"]), "the gate bias every 4th layer makes repeating groups"


def test_sixty_thousand_modules_render_small_and_fast(tmp_path):
    rec = big_record()
    assert rec.summary.modules >= 60_000
    try:
        from archviz.group import group
    except ImportError:
        group = None
    for r in ([group(rec)] if group else []) + [rec]:  # grouped, and the fallback tree
        t = time.perf_counter()
        files = render_site([r])
        took = time.perf_counter() - t
        size = sum(len(v) for v in files.values())
        pages = sum(1 for k in files if k.endswith(".html"))
        assert size <= 30 * 2**20, size
        assert pages < 200, pages  # one page per node, not per module
        assert took <= 10, took
        search = files["search.js"].decode()
        assert "layers.{0-39}.ffn.experts.{0-479}.w1" in search or "experts.{0-479}.w1" in search
    out = tmp_path / "big"
    res = build_site([rec], str(out))
    assert res.bytes <= 30 * 2**20

"""`archviz gallery` run again on its own output: a model's explorer pages are rendered again only when what
determines them changed (its code, hence its records; the templates), and a page of the previous output is used only
if it holds the bytes the previous run wrote (render/site/gallery_reuse.py). Two tiny factory models, each in a
module of its own written here; every run in-process with --jobs 1."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from typer.testing import CliRunner

MODEL = '''
from torch import nn

WIDTH = {width}


def {name}():
    return nn.Sequential(nn.Embedding(16, 8), nn.Linear(8, WIDTH))
'''


def _params(width: int) -> int:
    return 16 * 8 + 8 * width + width  # the embedding, the linear layer's weight and bias


def _write(folder: Path, module: str, width: int) -> None:
    (folder / f"{module}.py").write_text(MODEL.format(width=width, name=module[-1]))
    sys.modules.pop(module, None)  # in-process: the next build imports the file as it now is


def _run(out: Path) -> dict:
    from archviz.cli import app

    r = CliRunner().invoke(app, ["gallery", "mod_a:a", "mod_b:b", "--jobs", "1", "--json", "-o", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _model_files(files: dict[str, bytes], slug: str) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if k.startswith(slug + "/")}


def test_pages_are_rendered_again_only_where_their_inputs_changed(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(code))
    monkeypatch.syspath_prepend(str(code))
    _write(code, "mod_a", 16)
    _write(code, "mod_b", 16)
    out = tmp_path / "site"

    first = _run(out)
    assert (first["rendered"], first["reused"]) == (2, 0)
    before = _files(out)
    slug_a, slug_b = json.loads(before[".archviz-site"])["models"]
    assert _model_files(before, slug_a) and _model_files(before, slug_b)

    # nothing changed: no page rendered, every byte as it was
    again = _run(out)
    assert (again["rendered"], again["reused"]) == (0, 2)
    assert _files(out) == before

    # mod_b's code changed: its records, so its pages and its index row; mod_a's pages are kept
    _write(code, "mod_b", 32)
    changed = _run(out)
    assert (changed["rendered"], changed["reused"]) == (1, 1)
    after = _files(out)
    assert _model_files(after, slug_a) == _model_files(before, slug_a)
    assert _model_files(after, slug_b) != _model_files(before, slug_b)
    index = after["index.html"].decode()
    assert f'data-sort="{_params(32)}"' in index and f'data-sort="{_params(16)}"' in index

    # a template changed: every model's pages are rendered again, through it
    templates = tmp_path / "templates"
    from archviz.render.site.templates import templates_folder

    shutil.copytree(templates_folder(), templates)
    base = templates / "base.html"
    base.write_text(base.read_text().replace("</body>", "<!-- edited template --></body>"))
    monkeypatch.setenv("ARCHVIZ_TEMPLATES", str(templates))
    edited = _run(out)
    assert (edited["rendered"], edited["reused"]) == (2, 0)
    after = _files(out)
    for slug in (slug_a, slug_b):
        assert b"<!-- edited template -->" in after[f"{slug}/index.html"]


def test_a_page_changed_in_the_previous_output_is_not_served(tmp_path, monkeypatch):
    """Someone rewrites a page of mod_a and the site's marker with it (so the folder passes as archviz's): the
    gallery does not take that page from the folder, since its bytes are not those the previous run wrote; it renders
    mod_a again, and the page is archviz's once more."""
    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(code))
    monkeypatch.syspath_prepend(str(code))
    _write(code, "mod_a", 16)
    _write(code, "mod_b", 16)
    out = tmp_path / "site"
    _run(out)
    written = _files(out)
    slug_a = json.loads(written[".archviz-site"])["models"][0]
    page = out / slug_a / "index.html"
    page.write_bytes(page.read_bytes().replace(b"</body>", b"<script>alert(1)</script></body>"))
    marker = json.loads((out / ".archviz-site").read_bytes())
    marker["files"][f"{slug_a}/index.html"] = hashlib.sha256(page.read_bytes()).hexdigest()
    (out / ".archviz-site").write_text(json.dumps(marker))

    result = _run(out)
    assert (result["rendered"], result["reused"]) == (1, 1)
    assert _files(out) == written

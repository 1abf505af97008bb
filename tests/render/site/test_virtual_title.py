"""An annotation aimed at one module (wo_b) titles that module's page, not the virtual node gathering it with wo_a."""
import re

import archviz
from archviz.group import group, load_names
from archviz.render.site import build_site
from helpers import TESTS

ROOT = TESTS
FIX = ROOT / "fixtures" / "dsv41like"


def _crumbs(html: str) -> list[str]:
    nav = html[html.index('id="crumbs"'):]
    nav = nav[:nav.index("</nav>")]
    return re.findall(r">([^<>]+)</a>", nav)


def test_virtual_node_keeps_its_title_when_a_member_is_annotated(tmp_path):
    ann = tmp_path / "notes.toml"
    ann.write_text('[[node]]\npath = "layers.*.attn.wo_b"\ntitle = "The output projection"\n')
    record = group(archviz.load(str(FIX / "model.py"), config=str(FIX / "config.json")),
                   names=load_names(str(ROOT / "fixtures" / "names" / "deepseek-v4.1-flash.toml")))
    out = tmp_path / "site"
    build_site([record], str(out), annotations=str(ann))
    pages = list(out.rglob("layers.*.attn.wo_b.html"))
    assert pages, "no output-projection page"
    html = pages[0].read_text()
    assert re.search(r'<h1 id="title">The output projection</h1>', html)
    # the names file gathers wo_a and wo_b under "Grouped output": the crumb above the page says so
    assert _crumbs(html)[-1] == "Grouped output"

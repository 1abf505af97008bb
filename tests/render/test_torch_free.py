"""Renderers are pure functions of records: importing them (and rendering) must not pull torch in."""
import subprocess
import sys

CODE = """
import sys
import archviz, archviz.sources, archviz.checkpoint  # the front door, the build's options, the checkpoint headers
assert archviz.sources.BuildOptions and "torch" not in sys.modules, "import archviz imported torch"
import archviz.records, archviz.render.views, archviz.group, archviz.render.site, archviz.render.terminal, archviz.render.grouped
import archviz.render.results, archviz.render.notebook
from archviz.records import loads
assert "torch" not in sys.modules, "a renderer imported torch"
print("ok")
"""


def test_renderers_do_not_import_torch():
    p = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr

"""The layout reads as the pipeline: one package per stage, dependencies pointing one way, no file doing five jobs.

Read from the source with `ast` (nothing imported), so a new import that points backwards fails here by name.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "archviz"

# The pipeline, in order: a module may import from its own stage or any stage before it, never after.
STAGES = ["vocabulary", "sources", "walk", "shapes", "group", "cost", "checkpoint", "diff", "probe", "pipeline", "render", "cli"]
VOCABULARY = {"_moved", "outputs", "paths", "safeio", "safejson", "sanitize", "records", "compactfile", "recordcheck", "errors", "format", "dims", "gcpause", "cache",
              "input_specs"}
MAX_LINES = 700


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _stage(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in VOCABULARY):
        return "vocabulary"
    return parts[1]


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported archviz module, line, at module level) for every import in the file, lazy ones included."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    typing_only = {id(x) for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
                   for x in ast.walk(n)}  # `if TYPE_CHECKING:` imports never run
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("archviz"):
                continue
            names = [target + "." + a.name for a in node.names]
            for full in names:  # `from . import hf` imports the module archviz.sources.hf
                sub = ROOT / Path(*full.split("."))
                if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file():
                    out.append((full, node.lineno, id(node) in top))
                    break
            else:
                out.append((target, node.lineno, id(node) in top))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("archviz"):
                    out.append((a.name, node.lineno, id(node) in top))
    return out


FILES = sorted(PKG.rglob("*.py"))


def test_stages_depend_one_way():
    """archviz/__init__.py, the front door (`archviz.load`, `archviz.build`, `__version__`), is left out both ways:
    its imports of the stages are made inside its functions, so importing it pulls no stage in."""
    wrong = []
    for path in FILES:
        if path == PKG / "__init__.py":
            continue
        me = _stage(_module_name(path))
        for target, line, _ in _imports(path):
            if target == "archviz":
                continue
            them = _stage(target)
            if STAGES.index(them) > STAGES.index(me):
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({me}) imports {target} ({them})")
    assert wrong == []


def test_no_import_circles():
    """No cycle among the modules, counting the imports made inside functions too."""
    graph: dict[str, set[str]] = {}
    for path in FILES:
        me = _module_name(path)
        graph.setdefault(me, set())
        for target, _, _ in _imports(path):
            if target == "archviz" or target == me:
                continue
            if target.startswith(me + "."):
                continue  # a package's __init__ re-exporting its own modules
            graph[me].add(target)
    # a package's __init__ is imported before any of its modules: an edge to a module implies one to its packages
    for me in list(graph):
        for t in list(graph[me]):
            parts = t.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if parent != me and not me.startswith(parent + "."):
                    graph[me].add(parent)
    seen: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(n: str) -> None:
        seen[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if seen.get(m) == 1:
                cycles.append(" -> ".join(stack[stack.index(m):] + [m]))
            elif m not in seen:
                visit(m)
        stack.pop()
        seen[n] = 2

    for n in sorted(graph):
        if n not in seen:
            visit(n)
    assert cycles == []


def test_no_file_passes_700_lines_without_a_reason():
    long = []
    for path in FILES:
        lines = path.read_text().count("\n")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > MAX_LINES and "Why one file" not in doc:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert long == []


def test_every_module_says_its_job():
    missing = [str(p.relative_to(ROOT)) for p in FILES if p.name != "__main__.py"
               and not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert missing == []


OLD_PATHS = {
    "archviz.kernels": "archviz.shapes.kernels",
    "archviz.grouping": "archviz.group.tree",
    "archviz.layers": "archviz.group.layers",
    "archviz.meta": "archviz.sources.meta",
    "archviz.stubs": "archviz.sources.stubs",
    "archviz.source_hf": "archviz.sources.hf",
    "archviz.source_reference": "archviz.sources.reference",
    "archviz.reduce": "archviz.probe.reduce",
    "archviz.views": "archviz.render.views",
    "archviz.site": "archviz.render.site",
    "archviz.annotations": "archviz.render.site.annotations",
    "archviz.cli_check": "archviz.cli.check",
    "archviz.cli_probe": "archviz.cli.probe",
    "archviz.cli_site": "archviz.cli.site",
}


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_old_import_paths_are_the_moved_modules(old):
    """A user's `import archviz.kernels` (a --kernel-rules file) or `from archviz.grouping import group` still works,
    and gives the very module object, so registries such as the shape rules are shared."""
    assert importlib.import_module(old) is importlib.import_module(OLD_PATHS[old])


def test_public_api_is_where_it_was():
    import archviz
    from archviz.kernels import shape_rule
    from archviz.records import ModelRecord, dumps, loads  # noqa: F401

    assert callable(archviz.load) and callable(archviz.build) and callable(shape_rule)
    assert archviz.kernels.shape_rule is shape_rule  # attribute access, without importing archviz.kernels first
    # the package's own submodules never shadow the public functions of the same stage
    import archviz.sources  # noqa: F401
    import archviz.walk  # noqa: F401

    assert callable(archviz.build) and archviz.build.__module__ == "archviz"


def test_python_m_archviz_cli_is_the_console_script():
    p = subprocess.run([sys.executable, "-m", "archviz.cli", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    for command in ("summary", "inspect", "walk", "build", "check", "manifest", "probe", "diff", "cost"):
        assert f" {command} " in p.stdout

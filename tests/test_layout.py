"""The layout reads as the pipeline: one package per stage, dependencies pointing one way, no file doing five jobs.

Read from the source with `ast` (nothing imported), so a new import that points backwards fails here by name.
"""

from __future__ import annotations

import ast
import functools
import importlib
import subprocess
import sys
from pathlib import Path



ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "archviz"

# The pipeline, in order: a module may import from its own stage or any stage before it, never after.
STAGES = ["vocabulary", "sources", "walk", "shapes", "group", "cost", "checkpoint", "diff", "probe", "render", "pipeline", "cli"]
# The vocabulary every stage may use: root modules and the packages of shared concerns (the records, the safe files,
# the processes archviz starts).
VOCABULARY = {"errors", "format", "gcpause", "input_specs", "paths", "records", "files", "processes"}
# A root module that is another stage's module under a public name: `archviz.kernels` re-exports
# `archviz.shapes.kernels`' public names.
PUBLIC_ALIASES = {"archviz.kernels": "shapes"}
MAX_ROOT_MODULES = 8
MAX_LINES = 700


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _stage(module: str) -> str:
    if module in PUBLIC_ALIASES:
        return PUBLIC_ALIASES[module]
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in VOCABULARY:
        return "vocabulary"
    return parts[1]


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once per run: every rule reads the same files, and none writes them."""
    return ast.parse(path.read_text())


@functools.cache
def _imports(path: Path, module: str | None = None) -> list[tuple[str, int, bool]]:
    """(imported archviz module, line, at module level) for every import in the file, lazy ones and those under
    `if TYPE_CHECKING:` included; `module` is the file's module name (default: from its place under archviz/)."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = _tree(path)
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):  # `if TYPE_CHECKING:` imports included: a circle for the type checker is one too
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


def test_imports_under_type_checking_count(tmp_path):
    """An import made only for the type checker is still an edge: two modules that name each other's types form a
    circle a reader has to untangle, whether or not it runs."""
    f = tmp_path / "fake.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..records import ModuleRecord\n"
                 "def f():\n    from .tree import group\n")
    assert _imports(f, "archviz.group.fake") == [("archviz.records", 3, False), ("archviz.group.tree", 5, False)]


def test_root_holds_at_most_8_modules():
    """The root is the front door and the vocabulary every stage shares; a module one stage uses lives in that stage,
    and a concern of several modules is a package (records/, files/)."""
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    users: dict[str, set[str]] = {}
    for path in FILES:
        for target, _, _ in _imports(path):
            if target.count(".") == 1:
                users.setdefault(target, set()).add(_stage(_module_name(path)))
    shared = {f"archviz.{p[:-3]}" for p in root} - {"archviz.__init__", *PUBLIC_ALIASES}
    one_stage = {m: sorted(users.get(m, ())) for m in shared if len(users.get(m, ()) - {"vocabulary"}) < 2}
    assert one_stage == {}  # used by one stage only (or none): it belongs in that stage


def test_no_file_passes_700_lines_without_a_reason():
    long = []
    for path in FILES:
        lines = path.read_text().count("\n")
        doc = ast.get_docstring(_tree(path)) or ""
        if lines > MAX_LINES and "Why one file" not in doc:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert long == []


def test_every_module_says_its_job():
    missing = [str(p.relative_to(ROOT)) for p in FILES if p.name != "__main__.py"
               and not (ast.get_docstring(_tree(p)) or "").strip()]
    assert missing == []


def test_public_api_is_where_it_was():
    import archviz
    from archviz.kernels import shape_rule
    from archviz.records import ModelRecord, dumps, loads  # noqa: F401

    assert callable(archviz.load) and callable(archviz.build) and callable(shape_rule)
    assert archviz.kernels.shape_rule is shape_rule
    assert archviz.__getattr__("kernels") is sys.modules["archviz.kernels"]  # `import archviz` alone reaches it too
    # the public names are the pass's own: a rule registered through archviz.kernels is the one the pass looks up
    from archviz.shapes import kernels

    try:
        rule = archviz.kernels.shape_rule("layout_test_pkg.op")(lambda x: x)
        assert kernels.lookup("layout_test_pkg.op") == (rule, "layout_test_pkg.op")
    finally:
        kernels._RULES.pop("layout_test_pkg.op", None)
    # what the records name as archviz.kernels.<name> (a DeepSeek kernel's torch implementation) is there
    assert all(kernels.lookup(f"kernel.{n}")[1] == f"archviz.kernels.{n}" and callable(getattr(archviz.kernels, n))
               for n in kernels._GENERIC)
    from archviz.checkpoint import compare
    from archviz.checkpoint.compare import EXTRA_KEY  # noqa: F401

    assert compare.__module__ == "archviz.checkpoint.compare"  # the function, as the package exports it
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


MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8
LONG_REASON = "Long because:"  # a docstring line starting so states why a function stays over MAX_FUNCTION_LINES


def _functions():
    for path in FILES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node


def _decorator_names(node) -> set[str]:
    """The names a function's decorators end in: `@app.command("build")` gives "command", `@shape_rule(...)`
    "shape_rule"."""
    names = set()
    for d in node.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        names.add(d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", ""))
    return names


def _long_functions() -> list[str]:
    out = []
    for path, node in _functions():
        lines = node.end_lineno - node.lineno + 1
        doc = ast.get_docstring(node) or ""
        if lines > MAX_FUNCTION_LINES and not any(l.strip().startswith(LONG_REASON) for l in doc.splitlines()):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def _wide_functions() -> list[str]:
    out = []
    for path, node in _functions():
        a = node.args
        params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
        decorators = _decorator_names(node)
        if "command" in decorators and PKG / "cli" in path.parents:
            continue  # a typer command: its parameters are the command line's options
        if "shape_rule" in decorators:
            continue  # a kernel's shape rule takes the kernel's own signature (shapes/kernel_packages.py)
        if len(params) > MAX_PARAMETERS:
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({len(params)} parameters)")
    return out


def test_no_function_passes_80_lines_without_a_reason():
    """A function a reader takes in at once: over 80 lines (decorators excluded, docstring included) it is split
    into helpers whose names say their job, or its docstring holds a line starting "Long because:"."""
    assert _long_functions() == []


def test_no_signature_passes_8_parameters():
    """Over 8 parameters (self/cls, *args and **kwargs not counted), the related ones travel as a small frozen
    dataclass. Exempt: typer commands in archviz/cli/ (`@app.command`: one parameter per option) and the kernel
    shape rules registered with `@shape_rule` (they mirror a CUDA package's signature)."""
    assert _wide_functions() == []


def test_size_rules_see_a_long_and_a_wide_function(tmp_path, monkeypatch):
    """The two rules find what they are for, and honour their exemptions."""
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    f = tmp_path / "archviz" / "cli" / "fake.py"
    f.parent.mkdir(parents=True)
    f.write_text(f'def long():\n{body}\n\n\ndef reasoned():\n    """Long because: a flat table."""\n{body}\n\n\n'
                 "def wide(a, b, c, d, e, f, g, h, i, *args, **kw):\n    pass\n\n\n"
                 "def narrow(self, a, b, c, d, e, f, g, h, *args, **kw):\n    pass\n\n\n"
                 "@app.command('x')\ndef command(a, b, c, d, e, f, g, h, i):\n    pass\n\n\n"
                 "@shape_rule('k.f')\ndef rule(a, b, c, d, e, f, g, h, i):\n    pass\n")
    monkeypatch.setattr(sys.modules[__name__], "FILES", [f])
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "archviz")
    assert _long_functions() == ["archviz/cli/fake.py:1 long (86 lines)"]
    assert _wide_functions() == ["archviz/cli/fake.py:178 wide (9 parameters)"]


# archviz/cli/ is a thin shell over the library: a command parses its options, calls one library function, prints.
# What would mean work done in the terminal layer: starting processes or threads, archviz's process machinery beyond
# the exit a signal maps to and the cap an option is checked against, building rich tables (archviz/render/ does),
# and a helper long enough to hold a job of its own.
CLI_BANNED_MODULES = {"subprocess", "multiprocessing", "concurrent", "rich.table"}
CLI_BANNED_CALLS = {("os", "fork"), ("os", "forkpty"), ("os", "posix_spawn"), ("threading", "Thread")}
CLI_PROCESS_NAMES = {"Signalled", "check_count"}  # archviz.processes names a command may use
CLI_MAX_HELPER_LINES = 50  # a function of cli/ that is not a typer command (those: one parameter per option)


def _cli_shell_breaches(files, root: Path = ROOT) -> list[str]:
    out = []
    for path in files:
        rel = path.relative_to(root)
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                out += [f"{rel}:{node.lineno} imports {a.name}" for a in node.names
                        if any(a.name == m or a.name.startswith(m + ".") for m in CLI_BANNED_MODULES)]
            elif isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if any(module == m or module.startswith(m + ".") for m in CLI_BANNED_MODULES):
                    out.append(f"{rel}:{node.lineno} imports {module}")
                elif node.level == 1 and any(a.name.startswith("_") for a in node.names):
                    out += [f"{rel}:{node.lineno} imports {a.name} from the command module {module}"
                            for a in node.names if a.name.startswith("_")]
                elif ".processes" in f".{module}" and (node.level or module.startswith("archviz.")):
                    out += [f"{rel}:{node.lineno} imports {a.name} from {module}" for a in node.names
                            if a.name not in CLI_PROCESS_NAMES]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    (node.value.id, node.attr) in CLI_BANNED_CALLS:
                out.append(f"{rel}:{node.lineno} uses {node.value.id}.{node.attr}")
            elif isinstance(node, ast.Name) and node.id == "Table":
                out.append(f"{rel}:{node.lineno} builds a rich Table")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    not _decorator_names(node) & {"command", "callback"}:
                lines = node.end_lineno - node.lineno + 1
                if lines > CLI_MAX_HELPER_LINES:
                    out.append(f"{rel}:{node.lineno} {node.name} ({lines} lines: a job for the library)")
    return out


def test_the_cli_is_a_thin_shell():
    """No module of archviz/cli/ starts processes or threads, uses archviz.processes beyond `Signalled` and
    `check_count`, builds a rich Table, imports another command module's private names, or holds a helper over 50
    lines: orchestration lives in the pipeline, tables in render/. (On the tree before issue 43 item 3 this named
    cli/gallery.py's subprocess and process owner and its import of site._compare, gallery_work.py's os.fork, the
    Tables of check.py and probe.py, and gallery.py's 57-line _run.)"""
    assert _cli_shell_breaches(sorted((PKG / "cli").glob("*.py"))) == []


def test_the_thin_shell_rule_sees_each_breach(tmp_path):
    f = tmp_path / "fake.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(50))
    f.write_text("import subprocess\nfrom concurrent.futures import ProcessPoolExecutor\n"
                 "from ..processes.owner import owned, Signalled\nfrom rich.table import Table\n"
                 "from .site import _compare, build\n"
                 "import os\n\n\ndef fork():\n    return os.fork(), Table()\n\n\n"
                 f"def helper():\n{body}\n\n\n@app.command()\ndef command():\n{body}\n")
    found = sorted(line.split(" ", 1)[1] for line in _cli_shell_breaches([f], tmp_path))
    assert found == ["builds a rich Table", "helper (51 lines: a job for the library)",
                     "imports _compare from the command module site", "imports concurrent.futures",
                     "imports owned from processes.owner", "imports rich.table", "imports subprocess", "uses os.fork"]

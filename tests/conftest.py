"""Shared fixtures: the real `archviz` command line run in-process (typer's CliRunner), what is built once per run
(a site, one Chromium), and the settings that keep the suite deterministic when pytest-xdist runs it on several
workers."""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pytest
from hypothesis import settings

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FACTORIES = TESTS / "data" / "factories"

# The records cache (records/cache.py) lives in $XDG_CACHE_HOME/archviz: never the real home's while tests run. A
# session-wide folder from the start (for anything that copies os.environ early), and each test its own (below).
os.environ["XDG_CACHE_HOME"] = _SESSION_CACHE = tempfile.mkdtemp(prefix="archviz-test-cache-")
atexit.register(shutil.rmtree, _SESSION_CACHE, True)

# The CLI's consoles read COLUMNS once, when archviz.cli is imported, if it is set: pytest-xdist's workers set it to
# 80, and the in-process runner below gives each command the 200 columns a subprocess gets.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

# Property tests draw the same examples on every run and every xdist worker, and share no example database (a
# folder in the checkout that parallel workers would write at once): a failure in CI is a bug, never a new draw.
settings.register_profile("archviz", derandomize=True, database=None)
settings.load_profile("archviz")


@pytest.fixture(autouse=True)
def _own_records_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with an empty records cache of its own, in-process and in the commands it runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture(autouse=True)
def _no_process_group_left() -> Iterator[None]:
    """A command run in-process may start the one-process gloo group archviz gives code that insists on one (it lasts
    for the life of a command's process): ended after each test, so the next test's process is as a fresh one."""
    yield
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _universal_newlines(data: bytes) -> str:
    """Bytes as `subprocess.run(..., text=True)` reads them: UTF-8, \\r\\n and \\r read as \\n."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


class Cli:
    """The `archviz` command line, in-process: `archviz.cli.app`'s `_run` (what `main` runs, but for the process
    exit) under typer's CliRunner, answered as a `subprocess.CompletedProcess` (return code, stdout, stderr), so a
    test reads it as it reads a process; `env` is the environment a subprocess of the same command gets (a fixed-width
    console, tests/data/factories importable). A test of what only a real process shows (its exit path, file
    descriptors, imports, signals, the environment it starts with) runs `python -m archviz.cli` itself."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env.pop("FORCE_COLOR", None)
        env["COLUMNS"] = "200"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FACTORIES), env.get("PYTHONPATH", "")) if p)
        self.env = env

    def __call__(self, *args: object, columns: int = 200) -> subprocess.CompletedProcess:
        """`archviz ARGS` with COLUMNS=`columns` (the width its tables are laid out for)."""
        return _in_process([str(a) for a in args], columns)

    def many(self, cases: Mapping[str, Sequence[object]]) -> dict[str, subprocess.CompletedProcess]:
        """Several independent commands, one after another (a process has one stdout)."""
        return {name: self(*args) for name, args in cases.items()}


# Python's warning filters in a process started without -W or -X dev (pytest's own filters show every warning).
_PYTHON_FILTERS = (("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
                   ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""),
                   ("ignore", ResourceWarning, ""))


def _in_process(argv: list[str], columns: int = 200) -> subprocess.CompletedProcess:
    """`archviz ARGV` in this process, as `python -m archviz.cli` runs it from the repository root: COLUMNS=200, no
    FORCE_COLOR, the factories and the checkout importable, Python's default warning filters, transformers' log kept
    to errors unless --debug, and no shape rule a `--kernel-rules` file registered left behind; the exit code as
    `main` computes it, an uncaught exception as its traceback on stderr and code 1."""
    from typer.testing import CliRunner

    import transformers.utils.logging as hf_logging
    import typer._click.utils as click_utils
    from archviz.shapes import kernels

    cli_app = importlib.import_module("archviz.cli.app")  # the module (the package exports its `app`)

    saved = (list(sys.argv), list(sys.path), os.getcwd(), hf_logging.get_verbosity())
    detect = click_utils._detect_program_name  # `python -m pytest` under pytest: usage lines name `archviz`
    rules = {name: dict(v) for name, v in vars(kernels).items()  # its registries: _RULES, _FLOPS, ...
             if isinstance(v, dict) and name.lstrip("_").isupper()}
    runner = CliRunner()
    stdout = stderr = b""
    with runner.isolation(env={"COLUMNS": str(columns), "FORCE_COLOR": None}) as streams, warnings.catch_warnings():
        warnings.resetwarnings()
        for action, category, module in _PYTHON_FILTERS:
            warnings.filterwarnings(action, category=category, module=module, append=True)
        sys.argv = ["archviz", *argv]
        sys.path[:0] = [str(FACTORIES), str(REPO)]
        os.chdir(REPO)
        click_utils._detect_program_name = lambda *a, **k: "archviz"
        if "--debug" not in argv:
            hf_logging.set_verbosity_error()
        try:
            code: object = cli_app._run()
        except SystemExit as e:
            code = e.code
        except Exception:
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            sys.argv, sys.path[:], cwd, verbosity = saved
            os.chdir(cwd)
            click_utils._detect_program_name = detect
            for name, registry in rules.items():
                getattr(kernels, name).clear()
                getattr(kernels, name).update(registry)
            hf_logging.set_verbosity(verbosity)
            sys.stdout.flush()
            sys.stderr.flush()
            stdout, stderr = streams[0].getvalue(), streams[1].getvalue()
    if isinstance(code, str):  # sys.exit("message"), as the interpreter ends with it
        stderr += code.encode() + b"\n"
        code = 1
    code = 0 if code is None else code if isinstance(code, int) else 1
    return subprocess.CompletedProcess(["archviz", *argv], code % 256, _universal_newlines(stdout),
                                       _universal_newlines(stderr))


@pytest.fixture(scope="session")
def toplevel_sites(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toplevel fixture's site with its names in `site/`, and the diff page of its two configs in `diff/`: built
    once per run (per xdist worker) for the browser and accessibility tests, which only read them."""
    top = TESTS / "fixtures" / "toplevel"
    out = tmp_path_factory.mktemp("toplevel-sites")
    r = _in_process(["build", str(top / "model.py"), "--names", str(top / "names.toml"), "-o", str(out / "site")])
    assert r.returncode == 0, r.stderr
    r = _in_process(["diff", str(top / "model.py"), str(top / "model.py"), "--config-a", str(top / "config.json"),
                     "--config-b", str(top / "config_text.json"), "--site", str(out / "diff")])
    assert r.returncode in (0, 1), r.stderr
    return out


def make_site_command(out: Path) -> list[str]:
    """The Makefile's `site` recipe, its `$(BIN)/archviz` run as this interpreter's archviz and its output in `out`."""
    import re
    import shlex

    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    recipe = re.search(r"^site:.*\n\t(.+)$", text, re.M)
    assert recipe, "the Makefile has no site target"
    args = shlex.split(recipe.group(1))
    assert args[0] == "$(BIN)/archviz" and args[1] == "build", args
    at = args.index("-o")
    args[at + 1] = str(out)
    return [sys.executable, "-m", "archviz.cli", *args[1:]]


@pytest.fixture(scope="session")
def default_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site `make site` builds (the Makefile's recipe, run as a process), once per run: its model's folder."""
    import time

    out = tmp_path_factory.mktemp("default-site") / "site"
    cmd = make_site_command(out)
    assert "--annotations" in cmd and "examples/deepseek-v4-flash/annotations.toml" in cmd
    t = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - t
    assert r.returncode == 0, r.stderr
    print(f"default site built in {took:.1f} s")  # ~6–9 s on two shared cores
    assert took < 60, f"the default site took {took:.0f} s to build"
    return out / "deepseek-v4-flash"


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the whole run (one per xdist worker); each test opens its own pages in it.

    Skipped without Chromium or playwright outside CI, failed in CI (browser_tools' `_need_browser`)."""
    from browser_tools import CHROMIUM, CHROMIUM_ARGS, _need_browser

    sync_playwright = _need_browser()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def archviz_cli() -> Cli:
    """The command line in-process: what a test of a command's output, files and exit code uses."""
    return Cli()


# Session fixtures that several files share: under `make test` (pytest-xdist, --dist loadfile) every file that names
# one runs on the same worker (FileGroups below), so it is built once in the run, not once a worker.
_SHARED_SESSION_FIXTURES = ("gallery_site", "toplevel_sites", "default_site")
# The files (or groups) that took longest in a run of the whole suite, handed out first, longest first, so that none
# starts last and leaves the other worker idle; then the files with `slow` tests, then the rest. Ranked by CPU
# seconds (pytest -n 0, a directory at a time, the test process and the processes it waited for; Chromium's share
# of the three site groups estimated): ~90, ~60, ~45, 28, 21, then 13 down to 8.
_LONGEST_FIRST = ("default_site", "gallery_site", "toplevel_sites", "cli/test_ci_integrations.py",
                  "probe/test_tensor_parallel.py", "shapes/test_trace.py", "adversarial/test_adv_special_files.py",
                  "records/test_types.py", "processes/test_processes_owner.py",
                  "adversarial/test_records_outputs_exits.py", "probe/test_run.py", "render/site/test_pages.py",
                  "checkpoint/test_checkpoint_fuzz.py", "records/test_cache.py", "adversarial/test_adv_bounds.py",
                  "cli/test_model.py", "test_wheel.py", "walk/test_tensors_reference.py",
                  "adversarial/test_adv_trust_edges.py", "checkpoint/test_manifest_fast_path.py")
_GROUPS: dict[Path, str] = {}


def _group(path: Path) -> str:
    """The file's group: the first shared session fixture its text names, else the file itself."""
    if path not in _GROUPS:
        text = path.read_text(encoding="utf-8") if path.suffix == ".py" else ""
        _GROUPS[path] = next((name for name in _SHARED_SESSION_FIXTURES if name in text),
                             path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else str(path))
    return _GROUPS[path]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest groups first (each worker collects, and the scheduler hands out groups in this order: FileGroups
    turns xdist's reordering off)."""
    slow = {_group(item.path) for item in items if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        group = _group(item.path)
        if group in _LONGEST_FIRST:
            return _LONGEST_FIRST.index(group)
        return len(_LONGEST_FIRST) + (group not in slow)

    items.sort(key=rank)  # stable: collection order within each rank


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadfile, but the files of one group (those naming a shared session fixture) one unit of work."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(REPO / nodeid.split("::", 1)[0])

    # in the order of the collection (pytest_collection_modifyitems's): xdist's default (--loadscope-reorder) hands
    # out the units with the most tests first, which put the default site's 14 tests 33rd of ~150 units
    config.option.loadscopereorder = False
    return FileGroups(config, log)

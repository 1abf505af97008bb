"""Per-rank checkpoints (issue 34): `archviz check SOURCE --world-size 2 --checkpoint DIR` compares each rank's
shard (`model{rank}-mp{N}.safetensors`, as DeepSeek's convert.py writes, or `--rank-pattern`) with the records of that
rank. The shards are real safetensors files written here from the fixture's own sharding rules, applied in the test
to the unsharded model's tensors: column-parallel outputs, row-parallel inputs and embedding rows split N ways (block
scales with them), routed experts partitioned, everything else whole."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from archviz.cli import app
from archviz.sources import BuildOptions
from archviz.sources.dispatch import build

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "dsv3like"
MODEL = str(FIX / "model.py")
CONFIG = json.loads((FIX / "config.json").read_text())
N = 2


def _rank_tensors(rank: int, n: int) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """name -> (shape, dtype) of rank `rank`'s shard, from the unsharded model (its own code, world size 1) cut by
    the fixture's rules."""
    model = build(MODEL, BuildOptions()).model
    bs = CONFIG["block_size"]
    experts = CONFIG["n_routed_experts"]
    out: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
    for mpath, module in model.named_modules():
        cls = type(module).__name__
        parts = mpath.split(".")
        if "experts" in parts[:-1]:  # routed experts: rank r holds experts [r E/n, (r+1) E/n)
            i = int(parts[parts.index("experts") + 1])
            if not rank * experts // n <= i < (rank + 1) * experts // n:
                continue
        for name, p in module.named_parameters(recurse=False):
            shape = list(p.shape)
            if name == "weight" and cls in ("ColumnParallelLinear", "ParallelEmbedding"):
                shape[0] //= n
            elif name == "weight" and cls == "RowParallelLinear":
                shape[1] //= n
            elif name == "scale" and cls in ("ColumnParallelLinear", "RowParallelLinear"):
                o, i = module.weight.shape
                o, i = (o // n, i) if cls == "ColumnParallelLinear" else (o, i // n)
                shape = [math.ceil(o / bs), math.ceil(i / bs)]
            out[f"{mpath}.{name}" if mpath else name] = (tuple(shape), p.dtype)
    return out


def _write(folder: Path, shards: list[dict[str, tuple[tuple[int, ...], torch.dtype]]], name: str) -> None:
    folder.mkdir(exist_ok=True)
    for rank, tensors in enumerate(shards):
        save_file({k: torch.zeros(shape, dtype=dtype) for k, (shape, dtype) in tensors.items()},
                  str(folder / name.format(rank=rank, world_size=len(shards))))


@pytest.fixture(scope="module")
def shards() -> list[dict[str, tuple[tuple[int, ...], torch.dtype]]]:
    return [_rank_tensors(r, N) for r in range(N)]


@pytest.fixture(scope="module")
def rules(tmp_path_factory) -> str:
    """The fixture's fp8 weights carry one scale per block_size × block_size block (its config's block_size)."""
    path = tmp_path_factory.mktemp("rules") / "fixture-blocks.json"
    path.write_text(json.dumps({"format": "archviz-rules/1", "scales": {"fp8_block": [CONFIG["block_size"]] * 2}}))
    return str(path)


def _check(rules: str, *args: str):
    return CliRunner().invoke(app, ["check", MODEL, "--world-size", str(N), "--rules", rules, *args])


def test_each_rank_shard_matches_its_records(tmp_path, shards, rules):
    # the rules split what they should: rank 0's head has half the vocabulary, its experts are the first half
    assert shards[0]["head.weight"][0] == (CONFIG["vocab_size"] // N, CONFIG["dim"])
    assert "layers.1.ffn.experts.0.w1.weight" in shards[0] and "layers.1.ffn.experts.0.w1.weight" not in shards[1]
    _write(tmp_path / "ckpt", shards, "model{rank}-mp{world_size}.safetensors")
    result = _check(rules, "--checkpoint", str(tmp_path / "ckpt"), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["verdict"] == "match" and report["world_size"] == N
    for rank, r in enumerate(report["ranks"]):
        assert r["rank"] == rank and r["file"] == f"model{rank}-mp{N}.safetensors"
        assert r["verdict"] == "match"
        assert r["summary"]["checkpoint_tensors"] == len(shards[rank])
        assert r["summary"]["mismatched"] == 0 and r["summary"]["missing"] == 0


def test_a_rank_shard_with_a_wrong_shape_is_named_with_its_rank(tmp_path, shards, rules):
    bad = [dict(s) for s in shards]
    # rank 1's attention output projection left whole: a row-parallel weight not split
    whole = (CONFIG["dim"], CONFIG["n_heads"] * CONFIG["v_head_dim"])
    bad[1]["layers.0.attn.wo.weight"] = (whole, bad[1]["layers.0.attn.wo.weight"][1])
    _write(tmp_path / "ckpt", bad, "tp-{rank}.safetensors")
    result = _check(rules, "--checkpoint", str(tmp_path / "ckpt"), "--rank-pattern", "tp-{rank}.safetensors")
    assert result.exit_code == 1, result.output
    split = [whole[0], whole[1] // N]
    assert f"rank 1: layers.0.attn.wo.weight: mismatch, model {split} vs checkpoint {list(whole)}" in result.output
    assert "rank 0: layers.0.attn.wo" not in result.output
    report = json.loads(_check(rules, "--checkpoint", str(tmp_path / "ckpt"), "--rank-pattern",
                               "tp-{rank}.safetensors", "--json").stdout)
    assert [r["verdict"] for r in report["ranks"]] == ["match", "mismatch"] and report["verdict"] == "mismatch"


def test_a_rank_manifest_keeps_each_shard_with_its_rank(tmp_path, shards, rules):
    _write(tmp_path / "ckpt", shards, "model{rank}-mp{world_size}.safetensors")
    out = tmp_path / "ranks.manifest.json.gz"
    made = CliRunner().invoke(app, ["manifest", str(tmp_path / "ckpt"), "--world-size", str(N), "-o", str(out)])
    assert made.exit_code == 0, made.output
    result = _check(rules, "--checkpoint", str(out), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(r["rank"], r["file"], r["summary"]["checkpoint_tensors"]) for r in report["ranks"]] == \
        [(r, f"model{r}-mp{N}.safetensors", len(shards[r])) for r in range(N)]


def test_bad_rank_input_is_one_line_and_exit_2(tmp_path, shards, rules):
    _write(tmp_path / "ckpt", shards[:1], "model{rank}-mp2.safetensors")  # rank 1's file is not there
    result = _check(rules, "--checkpoint", str(tmp_path / "ckpt"))
    assert result.exit_code == 2
    assert "no shard for rank 1 of 2 (expected model1-mp2.safetensors)" in result.output
    assert "Traceback" not in result.output
    result = _check(rules, "--checkpoint", str(tmp_path / "ckpt"), "--rank-pattern", "tp.safetensors")
    assert result.exit_code == 2 and "has no {rank}" in result.output


@pytest.mark.parametrize("pattern, words", [
    ("{rank.__class__.__init__.__globals__}", "{rank.__class__.__init__.__globals__} is not allowed"),
    ("{rank:>999999999}", "{rank:>999999999} is not allowed"),
    ("{rank!r}.safetensors", "{rank!r} is not allowed"),
    ("{0}{rank}", "{0} is not allowed"),
    ("../x{rank}.safetensors", "not a file in the checkpoint's folder"),
    ("{rank", "not a template"),
])
def test_a_rank_pattern_is_a_template_of_rank_and_nothing_else(pattern, words):
    """Issue 46: the pattern is never a Python format string (attribute access on archviz's objects, a width that
    exhausts memory) and never names a file outside the folder."""
    from archviz.checkpoint.ranks import rank_file
    from archviz.errors import CheckpointError

    with pytest.raises(CheckpointError) as e:
        rank_file(pattern, 1, 2)
    assert words in e.value.line() and e.value.exit_code == 2
    assert rank_file("tp{rank:02d}-of-{world_size}.safetensors", 3, 8) == "tp03-of-8.safetensors"


def test_a_rank_file_linked_from_outside_its_folder_is_refused(tmp_path, shards, rules):
    """A rank file that is a link to a file elsewhere (or that others may write) is not read, though its tensors
    would match: exit 2, one line naming where it leads."""
    _write(tmp_path / "ckpt", shards, "model{rank}-mp2.safetensors")
    elsewhere = tmp_path / "elsewhere.safetensors"
    (tmp_path / "ckpt" / "model1-mp2.safetensors").rename(elsewhere)
    (tmp_path / "ckpt" / "model1-mp2.safetensors").symlink_to(elsewhere)
    result = _check(rules, "--checkpoint", str(tmp_path / "ckpt"))
    assert result.exit_code == 2, result.output
    assert f"a link to {elsewhere}, outside the checkpoint's folder" in result.output
    (tmp_path / "ckpt" / "model1-mp2.safetensors").unlink()
    elsewhere.rename(tmp_path / "ckpt" / "model1-mp2.safetensors")
    (tmp_path / "ckpt" / "model1-mp2.safetensors").chmod(0o666)
    result = _check(rules, "--checkpoint", str(tmp_path / "ckpt"))
    assert result.exit_code == 2 and "writable by others" in result.output, result.output

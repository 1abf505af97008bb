"""Bounded work on hostile but well-formed files: gzip bombs, oversized indexes, deep nesting, 5,000-digit ints,
lone surrogates, shapes with huge element counts, very long tensor names. Each is refused (exit 2, one line)
within the bound, or read in time and memory proportional to its size. A run whose memory is measured is a process
of its own; a refusal whose one line is what is tested runs in-process."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from adv_tools import LINEAR, LINEAR_TENSORS, cli, cli_here, gzip_bomb, listing, refused, shard_bytes, write_shard

from archviz.checkpoint import open_checkpoint
from archviz.checkpoint.assemble import MAX_INDEX_BYTES
from archviz.checkpoint.compare import EXTRA_DEPTH
from archviz.checkpoint.header import MAX_NAME_CHARS
from archviz.checkpoint.manifest import MAX_MANIFEST_BYTES
from archviz.errors import CheckpointError

ENTRY = {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}


def _manifest(tensors: list[list], shard_data: int) -> dict:
    return {"format": "archviz-manifest/1", "source": "x", "revision": None, "metadata": {},
            "shards": [{"name": "s.safetensors", "file_bytes": 8 + 2 + shard_data, "header_bytes": 10,
                        "header_sha256": None, "metadata": {}}],
            "tensors": tensors}


def test_gzip_bomb_manifest_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    inflated_mib = MAX_MANIFEST_BYTES // (1 << 20) + 44  # just past the cap: 300 MiB of zeros, 300 KB on disk
    bomb = gzip_bomb(tmp_path / "bomb.manifest.json.gz", inflated_mib)
    assert bomb.stat().st_size < 1 << 20
    r = cli("manifest", bomb, "-o", tmp_path / "out.json", measure=True)
    refused(r, str(bomb), "inflates to more than", f"{MAX_MANIFEST_BYTES:,}")
    assert r.max_rss_mib < MAX_MANIFEST_BYTES / (1 << 20) + 200, r.max_rss_mib  # the cap, not the 300 MiB
    assert not (tmp_path / "out.json").exists()


def test_gzip_bomb_under_the_cap_is_still_not_a_manifest(tmp_path: Path) -> None:
    """Inflating to below the cap is allowed, and the zeros are then refused as what they are."""
    bomb = gzip_bomb(tmp_path / "zeros.json.gz", 8)
    with pytest.raises(CheckpointError, match="not valid"):
        open_checkpoint(bomb)


def test_index_over_the_size_cap_is_refused_unread(tmp_path: Path, archviz_cli) -> None:
    index = tmp_path / "model.safetensors.index.json"
    with open(index, "wb") as f:  # sparse: the size is what is checked, before a byte is read
        f.truncate(MAX_INDEX_BYTES + 1)
    t = time.monotonic()
    refused(cli_here(archviz_cli, "manifest", index, "-o", tmp_path / "m.json"), str(index),
            f"over the {MAX_INDEX_BYTES:,}-byte limit")
    assert time.monotonic() - t < 10


DEEP = "[" * 5000 + "]" * 5000
JUST_TOO_DEEP = "[" * 128 + "]" * 128


def _header_with(extra: str) -> bytes:
    return shard_bytes('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":%s}}' % extra, b"ab")


@pytest.mark.parametrize("payload, words", [
    (DEEP, "nested"), (JUST_TOO_DEEP, "nested more than 127"), ("9" * 5000, "4300 digits"),
    ('"\\ud800"', "surrogate"), ("NaN", "NaN"), ("1e400", "out of range"),
])
def test_hostile_values_in_every_json_parser(tmp_path: Path, payload: str, words: str) -> None:
    """One hostile value, placed where each parser reads it: a shard header, an index, both manifest formats, a
    rules file. Every one is a CheckpointError (exit 2), none an internal error."""
    header = tmp_path / "h.safetensors"
    header.write_bytes(_header_with(payload))
    (tmp_path / "s.safetensors").write_bytes(shard_bytes(json.dumps({"a": ENTRY}), b"ab"))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"metadata":{"x":%s},"weight_map":{"a":"s.safetensors"}}' % payload)
    archviz_m = tmp_path / "a.manifest.json"
    archviz_m.write_text(json.dumps(_manifest([["a", "U8", [2], 0]], 2))[:-1] + ',"x":%s}' % payload)
    audit = tmp_path / "audit.json"
    audit.write_text('{"model":"m","shards":[{"name":"s","file_bytes":12,"header_bytes":10}],'
                     '"tensors":{"a":{"dtype":"U8","shape":[2],"shard":"s"}},"x":%s}' % payload)
    for spec in (header, index, archviz_m, audit):
        if payload in ("NaN", "1e400") and spec is not header:
            continue  # Python's json writes NaN and Infinity; only the safetensors header refuses them (parity)
        with pytest.raises(CheckpointError) as e:
            open_checkpoint(spec)
        assert str(spec) in e.value.line() and "\n" not in e.value.line()
        assert (words in e.value.line()) or (payload == DEEP and "nested" in e.value.line()), e.value.line()


@pytest.mark.parametrize("payload", [DEEP, "9" * 5000, '"\\ud800"'])
def test_hostile_values_in_rules_and_config_via_the_cli(tmp_path: Path, payload: str, archviz_cli) -> None:
    ck = write_shard(tmp_path / "lin.safetensors", LINEAR_TENSORS)
    rules = tmp_path / "rules.json"
    rules.write_text('{"about": %s}' % payload)
    refused(cli_here(archviz_cli, "check", *LINEAR, "-k", ck, "--rules", rules), str(rules))
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "bert", "x": %s}' % payload)
    refused(cli_here(archviz_cli, "check", cfg, "-k", ck), str(cfg), "not a readable JSON config")


def test_lone_surrogate_tensor_name_is_exit_2_not_3(tmp_path: Path, archviz_cli) -> None:
    """A name the safetensors library refuses (and that no terminal or UTF-8 file can hold)."""
    ck = tmp_path / "s.safetensors"
    ck.write_bytes(shard_bytes('{"weight\\udc00":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', b"ab"))
    refused(cli_here(archviz_cli, "check", *LINEAR, "-k", ck), str(ck), "surrogate")
    m = tmp_path / "m.json"
    m.write_text(json.dumps(_manifest([["w\udc00", "U8", [2], 0]], 2), ensure_ascii=True))
    refused(cli_here(archviz_cli, "check", *LINEAR, "-k", m), str(m), "surrogate")


def test_manifest_shapes_with_huge_element_counts_cost_little(tmp_path: Path) -> None:
    """4 MB of dimensions: refused at the first overflow past 2**64 elements, not multiplied out (which took
    125 s); a 2**64-or-more dimension refused as the safetensors library refuses it."""
    dims = [10**18] * 200_000  # 4 MB of JSON
    m = tmp_path / "huge.json"
    m.write_text(json.dumps(_manifest([["a", "U8", dims, 0]], 2)))
    assert m.stat().st_size > 3_500_000
    t = time.monotonic()
    with pytest.raises(CheckpointError, match="more than 2\\*\\*64 elements"):
        open_checkpoint(m)
    assert time.monotonic() - t < 2
    big = tmp_path / "big.json"
    big.write_text(json.dumps(_manifest([["a", "U8", [0, 2**64], 0]], 0)))
    with pytest.raises(CheckpointError, match="below 2\\*\\*64"):
        open_checkpoint(big)
    audit = tmp_path / "audit.json.gz"
    audit.write_bytes(gzip.compress(json.dumps({"model": "m", "shards": [
        {"name": "s", "file_bytes": 10, "header_bytes": 10}], "tensors": {"a": {"dtype": "U8", "shape": dims,
                                                                              "shard": "s"}}}).encode()))
    t = time.monotonic()
    with pytest.raises(CheckpointError, match="more than 2\\*\\*64 elements"):
        open_checkpoint(audit)
    assert time.monotonic() - t < 2


def test_a_rank_of_two_million_ones_is_read_in_linear_time(tmp_path: Path) -> None:
    m = tmp_path / "ones.json"
    m.write_text(json.dumps(_manifest([["a", "U8", [2] + [1] * 2_000_000, 0]], 2)))
    t = time.monotonic()
    inv = open_checkpoint(m)
    assert time.monotonic() - t < 5
    assert len(inv.tensors["a"].shape) == 2_000_001


def test_tensor_name_over_the_cap_is_refused(tmp_path: Path) -> None:
    name = "a." * 43_500  # 87 KB, the case (3.5 GB before)
    ck = tmp_path / "long.safetensors"
    write_shard(ck, {**LINEAR_TENSORS, name: ("U8", [1])})
    r = cli("check", *LINEAR, "-k", ck, measure=True)
    refused(r, str(ck), f"{len(name):,}-character name", f"{MAX_NAME_CHARS:,}")
    assert len(r.stderr) < 1000  # the name is quoted cut short


@pytest.fixture(scope="module")
def plain_check(tmp_path_factory: pytest.TempPathFactory):
    """The same check of a plain checkpoint of the model (its peak memory: the baseline), once for both cases."""
    folder = tmp_path_factory.mktemp("plain")
    return cli("check", *LINEAR, "-k", write_shard(folder / "plain.safetensors", LINEAR_TENSORS), measure=True)


@pytest.mark.parametrize("sep", [".", "0."])
def test_long_name_under_the_cap_costs_linear_work(tmp_path: Path, sep: str, plain_check) -> None:
    """A checkpoint-only tensor whose name has 32,000 dots: every ancestor path of it would be 1 GB of strings;
    archviz keeps the model's modules and 8 levels below them."""
    name = (("a" + sep) * MAX_NAME_CHARS)[: MAX_NAME_CHARS - 1] + "w"
    ck = tmp_path / "long.safetensors"
    write_shard(ck, {**LINEAR_TENSORS, name: ("U8", [1])})
    base = plain_check
    assert base.returncode == 0, base.stderr
    for fmt in ("table", "github", "json"):
        r = cli("check", *LINEAR, "-k", ck, "--format", fmt, measure=True)
        assert r.returncode == 1, (fmt, r.stderr[-2000:])  # a checkpoint-only tensor nothing explains
        assert r.seconds < 10, (fmt, r.seconds)
        assert r.max_rss_mib < base.max_rss_mib + 100, (fmt, r.max_rss_mib, base.max_rss_mib)
        if fmt == "json":
            mods = json.loads(r.stdout)["modules"]
            deepest = max(mods, key=lambda p: p.count("."))
            assert deepest.count(".") + 1 == EXTRA_DEPTH and name.startswith(deepest + ".")  # 8 levels below root
            assert mods[deepest]["verdict"] == "mismatch" and mods[deepest]["in_model"] is False
            assert len(r.stdout) < 10 * MAX_NAME_CHARS
    assert listing(tmp_path) == {"long.safetensors"}

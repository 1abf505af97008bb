"""Real DeepSeek-V3 / V4-Flash header lists: manifests, byte-exact rebuilt headers, sparse full-size shards."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
from pathlib import Path

import pytest

from archviz.checkpoint import CheckpointInventory, open_checkpoint, write_manifest
from archviz.checkpoint.synth import build_shard_header, load_audit_manifest, shard_tensors, write_sparse_shards


@pytest.fixture(scope="module")
def v3(v3_manifest_path: Path) -> CheckpointInventory:
    return open_checkpoint(v3_manifest_path)


@pytest.fixture(scope="module")
def v4(v4_manifest_path: Path) -> CheckpointInventory:
    return open_checkpoint(v4_manifest_path)


def test_committed_manifests_are_small_gzip(v3_manifest_path: Path, v4_manifest_path: Path) -> None:
    for path in (v3_manifest_path, v4_manifest_path):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
        assert path.stat().st_size < 400_000


def test_v3_manifest(v3: CheckpointInventory) -> None:
    assert len(v3.tensors) == 91_991
    assert len(v3.shards) == 163
    assert v3.revision == "e815299b0bcbac849fa540c768ef21845365c9eb"
    assert v3.metadata["model"] == "deepseek-ai/DeepSeek-V3"
    assert v3.metadata["manifest"] == "header-audit"
    assert v3.metadata["header"] == {"format": "pt"}
    assert v3.shards[0].name == "model-00001-of-000163.safetensors"
    assert v3.total_file_bytes == 688_586_727_753
    assert set(v3.bytes_by_dtype()) == {"BF16", "F8_E4M3", "F32"}
    assert v3.numel_by_dtype() == {"BF16": 3_918_786_560, "F8_E4M3": 680_571_043_840, "F32": 41_555_600}
    # consecutive layout fills every shard exactly, so offsets are known and end at each shard's data size
    last = {}
    for t in v3:
        assert t.data_offsets is not None
        last[t.shard] = t.data_offsets[1]
    assert all(last[s.name] == s.data_bytes for s in v3.shards)
    # what a naive count gets wrong: fp8 weights with F32 block scales, MTP layer 61, routing bias
    w = v3.tensors["model.layers.3.mlp.experts.0.gate_proj.weight"]
    s = v3.tensors["model.layers.3.mlp.experts.0.gate_proj.weight_scale_inv"]
    assert (w.dtype, w.shape, s.dtype, s.shape) == ("F8_E4M3", (2048, 7168), "F32", (16, 56))
    for t in v3:
        if t.name.endswith(".weight_scale_inv"):
            out, inp = v3.tensors[t.name[: -len("_scale_inv")]].shape
            assert t.shape == (math.ceil(out / 128), math.ceil(inp / 128))
    assert sum(n.startswith("model.layers.61.") for n in v3.tensors) == 1564
    assert sum(n.endswith("e_score_correction_bias") for n in v3.tensors) == 59


def test_v4_flash_manifest(v4: CheckpointInventory) -> None:
    assert len(v4.tensors) == 69_187
    assert len(v4.shards) == 46
    assert v4.revision == "60d8d70770c6776ff598c94bb586a859a38244f1"
    assert "header" not in v4.metadata  # no __metadata__ in these shards
    counts: dict[str, int] = {}
    for t in v4:
        counts[t.dtype] = counts.get(t.dtype, 0) + 1
    assert counts == {"F8_E8M0": 34_167, "I8": 33_792, "BF16": 433, "F32": 417, "F8_E4M3": 375, "I64": 3}
    # fp4 experts packed two per byte in I8, one E8M0 scale per 32 fp4 values
    w1 = v4.tensors["layers.0.ffn.experts.0.w1.weight"]
    sc = v4.tensors["layers.0.ffn.experts.0.w1.scale"]
    assert (w1.dtype, w1.shape, sc.dtype, sc.shape) == ("I8", (2048, 2048), "F8_E8M0", (2048, 2 * 2048 // 32))
    assert v4.tensors["layers.0.ffn.gate.tid2eid"].dtype == "I64"
    assert any(n.startswith("mtp.") for n in v4.tensors)


@pytest.mark.parametrize("which", ["v3", "v4"])
def test_rebuilt_headers_match_published_sha256(which: str, v3_manifest_path: Path, v4_manifest_path: Path) -> None:
    manifest = load_audit_manifest(v3_manifest_path if which == "v3" else v4_manifest_path)
    groups = shard_tensors(manifest)
    for shard in manifest["shards"]:
        head = build_shard_header(shard, groups[shard["name"]])
        assert len(head) == shard["header_bytes"], shard["name"]
        assert hashlib.sha256(head).hexdigest() == shard["header_sha256"], shard["name"]
        if shard["header_format"]["padded8"]:
            assert len(head) % 8 == 0
        else:
            assert head[8:].startswith(b'{"__metadata__":{"format":"pt"},')


def _rchar() -> int:
    with open("/proc/self/io", "rb") as f:
        for line in f.read().splitlines():
            if line.startswith(b"rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _open_counting(spec: Path) -> tuple[CheckpointInventory, int]:
    """Open ``spec`` and return the bytes this process read meanwhile (``/proc/self/io`` rchar)."""
    open_checkpoint(spec)  # warm up: imports, caches
    before = _rchar()
    inv = open_checkpoint(spec)
    return inv, _rchar() - before


needs_proc_io = pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")


def _restricted(inv: CheckpointInventory, names: set[str]) -> tuple[list, list]:
    return [s for s in inv.shards if s.name in names], [t for t in inv if t.shard in names]


@needs_proc_io
@pytest.mark.parametrize("which, picks", [("v3", [0, 1, 3, 60, 161, 162]), ("v4", [0, 1, 2, 23, 44, 45])])
def test_sparse_shards_only_headers_are_read(
    which: str,
    picks: list[int],
    tmp_path: Path,
    v3: CheckpointInventory,
    v4: CheckpointInventory,
    v3_manifest_path: Path,
    v4_manifest_path: Path,
) -> None:
    ref, manifest = (v3, v3_manifest_path) if which == "v3" else (v4, v4_manifest_path)
    paths = write_sparse_shards(manifest, tmp_path, only=picks)
    names = {p.name for p in paths}
    assert len(names) == len(picks)
    for p in paths:  # full size on paper, a few KB on disk
        st = p.stat()
        assert st.st_size == ref.shards[[s.name for s in ref.shards].index(p.name)].file_bytes
        assert st.st_blocks * 512 < 4 * 1024 * 1024

    inv, read = _open_counting(tmp_path)

    shards, tensors = _restricted(ref, names)
    assert list(inv.shards) == shards  # names, sizes, header sizes, SHA-256 and __metadata__ all equal
    assert list(inv.tensors.values()) == tensors  # names, dtypes, shapes, shards and data offsets
    header_bytes = sum(s.header_bytes for s in shards)
    index_bytes = (tmp_path / "model.safetensors.index.json").stat().st_size
    file_bytes = sum(s.file_bytes for s in shards)
    assert header_bytes <= read <= header_bytes + index_bytes + 64 * 1024, (read, header_bytes, index_bytes)
    assert read < file_bytes / 10_000


@needs_proc_io
def test_all_163_v3_shards(tmp_path: Path, v3: CheckpointInventory, v3_manifest_path: Path) -> None:
    paths = write_sparse_shards(v3_manifest_path, tmp_path)
    assert len(paths) == 163
    progress: list[tuple[int, int, str]] = []
    before = _rchar()
    inv = open_checkpoint(tmp_path, progress=lambda *a: progress.append(a))
    read = _rchar() - before
    assert [p[:2] for p in progress] == [(i, 163) for i in range(1, 164)]
    assert inv.same_content(v3)
    assert len(inv.tensors) == 91_991
    assert inv.metadata["header"] == {"format": "pt"}
    assert inv.metadata["index"]["total_size"] == sum(s.data_bytes for s in v3.shards)
    headers = sum(s.header_bytes for s in v3.shards)
    assert headers <= read <= headers + (tmp_path / "model.safetensors.index.json").stat().st_size + 64 * 1024


def test_archviz_manifest_of_v4_is_small_and_exact(tmp_path: Path, v4: CheckpointInventory) -> None:
    path = tmp_path / "v4.json.gz"
    write_manifest(v4, path)
    assert path.stat().st_size < 300_000
    back = open_checkpoint(path)
    assert back.same_content(v4)
    assert back.revision == v4.revision
    assert back.metadata["model"] == "deepseek-ai/DeepSeek-V4-Flash"
    text = gzip.decompress(path.read_bytes()).decode("ascii")
    assert json.loads(text)["format"] == "archviz-manifest/1"
    assert text.count("\n") == 6 + 46 + 1 + 69_187 + 1

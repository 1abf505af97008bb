"""Every unusable input is one CheckpointError (exit code 2) that says what, where, and what to do."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from archviz.checkpoint import open_checkpoint
from archviz.errors import EXIT_USAGE, CheckpointError


def write_raw(path: Path, header: dict | bytes, data_bytes: int, *, prefix: int | None = None) -> Path:
    """A safetensors-like file: prefix (the header's length unless given), header, zero data."""
    body = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    n = len(body) if prefix is None else prefix
    path.write_bytes(n.to_bytes(8, "little") + body + b"\0" * data_bytes)
    return path


def expect_error(spec: object, *fragments: str) -> CheckpointError:
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(spec)  # type: ignore[arg-type]
    err = info.value
    assert err.exit_code == EXIT_USAGE
    assert "\n" not in err.line()
    assert err.hint, err.line()
    for fragment in fragments:
        assert fragment in err.message, (fragment, err.message)
    return err


def safe_open_rejects(path: Path) -> bool:
    try:
        with safe_open(str(path), framework="pt") as f:
            f.keys()
    except Exception:
        return True
    return False


F32x2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


def test_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "short.safetensors"
    path.write_bytes(b"\x10\0\0\0\0")
    expect_error(path, str(path), "5 bytes", "too short")
    assert safe_open_rejects(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.safetensors"
    path.write_bytes(b"")
    expect_error(path, str(path), "0 bytes")


def test_header_length_beyond_file(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "cut.safetensors", {"a": F32x2}, 8, prefix=5000)
    expect_error(path, str(path), "5,000", "past the end")
    assert safe_open_rejects(path)


def test_header_over_100_mb(tmp_path: Path) -> None:
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:  # sparse: declares a 150 MB header inside a 160 MB file, writes 8 bytes
        f.write((150_000_000).to_bytes(8, "little"))
        f.truncate(160_000_000)
    err = expect_error(path, str(path), "150,000,000", "100,000,000")
    assert "damaged" in (err.hint or "")
    assert safe_open_rejects(path)


def test_invalid_utf8(tmp_path: Path) -> None:
    path = write_raw(
        tmp_path / "utf8.safetensors", b'{"a\xff\xfe":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 8
    )
    expect_error(path, str(path), "not valid UTF-8", "byte 11")
    assert safe_open_rejects(path)


def test_invalid_json(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "json.safetensors", b'{"a":{"dtype":"F32","shape":[2],', 8)
    expect_error(path, str(path), "not valid JSON", "line 1")
    assert safe_open_rejects(path)


def test_overlapping_offsets(tmp_path: Path) -> None:
    header = {"a": F32x2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
    path = write_raw(tmp_path / "overlap.safetensors", header, 12)
    expect_error(path, str(path), "'a' and 'b' overlap")
    assert safe_open_rejects(path)


def test_out_of_range_offsets(tmp_path: Path) -> None:
    header = {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    path = write_raw(tmp_path / "range.safetensors", header, 8)
    expect_error(path, str(path), "'a'", "[0, 16]", "past the 8-byte data region")
    assert safe_open_rejects(path)


def test_size_not_matching_shape_and_dtype(tmp_path: Path) -> None:
    header = {"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}}
    path = write_raw(tmp_path / "size.safetensors", header, 8)
    expect_error(path, str(path), "'w'", "8 bytes", "BF16[2, 3] needs 12")
    assert safe_open_rejects(path)


def test_unknown_dtype(tmp_path: Path) -> None:
    header = {"w": {"dtype": "F12", "shape": [2], "data_offsets": [0, 3]}}
    path = write_raw(tmp_path / "dtype.safetensors", header, 3)
    err = expect_error(path, str(path), "'w'", "unknown dtype 'F12'")
    assert "F8_E8M0" in (err.hint or "")
    assert safe_open_rejects(path)


def test_sub_byte_dtype_must_fill_bytes(tmp_path: Path) -> None:
    header = {"q": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}
    path = write_raw(tmp_path / "f4.safetensors", header, 2)
    expect_error(path, "'q'", "does not fill whole bytes")
    assert safe_open_rejects(path)


@pytest.mark.parametrize(
    "header, data, fragments",
    [
        ([1, 2], 0, ["must be a JSON object"]),
        ({"a": [1]}, 0, ["'a'", "must be an object"]),
        ({"a": {"dtype": "F32", "shape": [2]}}, 8, ["'a'", "missing 'data_offsets'"]),
        ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, 8, ["'a'", "non-negative ints"]),
        ({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, 8, ["'a'", "non-negative ints"]),
        ({"a": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}}, 8, ["'a'", "shape must be a list"]),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, 8, ["'a'", "0 <= begin <= end"]),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 9]}}, 8, ["'a'", "[begin, end]"]),
        ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, 8, ["bytes 0..4", "no tensor"]),
        ({"a": F32x2}, 12, ["data region is 12 bytes", "cover 8"]),
        ({"__metadata__": {"k": 1}, "a": F32x2}, 8, ["__metadata__['k'] must be a string"]),
        ({"__metadata__": ["x"], "a": F32x2}, 8, ["__metadata__ must be an object"]),
        ({"a": {"dtype": 7, "shape": [2], "data_offsets": [0, 8]}}, 8, ["unknown dtype 7"]),
        ({"a": {"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}}, 8, ["unknown dtype ['F32']"]),
        ({"a": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}, 8, ["more than 2**64"]),
    ],
    ids=[
        "not-object",
        "entry-not-object",
        "missing-field",
        "negative-dim",
        "float-dim",
        "shape-not-list",
        "reversed-offsets",
        "three-offsets",
        "gap",
        "trailing-bytes",
        "metadata-not-str",
        "metadata-not-object",
        "dtype-int",
        "dtype-list",
        "numel-overflow",
    ],
)
def test_malformed_entries(tmp_path: Path, header: object, data: int, fragments: list[str]) -> None:
    path = write_raw(tmp_path / "bad.safetensors", json.dumps(header).encode(), data)
    expect_error(path, str(path), *fragments)
    assert safe_open_rejects(path)


def test_duplicate_tensor_name_in_one_header(tmp_path: Path) -> None:
    body = (
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'
    )
    path = write_raw(tmp_path / "dup.safetensors", body, 8)
    expect_error(path, str(path), "'a' is listed twice")
    assert safe_open_rejects(path)


def _two_shards(tmp_path: Path, shared: str | None = None) -> Path:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    a = {"x": torch.ones(2), "y": torch.ones(3)}
    b = {"z": torch.ones(4)}
    if shared:
        b[shared] = torch.zeros(2)
    save_file(a, folder / "model-00001-of-00002.safetensors")
    save_file(b, folder / "model-00002-of-00002.safetensors")
    return folder


def _index(folder: Path, weight_map: dict[str, str]) -> Path:
    path = folder / "model.safetensors.index.json"
    path.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return path


def test_index_names_missing_shard(tmp_path: Path) -> None:
    folder = _two_shards(tmp_path)
    index = _index(
        folder,
        {
            "x": "model-00001-of-00002.safetensors",
            "y": "model-00001-of-00002.safetensors",
            "z": "model-00002-of-00002.safetensors",
            "w": "model-00003-of-00003.safetensors",
        },
    )
    err = expect_error(index, str(index), "'model-00003-of-00003.safetensors' is missing")
    assert "download" in (err.hint or "")
    expect_error(folder, "'model-00003-of-00003.safetensors' is missing")


def test_tensor_in_two_shards_without_index(tmp_path: Path) -> None:
    folder = _two_shards(tmp_path, shared="x")
    expect_error(
        folder, "'x' appears in two shards", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    )


def test_tensor_in_two_shards_with_index(tmp_path: Path) -> None:
    folder = _two_shards(tmp_path, shared="x")
    index = _index(
        folder,
        {
            "x": "model-00001-of-00002.safetensors",
            "y": "model-00001-of-00002.safetensors",
            "z": "model-00002-of-00002.safetensors",
        },
    )
    expect_error(index, "'x' appears in two shards")


def test_index_and_headers_disagree(tmp_path: Path) -> None:
    folder = _two_shards(tmp_path)
    one, two = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    index = _index(folder, {"x": one, "y": one, "z": one})  # z is really in shard two
    expect_error(index, "'z'")
    index = _index(folder, {"x": one, "y": one, "z": two, "ghost": two})
    expect_error(index, "'ghost'", "no such tensor")
    index = _index(folder, {"x": one, "z": two})
    expect_error(index, "'y'", "does not list")


def test_index_without_weight_map(tmp_path: Path) -> None:
    folder = _two_shards(tmp_path)
    path = folder / "model.safetensors.index.json"
    path.write_text('{"metadata": {}}')
    expect_error(path, "index: weight_map: missing")
    path.write_text('{"weight_map": {"x": ')
    expect_error(path, "not valid JSON")


def test_index_shard_outside_folder(tmp_path: Path) -> None:
    folder = _two_shards(tmp_path)
    index = _index(folder, {"x": "../elsewhere.safetensors"})
    with pytest.raises(CheckpointError, match="outside the index's folder"):
        open_checkpoint(index)


class _Payload:
    """Unpickling this creates a marker file: proof that a checkpoint was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "model.pth", "last.ckpt"])
def test_pickle_is_refused_never_unpickled(tmp_path: Path, name: str) -> None:
    marker = tmp_path / "unpickled.marker"
    path = tmp_path / name
    path.write_bytes(pickle.dumps({"w": _Payload(marker)}))
    pickle.loads(path.read_bytes())  # the payload is live: unpickling does create the marker
    assert marker.exists()
    marker.unlink()
    os.chmod(path, 0)  # and the reader must not even need to open it
    try:
        err = expect_error(path, str(path), "pickle checkpoints are not read")
        assert "never unpickles" in (err.hint or "")
        assert not marker.exists()
    finally:
        os.chmod(path, 0o600)


def test_folder_with_only_pickles_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled.marker"
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    expect_error(folder, "pickle checkpoints are not read", "pytorch_model.bin")  # not a torch.save zip
    (folder / "pytorch_model.bin.index.json").write_text('{"weight_map": {"w": "pytorch_model.bin"}}')
    expect_error(folder / "pytorch_model.bin.index.json", "pickle checkpoints are not read")
    assert not marker.exists()


def test_safetensors_name_on_a_pickle(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    torch.save({"w": torch.ones(2)}, path)  # a zip archive under the wrong name
    err = expect_error(path, str(path))
    assert "pickle" in (err.hint or "")


def test_missing_path_and_hf_hint(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope.safetensors", "no such file")
    err = expect_error("deepseek-ai/DeepSeek-V3", "no such file or folder")
    assert "hf://deepseek-ai/DeepSeek-V3" in (err.hint or "")


def test_empty_folder(tmp_path: Path) -> None:
    expect_error(tmp_path, "no *.safetensors files")


def test_bad_manifests(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"hello": 1}')
    expect_error(path, "not a checkpoint manifest")
    path.write_text(
        json.dumps(
            {
                "shards": [{"name": "s.safetensors", "file_bytes": 100, "header_bytes": 20}],
                "tensors": {"a": {"dtype": "F32", "shape": [2], "shard": "other.safetensors"}},
            }
        )
    )
    expect_error(path, "'a'", "'other.safetensors'")
    path.write_text(
        json.dumps(
            {
                "shards": [{"name": "s.safetensors", "file_bytes": 100, "header_bytes": 20}],
                "tensors": {"a": {"dtype": "Q8", "shape": [2], "shard": "s.safetensors"}},
            }
        )
    )
    expect_error(path, "unknown dtype 'Q8'")
    gz = tmp_path / "m.json.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00garbage")
    expect_error(gz, "damaged gzip")
    path.write_text(
        json.dumps(
            {
                "format": "archviz-manifest/1",
                "source": "x",
                "revision": None,
                "metadata": {},
                "shards": [
                    {
                        "name": "s.safetensors",
                        "file_bytes": 28,
                        "header_bytes": 20,
                        "header_sha256": None,
                        "metadata": {},
                    }
                ],
                "tensors": [["a", "F32", [1], 0, 0, 4], ["b", "F32", [1], 0, 2, 6]],
            }
        )
    )
    expect_error(path, "'b'", "overlaps")

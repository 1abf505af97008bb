"""Inputs that are not regular files: a FIFO (blocks a plain open forever), a /dev/zero twin (endless reads), a
socket, a folder, a symlink to a FIFO — as checkpoint, manifest, index, shard, rules file and config. Each is
refused with one line, at once, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from adv_tools import LINEAR, LINEAR_TENSORS, can_mknod, cli, listing, make_special, refused, write_shard

KINDS = ["fifo", "chardev", "socket", "symlink-to-fifo"]
WORDS = {"fifo": "FIFO", "chardev": "character device", "socket": "socket", "symlink-to-fifo": "FIFO"}


def _special(tmp_path: Path, name: str, kind: str) -> Path:
    if kind == "chardev" and not can_mknod(tmp_path):
        pytest.skip("mknod is not permitted here (needs root)")
    return make_special(tmp_path / name, kind)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["model.safetensors", "ck.manifest.json", "ck.manifest.json.gz",
                                  "model.safetensors.index.json", "noext"])
def test_checkpoint_path_that_is_not_a_regular_file(tmp_path: Path, kind: str, name: str) -> None:
    src = _special(tmp_path, name, kind)
    out = tmp_path / "out" / "m.json"
    out.parent.mkdir()
    before = listing(tmp_path)
    line = refused(cli("manifest", src, "-o", out), str(src), WORDS[kind], "not a regular file")
    assert "pass the" in line
    assert listing(tmp_path) == before  # no output, no temp file


@pytest.mark.parametrize("kind", KINDS)
def test_shard_named_by_an_index_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    ck = tmp_path / "ck"
    ck.mkdir()
    write_shard(ck / "model-00001-of-00002.safetensors", {"weight": LINEAR_TENSORS["weight"]})
    _special(ck, "model-00002-of-00002.safetensors", kind)
    (ck / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": {
        "weight": "model-00001-of-00002.safetensors", "bias": "model-00002-of-00002.safetensors"}}))
    out = tmp_path / "m.json"
    refused(cli("manifest", ck, "-o", out), "model-00002-of-00002.safetensors", WORDS[kind])
    assert not out.exists()


def test_dev_zero_itself(tmp_path: Path) -> None:
    for spec in ("/dev/zero", "/dev/null"):
        refused(cli("manifest", spec, "-o", tmp_path / "m.json"), spec, "character device")
    assert listing(tmp_path) == set()


@pytest.mark.parametrize("kind", ["fifo", "chardev", "folder"])
def test_rules_file_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    rules = _special(tmp_path, "rules.json", kind)
    ck = write_shard(tmp_path / "lin.safetensors", LINEAR_TENSORS)
    line = refused(cli("check", *LINEAR, "-k", ck, "--rules", rules), str(rules))
    assert ("folder" if kind == "folder" else "not a regular file") in line


@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_config_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    """A model's config.json as a FIFO or a device: the source is refused before anything is built."""
    folder = tmp_path / "model"
    folder.mkdir()
    cfg = _special(folder, "config.json", kind)
    ck = write_shard(tmp_path / "lin.safetensors", LINEAR_TENSORS)
    refused(cli("check", cfg, "-k", ck), str(cfg), "not a regular file")

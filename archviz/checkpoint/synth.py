"""Rebuilding real shard headers from a header-audit manifest, and sparse stand-in shards that cost no disk.

The header-audit lists (``tests/data/checkpoints/*.manifest.json.gz``, from ``shared/checkpoints``) are exact:
writing a shard's header from them — tensors in the listed order, ``data_offsets`` consecutive from 0, JSON
without spaces, ``__metadata__`` first when ``header_format.metadata`` is set, padded with spaces to a multiple
of 8 bytes when ``header_format.padded8`` — gives the published header byte for byte (``header_sha256`` is the
SHA-256 of the 8-byte prefix plus header). :func:`write_sparse_shards` writes such headers into files of the
shard's full ``file_bytes`` by truncation, so a 688 GB checkpoint takes a few megabytes on disk, and opening it
exercises exactly the code paths a real download would.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from archviz.errors import CheckpointError

from .manifest import load_json_file
from .records import dtype_nbytes

__all__ = ["build_shard_header", "load_audit_manifest", "shard_tensors", "write_sparse_shards"]


def load_audit_manifest(manifest: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    """A header-audit manifest as a dict: loads a path (plain or gzip'd JSON), passes a mapping through."""
    if isinstance(manifest, Mapping):
        return manifest
    obj = load_json_file(manifest)
    if not isinstance(obj, dict) or not isinstance(obj.get("shards"), list) or not isinstance(obj.get("tensors"), dict):
        raise CheckpointError(f'{os.fspath(manifest)}: not a header-audit manifest (needs "shards" and "tensors")')
    return obj


def shard_tensors(manifest: Mapping[str, Any]) -> dict[str, list[tuple[str, Mapping[str, Any]]]]:
    """The manifest's tensors grouped by shard name, each group in listed order."""
    out: dict[str, list[tuple[str, Mapping[str, Any]]]] = {s["name"]: [] for s in manifest["shards"]}
    for name, t in manifest["tensors"].items():
        out[t["shard"]].append((name, t))
    return out


def build_shard_header(manifest_shard: Mapping[str, Any], tensors: Iterable[tuple[str, Mapping[str, Any]]]) -> bytes:
    """The 8-byte length prefix plus the JSON header of one shard, as the real file starts.

    ``manifest_shard`` is one entry of the manifest's ``shards`` (its ``header_format`` decides metadata and
    padding); ``tensors`` are ``(name, {"dtype", "shape", ...})`` pairs in on-disk order.
    """
    fmt = manifest_shard.get("header_format") or {}
    header: dict[str, Any] = {}
    if fmt.get("metadata") is not None:
        header["__metadata__"] = fmt["metadata"]
    offset = 0
    for name, t in tensors:
        size = dtype_nbytes(t["dtype"], math.prod(t["shape"]))
        header[name] = {"dtype": t["dtype"], "shape": list(t["shape"]), "data_offsets": [offset, offset + size]}
        offset += size
    body = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if fmt.get("padded8"):
        body += b" " * (-len(body) % 8)
    return len(body).to_bytes(8, "little") + body


_PROBE_BYTES = 64 * 1024 * 1024


def _require_sparse_files(folder: Path) -> None:
    """Refuse to go on where ``truncate`` would really allocate (hundreds of GB for a DeepSeek checkpoint)."""
    probe = folder / ".archviz-sparse-probe"
    try:
        with open(probe, "wb") as f:
            f.truncate(_PROBE_BYTES)
        blocks = getattr(os.stat(probe), "st_blocks", None)  # absent on Windows: cannot tell, so refuse
        allocated = _PROBE_BYTES if blocks is None else blocks * 512
    finally:
        probe.unlink(missing_ok=True)
    if allocated >= _PROBE_BYTES // 2:
        raise CheckpointError(
            f"{folder}: this file system does not keep files sparse ({allocated:,} bytes allocated for a hole)",
            hint="write the sparse shards on ext4, xfs, btrfs, tmpfs or APFS",
        )


def write_sparse_shards(
    manifest: Mapping[str, Any] | str | os.PathLike[str],
    folder: str | os.PathLike[str],
    only: Iterable[str | int] | None = None,
    *,
    write_index: bool = True,
    verify: bool = True,
) -> list[Path]:
    """Write sparse stand-ins of a header-audit manifest's shards into ``folder``; return their paths.

    Each file holds the rebuilt header and is extended to the shard's ``file_bytes`` with ``truncate`` (no data
    written: the rest reads as zeros and takes no disk). ``only`` picks shards by name or position. With
    ``verify``, each header must match the manifest's ``header_bytes`` and ``header_sha256``. With
    ``write_index``, a ``model.safetensors.index.json`` for the written shards goes next to them.
    """
    m = load_audit_manifest(manifest)
    shards = list(m["shards"])
    if only is not None:
        wanted = set(only)
        shards = [s for i, s in enumerate(shards) if i in wanted or s["name"] in wanted]
    groups = shard_tensors(m)
    out_dir = Path(folder)
    out_dir.mkdir(parents=True, exist_ok=True)
    _require_sparse_files(out_dir)
    paths: list[Path] = []
    weight_map: dict[str, str] = {}
    total = 0
    for s in shards:
        head = build_shard_header(s, groups[s["name"]])
        if verify:
            if len(head) != s["header_bytes"]:
                raise CheckpointError(
                    f"shard {s['name']}: rebuilt header is {len(head)} bytes, manifest says {s['header_bytes']}"
                )
            sha = s.get("header_sha256")
            if sha is not None and hashlib.sha256(head).hexdigest() != sha:
                raise CheckpointError(f"shard {s['name']}: rebuilt header does not match header_sha256")
        path = out_dir / s["name"]
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(s["file_bytes"])
        paths.append(path)
        for name, _ in groups[s["name"]]:
            weight_map[name] = s["name"]
        total += s["file_bytes"] - len(head)
    if write_index:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (out_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return paths

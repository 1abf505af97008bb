"""Manifests laid out as their writers lay them out are read without a JSON parse of the tensor list. Whatever the
text, the reading (or the error) of ``manifest_from_bytes``'s fast paths (``path="fast"``) must be the one its
specification gives (``path="spec"``: JSON, row by row): the real DeepSeek-V3 header-audit manifest, the archviz
manifest written from it, hand-made variants, and thousands of random mutations."""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path

import pytest

from archviz.checkpoint import open_checkpoint
from archviz.checkpoint.manifest import (
    _canonical_manifest,
    inventory_from_manifest,
    manifest_from_bytes,
    manifest_text,
    read_json_bytes,
)
from archviz.checkpoint.records import CheckpointInventory
from archviz.errors import CheckpointError


@lru_cache(maxsize=8)
def _read(raw: bytes, path: str) -> CheckpointInventory | str | None:
    """``manifest_from_bytes(raw, path=path)``: its inventory, its error, or None (no fast path taken). ``"auto"``
    is the call every caller makes: ``path`` left at its default."""
    try:
        if path == "auto":
            return manifest_from_bytes(raw, source="m")
        return manifest_from_bytes(raw, source="m", path=path)  # type: ignore[arg-type]
    except CheckpointError as e:
        return f"error: {e}"


def _json_path(raw: bytes) -> CheckpointInventory | str:
    """The specification's reading (or its error line)."""
    return _read(raw, "spec")  # type: ignore[return-value]


def _writers_layout(raw: bytes) -> bool:
    """Whether the writers'-layout path (no JSON parse of the tensor list) reads ``raw``."""
    try:
        return _canonical_manifest(raw, raw.decode("utf-8"), "m", "m") is not None
    except (UnicodeDecodeError, CheckpointError):
        return False


def _fast_path(raw: bytes) -> CheckpointInventory | None:
    """The fast paths' reading where the writers' layout takes ``raw``: the specification's, and what every caller
    gets (an error there is the specification's too). None where the writers' layout does not take it."""
    fast = _read(raw, "fast")
    spec = _json_path(raw)
    assert fast is None or fast == spec
    assert _read(raw, "auto") == spec
    return fast if _writers_layout(raw) else None  # type: ignore[return-value]


def _same(fast: CheckpointInventory, slow: CheckpointInventory | str) -> None:
    assert isinstance(slow, CheckpointInventory), slow
    assert fast == slow
    assert list(fast.tensors.items()) == list(slow.tensors.items())  # same order too


@pytest.fixture(scope="module")
def audit_raw(v3_manifest_path: Path) -> bytes:
    return read_json_bytes(v3_manifest_path)


@pytest.fixture(scope="module")
def archviz_raw(audit_raw: bytes) -> bytes:
    return manifest_text(inventory_from_manifest(json.loads(audit_raw), source="m")).encode()


SLICE_SHARDS = ("model-00001-of-000163.safetensors", "model-00002-of-000163.safetensors",
                "model-00160-of-000163.safetensors")  # the embedding, a split run, model.norm.weight


@pytest.fixture(scope="module")
def audit_slice(audit_raw: bytes) -> bytes:
    """The real audit manifest cut to three of its shards, whole, every other byte as its writer wrote it (the file
    is ``json.dumps`` with compact separators, checked here): the hand-made edits below are layout edits, which read
    the same on 1,308 rows as on 91,991, at a hundredth of the parsing."""
    listed = json.loads(audit_raw)
    assert json.dumps(listed, separators=(",", ":")).encode() == audit_raw
    listed["shards"] = [s for s in listed["shards"] if s["name"] in SLICE_SHARDS]
    listed["tensors"] = {n: t for n, t in listed["tensors"].items() if t["shard"] in SLICE_SHARDS}
    return json.dumps(listed, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def archviz_slice(audit_slice: bytes) -> bytes:
    return manifest_text(inventory_from_manifest(json.loads(audit_slice), source="m")).encode()


def test_real_v3_manifest_takes_the_fast_path(audit_raw: bytes, v3_manifest_path: Path) -> None:
    fast = _fast_path(audit_raw)
    assert fast is not None
    _same(fast, _json_path(audit_raw))
    # The numbers are the manifest's own: 91,991 tensors in 163 shards (counted here from the JSON).
    listed = json.loads(audit_raw)
    assert len(fast.tensors) == len(listed["tensors"]) == 91_991
    assert len(fast.shards) == len(listed["shards"]) == 163
    assert open_checkpoint(v3_manifest_path).same_content(fast)


def test_archviz_manifest_takes_the_fast_path(archviz_raw: bytes) -> None:
    fast = _fast_path(archviz_raw)
    assert fast is not None
    _same(fast, _json_path(archviz_raw))


def _edit(raw: bytes, old: str, new: str, count: int = 1) -> bytes:
    text = raw.decode()
    assert old in text, old
    return text.replace(old, new, count).encode()


A_ROW = '["model.embed_tokens.weight","BF16",[129280,7168],0]'
A_NAME = '"model.embed_tokens.weight":{"dtype":"BF16","shape":[129280,7168],"shard":"model-00001-of-000163.safetensors"}'


@pytest.mark.parametrize(
    ("which", "old", "new", "fast"),
    [
        ("archviz", A_ROW, A_ROW.replace("0]", "0,0,1853358080]"), False),  # a 6-item row
        ("archviz", A_ROW, A_ROW.replace('",[', '", ['), False),  # whitespace inside a row
        ("archviz", A_ROW, A_ROW.replace("embed", "emb\\u0065d"), False),  # an escape (same name)
        ("archviz", A_ROW, A_ROW.replace("0]", "00]"), False),  # not JSON
        ("archviz", A_ROW, A_ROW.replace("0]", "163]"), False),  # no such shard
        ("archviz", A_ROW, A_ROW.replace("7168]", "7169]"), False),  # the shard no longer adds up
        ("archviz", A_ROW, A_ROW.replace("BF16", "BF17"), False),
        ("archviz", A_ROW, A_ROW.replace("embed_tokens", "norm"), False),  # a name twice
        ("archviz", ',\n"tensors":[', ',\n"tensors" : [', True),  # whitespace around the list is JSON's business
        ("archviz", '"source":"m"', '"source":"tensors"', False),
        ("audit", A_NAME, A_NAME.replace('{"dtype":"BF16","shape":[129280,7168],',
                                         '{"shape":[129280,7168],"dtype":"BF16",'), False),  # another key order
        ("audit", A_NAME, A_NAME.replace('{"dtype":"BF16",', '{"dtype": "BF16",'), False),
        ("audit", A_NAME, A_NAME.replace('"shard":"model-00001', '"shard":"model-00002'), True),  # runs split
        ("audit", A_NAME, A_NAME.replace("embed_tokens", "norm"), False),  # a name twice: JSON keeps the last
        ("audit", A_NAME, A_NAME.replace("00001-of", "99999-of"), False),  # no such shard
        ("audit", A_NAME, A_NAME.replace("[129280,7168]", "[129280,07168]"), False),
        ("audit", A_NAME, A_NAME.replace("embed", "emb\\u0065d"), False),
        ("audit", '"model":"deepseek-ai/DeepSeek-V3"', '"model":"deepseek-ai/DeepSeek-V3","format":"archviz-manifest/1"',
         False),
    ],
)
def test_variants_read_as_json_reads_them(which: str, old: str, new: str, fast: bool, audit_slice: bytes,
                                          archviz_slice: bytes) -> None:
    seed = archviz_slice if which == "archviz" else audit_slice
    assert _fast_path(seed) is not None
    raw = _edit(seed, old, new)
    got = _fast_path(raw)
    assert (got is not None) == fast
    slow = _json_path(raw)
    if got is not None:
        _same(got, slow)
    # Through the public entry point (path left at its default), the reading or the error is the JSON path's.
    path_result = _read(raw, "auto")
    if isinstance(slow, CheckpointInventory):
        assert path_result == slow
    else:
        assert path_result == slow


def _small(which: str) -> bytes:
    # a: 8 + 3 + 9 data bytes (F32[2], F4[2,3] packed, I8[3,3]); b: 2 (a BF16 scalar).
    shards = [{"name": "a.safetensors", "file_bytes": 16 + 20, "header_bytes": 16},
              {"name": "b.safetensors", "file_bytes": 8 + 2, "header_bytes": 8}]
    rows = [("x", "F32", [2], 0), ("y.weight", "F4", [2, 3], 0), ("z", "BF16", [], 1), ("w", "I8", [3, 3], 0)]
    if which == "archviz":
        inv = inventory_from_manifest({"format": "archviz-manifest/1", "shards": shards,
                                       "tensors": [list(r) for r in rows]}, source="m")
        return manifest_text(inv).encode()
    for s in shards:
        s["header_format"] = {"metadata": {"format": "pt"}}
    names = ["a.safetensors", "b.safetensors"]
    listed = {n: {"dtype": d, "shape": s, "shard": names[i]} for n, d, s, i in rows}
    return json.dumps({"model": "m", "shards": shards, "tensors": listed}, separators=(",", ":")).encode()


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(b))
        op = rng.randrange(5)
        if op == 0:
            b[i] = rng.choice(b'0123456789,[]{}":\\ \nabFI')
        elif op == 1:
            b[i:i] = rng.choice([b",", b"]", b"[", b'"', b"0", b" ", b"\\n", b'"tensors"', b"1" * 25])
        elif op == 2:
            del b[i : i + rng.randint(1, 8)]
        elif op == 3:
            j = rng.randrange(len(b))
            b[j:j] = b[i : i + rng.randint(1, 40)]
        else:
            src, dst = rng.sample([b"F32", b"BF16", b"I8", b"F4", b"F16"], 2)
            b = bytearray(bytes(b).replace(src, dst, 1))
    return bytes(b)


@pytest.mark.parametrize("which", ["archviz", "audit"])
def test_mutated_manifests_read_alike(which: str) -> None:
    rng = random.Random(7)
    seed = _small(which)
    assert _fast_path(seed) is not None
    taken = 0
    for _ in range(3000):
        raw = _mutate(rng, seed)
        got = _fast_path(raw)
        if got is not None:
            taken += 1
            _same(got, _json_path(raw))
    assert 0 < taken < 3000  # some mutations keep the writers' layout, most do not

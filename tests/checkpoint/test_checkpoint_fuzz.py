"""Fuzzing the header parser: random and mutated headers either parse or raise CheckpointError — nothing else,
never slowly. Through ``parse_header``'s one interface, its fast paths (``path="fast"``: the writers' layout split on
its punctuation, the whole-column checks) must read every header they take as its specification (``path="spec"``:
JSON, entry by entry) reads it, and take exactly the headers the specification accepts."""

from __future__ import annotations

import json
import random
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archviz.checkpoint.header import (
    ParsedShard,
    _canonical_tensors,
    parse_header,
    parse_shard_bytes,
    read_local_shard,
)
from archviz.checkpoint.manifest import manifest_from_bytes
from archviz.checkpoint.records import DTYPE_BITS
from archviz.checkpoint.synth import build_shard_header, load_audit_manifest, shard_tensors
from archviz.errors import CheckpointError

FUZZ = settings(
    max_examples=600,
    deadline=timedelta(seconds=2),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW_S = 1.0  # one parse of a small header taking this long would be a hang

dims = st.one_of(st.integers(0, 9), st.integers(-3, 2**66), st.sampled_from([1.0, True, "2", None]))
shapes = st.one_of(st.lists(dims, max_size=4), st.integers(), st.none(), st.text(max_size=3))
dtypes = st.one_of(st.sampled_from(sorted(DTYPE_BITS)), st.sampled_from(["F12", "f32", "", "BF-16"]), st.integers())
offsets = st.one_of(
    st.lists(st.integers(-4, 200), min_size=2, max_size=2),
    st.lists(st.integers(0, 50), max_size=3),
    st.tuples(st.floats(allow_nan=False), st.integers()).map(list),
    st.none(),
)
entries = st.one_of(
    st.fixed_dictionaries({"dtype": dtypes, "shape": shapes, "data_offsets": offsets}),
    st.dictionaries(st.sampled_from(["dtype", "shape", "data_offsets", "x"]), st.integers(0, 4), max_size=3),
    st.integers(),
    st.lists(st.integers(), max_size=2),
)
metadata = st.one_of(
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), min_size=1, max_size=2),
    st.none(),
    st.integers(),
)


@st.composite
def valid_headers(draw: st.DrawFn) -> tuple[dict, int]:
    """Well-formed headers with consecutive offsets in a random order (incl. zero-size tensors)."""
    names = draw(st.lists(st.text(min_size=1, max_size=6), min_size=0, max_size=8, unique=True))
    order = draw(st.permutations(range(len(names))))
    sizes = {}
    header: dict = {}
    for name in names:
        dtype = draw(st.sampled_from(sorted(DTYPE_BITS)))
        shape = draw(st.lists(st.integers(0, 5), max_size=3))
        numel = 1
        for d in shape:
            numel *= d
        if (numel * DTYPE_BITS[dtype]) % 8:
            shape = [*shape, 8] if numel else shape
            numel *= 8
        sizes[name] = numel * DTYPE_BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape}
    pos = 0
    for i in order:
        name = names[i]
        header[name]["data_offsets"] = [pos, pos + sizes[name]]
        pos += sizes[name]
    return header, pos


def _parse(prefix: bytes, header: bytes, file_bytes: int) -> ParsedShard | None:
    t0 = time.perf_counter()
    try:
        return parse_shard_bytes(prefix, header, file_bytes=file_bytes, shard="s", where="fuzz")
    except CheckpointError as e:
        assert e.message.startswith("fuzz: ")
        return None
    finally:
        assert time.perf_counter() - t0 < SLOW_S


def _read(body: bytes, data_bytes: int, path: str) -> tuple | str | None:
    """``parse_header(body, path=path)``: its reading, its error's line, or None (a fast path not taken)."""
    try:
        return parse_header(body, shard="s", data_bytes=data_bytes, where="fuzz", path=path)  # type: ignore[arg-type]
    except CheckpointError as e:
        return f"error: {e.line()}"


def _paths_agree(body: bytes, data_bytes: int) -> tuple[tuple | str | None, tuple | str]:
    """The fast paths' reading of ``body`` where they take it is the specification's (tensors in the same order,
    metadata), their error its error; what every caller gets is the specification's. Returns both readings."""
    fast = _read(body, data_bytes, "fast")
    spec = _read(body, data_bytes, "spec")
    if fast is not None:
        assert fast == spec, body[:200]
        assert isinstance(fast, str) or list(fast[0]) == list(spec[0]), body[:200]  # type: ignore[index]
    assert _read(body, data_bytes, "auto") == spec, body[:200]
    return fast, spec  # type: ignore[return-value]


def _same_reading(body: bytes, data_bytes: int) -> bool:
    """The paths agree on ``body``; returns whether the writers'-layout path (no JSON decode) took it."""
    _paths_agree(body, data_bytes)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _canonical_tensors(body, text, "s", data_bytes) is not None


def _agree(obj: dict, data_bytes: int) -> None:
    """The fast paths take a header's entries iff the specification accepts them (and read them alike).
    ``json.dumps``'s spaces are not the writers' layout: the whole-column checks decide."""
    body = {k: v for k, v in obj.items() if k != "__metadata__"}
    fast, spec = _paths_agree(json.dumps(body).encode(), data_bytes)
    assert isinstance(fast, tuple) == isinstance(spec, tuple), (obj, data_bytes)


@FUZZ
@given(st.dictionaries(st.text(max_size=5), entries, max_size=6), metadata, st.integers(0, 64), st.booleans())
def test_random_headers(obj: dict, meta: object, data_bytes: int, with_meta: bool) -> None:
    if with_meta:
        obj = {"__metadata__": meta, **obj}
    body = json.dumps(obj).encode()
    _agree(obj, data_bytes)
    _parse(len(body).to_bytes(8, "little"), body, 8 + len(body) + data_bytes)
    _same_reading(json.dumps(obj, separators=(",", ":")).encode(), data_bytes)


@settings(FUZZ, max_examples=300)
@given(valid_headers())
def test_valid_headers_parse_and_round_trip(case: tuple[dict, int]) -> None:
    header, data_bytes = case
    body = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    parsed = _parse(len(body).to_bytes(8, "little"), body, 8 + len(body) + data_bytes)
    assert parsed is not None
    # The writers' layout takes the canonical path unless a name needs escapes.
    escaped = any(c in '"\\' or c < " " for name in header for c in name)
    assert _same_reading(body, data_bytes) == (bool(header) and not escaped)
    assert list(parsed.tensors) == list(header)
    for name, t in parsed.tensors.items():
        assert (t.dtype, list(t.shape), list(t.data_offsets or ())) == (
            header[name]["dtype"],
            header[name]["shape"],
            header[name]["data_offsets"],
        )
    _agree(header, data_bytes)


@settings(FUZZ, max_examples=1000)
@given(st.binary(max_size=300), st.integers(0, 2**64 - 1), st.integers(0, 10**12))
def test_random_bytes(body: bytes, declared: int, file_bytes: int) -> None:
    _parse(declared.to_bytes(8, "little"), body, file_bytes)
    _parse(len(body).to_bytes(8, "little"), body, 8 + len(body) + file_bytes % 64)
    _parse(body[:8], body[8:], len(body))


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(b)) if b else 0
        if op == 0 and b:  # flip a byte
            b[i] = rng.randrange(256)
        elif op == 1:  # insert JSON-ish syntax
            b[i:i] = rng.choice([b"{", b"}", b"[", b"]", b",", b":", b'"', b"-", b"0", b"9" * 25, b"\xff", b"null"])
        elif op == 2 and b:  # delete a run
            del b[i : i + rng.randint(1, 16)]
        elif op == 3 and b:  # nudge a digit
            if chr(b[i]).isdigit():
                b[i] = ord(str(rng.randrange(10)))
        elif op == 4:  # duplicate a run
            j = rng.randrange(len(b) + 1)
            b[j:j] = b[i : i + rng.randint(1, 64)]
        elif op == 5:  # swap dtype codes
            src, dst = rng.sample(sorted(DTYPE_BITS), 2)
            b = bytearray(bytes(b).replace(src.encode(), dst.encode(), 1))
    return bytes(b)


def _seed_headers(v3_manifest_path: Path, minilm: Path | None) -> list[tuple[bytes, int]]:
    """Real headers (prefix + header, file size): a DeepSeek-V3 shard, a small synthetic one, MiniLM's."""
    m = load_audit_manifest(v3_manifest_path)
    groups = shard_tensors(m)
    seeds = []
    for shard in (m["shards"][-1],):  # the MTP shard, ~48 KB of header
        seeds.append((build_shard_header(shard, groups[shard["name"]]), shard["file_bytes"]))
    small = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F4", "shape": [2, 4], "data_offsets": [0, 4]},
        "b": {"dtype": "I8", "shape": [3], "data_offsets": [4, 7]},
    }
    body = json.dumps(small).encode()
    seeds.append((len(body).to_bytes(8, "little") + body, 8 + len(body) + 7))
    if minilm is not None:
        with open(minilm, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            f.seek(0)
            seeds.append((f.read(8 + n), minilm.stat().st_size))
    return seeds


def test_mutated_real_headers(v3_manifest_path: Path, minilm_safetensors: Path) -> None:
    rng = random.Random(20240601)
    seeds = _seed_headers(v3_manifest_path, minilm_safetensors)
    for head, size in seeds:  # the seeds themselves are valid
        assert _parse(head[:8], head[8:], size) is not None
    budget = time.perf_counter() + 12.0
    done = ok = canonical = 0
    counts = [2000, 600, 250]  # small, MiniLM, DeepSeek shard: cost grows with header size
    for (head, size), count in zip(sorted(seeds, key=lambda s: len(s[0])), counts, strict=False):
        for _ in range(count):
            mutated = _mutate(rng, head)
            if rng.random() < 0.8:  # mostly keep the prefix consistent so the JSON/validation layers are reached
                mutated = (len(mutated) - 8).to_bytes(8, "little") + mutated[8:]
            result = _parse(mutated[:8], mutated[8:], size + len(mutated) - len(head))
            ok += result is not None
            canonical += _same_reading(mutated[8:], size - len(head))
            done += 1
            if time.perf_counter() > budget:
                break
    assert done >= 1000
    assert ok < done  # mutations do break headers...
    assert canonical > 0  # ...and some (a digit nudged in a name, say) keep the canonical layout


def test_fuzzed_files_on_disk(tmp_path: Path) -> None:
    """The same through the file reader, with files cut at every length."""
    body = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    full = len(body).to_bytes(8, "little") + body + b"\0" * 8
    path = tmp_path / "f.safetensors"
    for cut in range(len(full) + 1):
        path.write_bytes(full[:cut])
        try:
            read_local_shard(path)
            assert cut == len(full)
        except CheckpointError:
            assert cut < len(full)


@pytest.mark.parametrize("rank", [65, 5000])
def test_long_shapes_take_the_careful_path(rank: int) -> None:
    """Pathological shapes (many huge dims) stop at the first overflow instead of multiplying on."""
    body = json.dumps({"a": {"dtype": "F32", "shape": [2**62] * rank, "data_offsets": [0, 4]}}).encode()
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError, match="2\\*\\*64"):
        parse_header(body, shard="s", data_bytes=4, where="fuzz")
    assert time.perf_counter() - t0 < SLOW_S


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # nested past the recursion limit
        b'{"a":{"dtype":"F32","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,4]}}',  # int past 4300 digits
        b'{"' + b"n" * 200_000 + b'":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}',  # huge name
        b'{"a":{"dtype":"F32","shape":[' + b"1," * 200_000 + b'1],"data_offsets":[0,8]}}',  # huge rank
    ],
    ids=["deep-nesting", "giant-int", "giant-name", "giant-rank"],
)
def test_hostile_headers(body: bytes) -> None:
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError) as info:
        parse_header(body, shard="s", data_bytes=4, where="fuzz")
    assert time.perf_counter() - t0 < SLOW_S
    assert len(info.value.line()) < 400  # messages stay one short line


def test_zero_dim_next_to_huge_dims_is_empty_not_overflow() -> None:
    """Both paths agree: [2**40, 2**40, 0] holds 0 elements."""
    header = {"a": {"dtype": "F32", "shape": [2**40, 2**40, 0], "data_offsets": [0, 0]}}
    _agree(header, 0)
    tensors, _ = parse_header(json.dumps(header).encode(), shard="s", data_bytes=0, where="fuzz")
    assert tensors["a"].numel == 0


@st.composite
def span_layouts(draw: st.DrawFn) -> tuple[dict, int]:
    """Byte ranges near a tiling (shuffled, then nudged: gaps, overlaps, repeats, zero sizes) with matching shapes,
    so the two paths' layout checks (set-based when every size is positive, sorted otherwise) are what decides."""
    sizes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=7))
    order = draw(st.permutations(range(len(sizes))))
    offs: list[list[int]] = [[0, 0] for _ in sizes]
    pos = 0
    for i in order:
        offs[i] = [pos, pos + sizes[i]]
        pos += sizes[i]
    for i, j, delta in draw(st.lists(st.tuples(st.integers(0, len(sizes) - 1), st.integers(0, 1), st.integers(-3, 3)),
                                     max_size=3)):
        offs[i][j] += delta
    data_bytes = pos + draw(st.sampled_from([0, 0, 0, -1, 1]))
    header = {
        f"t{i}": {"dtype": "U8", "shape": [max(e - b, 0)], "data_offsets": [b, e]} for i, (b, e) in enumerate(offs)
    }
    return header, data_bytes


@settings(FUZZ, max_examples=1500)
@given(span_layouts())
def test_span_layouts_agree(case: tuple[dict, int]) -> None:
    _agree(*case)


audit_entries = st.fixed_dictionaries(
    {
        "dtype": st.one_of(st.sampled_from(["BF16", "F4", "F6_E2M3", "I8"]), st.sampled_from(["nope", ""]), st.none()),
        "shape": st.one_of(st.lists(st.one_of(st.integers(0, 5), st.sampled_from([-1, 1.0, True, None])), max_size=3),
                           st.none()),
        "shard": st.one_of(st.sampled_from(["a", "b", "c"]), st.sampled_from(["z", 1]), st.lists(st.none(), max_size=1)),
    }
)


@settings(FUZZ, max_examples=1500)
@given(st.dictionaries(st.text(max_size=3), audit_entries, min_size=1, max_size=8), st.booleans())
def test_audit_paths_agree(listed: dict, sort_by_shard: bool) -> None:
    """A header-audit manifest's fast path builds exactly what its specification (the entry loop) builds, or leaves
    it the decision. ``json.dumps``'s spaces are not the writers' layout: the whole-column checks decide."""
    if sort_by_shard:  # the usual on-disk order: each shard's tensors together
        listed = dict(sorted(listed.items(), key=lambda kv: repr(kv[1]["shard"])))
    shards = [{"name": s, "file_bytes": 1000, "header_bytes": 8} for s in ("a", "b", "c")]
    raw = json.dumps({"shards": shards, "tensors": listed}).encode()
    readings = {}
    for path in ("fast", "spec", "auto"):
        try:
            readings[path] = manifest_from_bytes(raw, source="fuzz", path=path)
        except CheckpointError as e:
            readings[path] = e.line()
    fast, slow = readings["fast"], readings["spec"]
    assert (fast is None) == isinstance(slow, str) and readings["auto"] == slow
    if fast is not None:
        assert fast == slow and list(fast.tensors) == list(slow.tensors)
        assert all(type(d) is int for t in fast.tensors.values() for d in t.shape)


_E = '{"dtype":"F32","shape":[2],"data_offsets":[%d,%d]}'


@pytest.mark.parametrize(
    ("body", "canonical"),
    [
        ('{"a":%s,"b":%s}' % (_E % (0, 8), _E % (8, 16)), True),
        ('{"__metadata__":{"format":"pt"},"a":%s}' % (_E % (0, 8)), True),
        ('{"__metadata__":null,"a":%s}' % (_E % (0, 8)), True),
        ('  {"a":%s}        ' % (_E % (0, 8)), True),  # writers pad the header with spaces
        ('{"b":%s,"a":%s}' % (_E % (8, 16), _E % (0, 8)), True),  # data order differs from header order
        ('{"a,b:{c}":%s}' % (_E % (0, 8)), True),  # punctuation inside a name
        ('{"a\\"b":%s}' % (_E % (0, 8)), False),  # escapes: the JSON path
        ('{"\\u0061":%s}' % (_E % (0, 8)), False),
        ('{"a": %s}' % (_E % (0, 8)), False),  # whitespace inside
        ('{"a":{"shape":[2],"dtype":"F32","data_offsets":[0,8]}}', False),  # another key order
        ('{"a":%s,"__metadata__":{"format":"pt"}}' % (_E % (0, 8)), False),  # metadata last
        ('{"a":%s,"a":%s}' % (_E % (0, 8), _E % (8, 16)), False),  # a name twice
        ('{"a":%s,"b":%s}' % (_E % (0, 8), _E % (0, 8)), False),  # overlap
        ('{"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}', False),  # not JSON: leading zero
        ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[00,8]}}', False),
        ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}}', False),
        ('{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', False),
        ('{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', False),
        ('{"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}}', False),
        ('{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', False),  # half a byte left over
        ('{"a":{"dtype":"F4","shape":[3],"data_offsets":[1,0]}}', False),
        ('{"a":{"dtype":"F32","shape":[%s,0],"data_offsets":[0,0]}}' % ("9" * 30), False),  # empty, dim past 2**64
        ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,%s]}}' % ("9" * 5000), False),
        ('{"__metadata__":%s}' % (_E % (0, 8)), False),  # a tensor called __metadata__
        ('{"__metadata__":{"n":1},"a":%s}' % (_E % (0, 8)), False),  # metadata values must be strings
        ('{"a\x01":%s}' % (_E % (0, 8)), False),  # a raw control character: not JSON
        ('{"a":%s,,"b":%s}' % (_E % (0, 8), _E % (8, 16)), False),
        ('{"a":%s}}' % (_E % (0, 8)), False),
        ('["a":%s}' % (_E % (0, 8)), False),
    ],
)
def test_canonical_path_reads_what_json_reads(body: str, canonical: bool) -> None:
    """Headers in the writers' layout skip the JSON parse; any other text takes it. Either way the reading (or the
    error) is the one ``json.loads`` gives."""
    raw = body.encode()
    data_bytes = 16 if '"b"' in body else 8
    assert (_canonical_tensors(raw, body, "s", data_bytes) is not None) == canonical
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    got = _read(raw, data_bytes, "auto")
    if obj is None or not isinstance(obj, dict):
        assert isinstance(got, str)
        return
    meta = obj.pop("__metadata__", None) or {}
    strings = isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())
    expected = _read(raw, data_bytes, "spec") if strings else None
    if not isinstance(expected, tuple):
        assert isinstance(got, str)
    else:
        assert got == expected == (expected[0], meta)
    _paths_agree(raw, data_bytes)

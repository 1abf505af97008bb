"""GGUF headers (llama.cpp's format), read by archviz itself with every count and length bounded first.

A GGUF file (versions 2 and 3; little- or big-endian, told apart by the version field) is::

    "GGUF" <u32 version> <u64 tensor count> <u64 key-value count>
    key-values: <string key> <u32 value type> <value>            (string = <u64 length> <UTF-8 bytes>;
                                                                  array = <u32 element type> <u64 count> <elements>)
    tensor infos: <string name> <u32 n_dims> <u64 dim> * n_dims <u32 GGML type> <u64 offset>
    padding to ``general.alignment`` (default 32), then the data region

Dims are logical element counts, innermost first (``ne[0]``); archviz lists the shape in PyTorch's order (reversed).
Offsets are relative to the data region. Only the header is read: the data region never is.

``gguf``'s own ``GGUFReader`` memory-maps the whole file and trusts its counts (a count of 2**63 is an allocation it
attempts); this reader takes each count and length only after checking that the bytes it claims are left in the
file and within :data:`MAX_HEADER_BYTES`, nests arrays at most :data:`MAX_ARRAY_DEPTH` deep, keeps the elements of
at most :data:`KEEP_ARRAY` per array (a vocabulary of 150,000 tokens is listed as its type and length), and refuses a
type id, a rank or an element count ggml would refuse. Every failure is one :class:`CheckpointError`.
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Callable
from typing import Any

from archviz.errors import CheckpointError
from archviz.files.safeio import MiB, open_regular

from .ggml_types import type_names
from .assemble import assemble
from .header import ParsedShard
from .records import DTYPE_BITS, CheckpointInventory, ShardInfo, TensorInfo

__all__ = ["GGUF_MAGIC", "KEEP_ARRAY", "MAX_ARRAY_DEPTH", "MAX_HEADER_BYTES", "gguf_inventory", "open_gguf", "parse_gguf",
           "read_local_gguf"]

GGUF_MAGIC = b"GGUF"
#: Largest header read (key-values and tensor table): real ones are a few MiB (a 150k-token vocabulary and merges).
MAX_HEADER_BYTES = 256 * MiB
#: Longest string accepted (a chat template is a few KiB).
MAX_STRING_BYTES = 16 * MiB
#: Arrays nested deeper than this are refused (real files nest none).
MAX_ARRAY_DEPTH = 3
#: Arrays with more elements are kept as ``{"type", "length"}`` only.
KEEP_ARRAY = 64
#: Most key-values, tensors, and strings or arrays in arrays (over the whole header) read (real files: ~50
#: key-values, < 5,000 tensors, a vocabulary and its merges < 1,000,000 strings); each costs a microsecond or a few,
#: so no header takes more than seconds.
MAX_KEY_VALUES = 100_000
MAX_TENSORS = 1_000_000
MAX_ARRAY_ITEMS = 4_000_000
#: ggml's GGML_MAX_DIMS.
MAX_DIMS = 4
#: The first read; each next one is twice the last, up to the reader's chunk: a header of H bytes costs about
#: log2(H / 64 KiB) reads and at most H + 64 KiB bytes past its end.
_FIRST_CHUNK = 64 << 10
_MAX_NUMEL = 2**63 - 1  # ggml counts elements in int64
_HINT = "the file is damaged or not a GGUF file; download it again"

# value type id -> (struct code, size) for the fixed-size types
_SCALARS = {0: ("B", 1), 1: ("b", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4), 6: ("f", 4),
            7: ("?", 1), 10: ("Q", 8), 11: ("q", 8), 12: ("d", 8)}
_STRING, _ARRAY = 8, 9
_TYPE_WORDS = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32", 7: "bool",
               8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64"}

ReadAt = Callable[[int, int], bytes]


def _bad(where: str, what: str) -> CheckpointError:
    return CheckpointError(f"{where}: {what}", hint=_HINT)


class _Cursor:
    """Reads the header front to back through ``read_at(offset, n)`` in growing chunks; refuses any read that would run
    past the end of the file or past :data:`MAX_HEADER_BYTES` before asking for its bytes."""

    def __init__(self, read_at: ReadAt, file_bytes: int, where: str, chunk: int) -> None:
        self.read_at, self.file_bytes, self.where = read_at, file_bytes, where
        self.chunk, self.max_chunk = min(chunk, _FIRST_CHUNK), chunk
        self.pos = 0
        self.items = 0  # strings and arrays read in arrays so far
        self.buf = b""
        self.buf_at = 0
        self.order = "<"

    def left(self) -> int:
        return min(self.file_bytes, MAX_HEADER_BYTES) - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.left():
            if self.pos + n > self.file_bytes:
                raise _bad(self.where, f"{what} at byte {self.pos:,} runs past the end of the "
                                       f"{self.file_bytes:,}-byte file (truncated or damaged)")
            raise _bad(self.where, f"{what} at byte {self.pos:,} takes the header past archviz's "
                                   f"{MAX_HEADER_BYTES:,}-byte limit")
        start = self.pos - self.buf_at
        if start + n > len(self.buf):
            want = min(max(n, self.chunk), self.file_bytes - self.pos)
            got = self.read_at(self.pos, want)
            self.chunk = min(2 * self.chunk, self.max_chunk)  # reads past the header's end: at most what came before
            if len(got) < n:
                raise _bad(self.where, f"{what} at byte {self.pos:,}: the file ended early (it changed while read?)")
            self.buf, self.buf_at, start = got, self.pos, 0
        self.pos += n
        return self.buf[start:start + n]

    def unpack(self, code: str, size: int, what: str) -> Any:
        return struct.unpack(self.order + code, self.take(size, what))[0]

    def u32(self, what: str) -> int:
        return self.unpack("I", 4, what)

    def u64(self, what: str) -> int:
        return self.unpack("Q", 8, what)

    def skip_strings(self, count: int, what: str) -> None:
        """Step over ``count`` strings (a vocabulary): in the buffer without a call each where they lie in it whole,
        else one by one through :meth:`string`; the same checks either way."""
        length = struct.Struct(self.order + "Q").unpack_from
        end = min(self.file_bytes, MAX_HEADER_BYTES)
        for i in range(count):
            off = self.pos - self.buf_at
            buf = self.buf
            if off + 8 <= len(buf):
                n = length(buf, off)[0]
                if n <= MAX_STRING_BYTES and off + 8 + n <= len(buf) and self.pos + 8 + n <= end:
                    self.pos += 8 + n
                    continue
            self.string(f"{what}[{i}]")

    def string(self, what: str, limit: int = MAX_STRING_BYTES) -> bytes:
        n = self.u64(f"{what}'s length")
        if n > limit:
            raise _bad(self.where, f"{what} at byte {self.pos - 8:,} claims {n:,} bytes (over the {limit:,}-byte "
                                   "limit)")
        return self.take(n, what)


def _text(raw: bytes, where: str, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(where, f"{what} is not UTF-8 (byte {e.start})") from None


def _json_safe(v: Any) -> Any:
    """A NaN or infinite float as its name (``"nan"``, ``"inf"``): the key-values go into JSON (a manifest, the JSON
    output)."""
    return v if type(v) is not float or math.isfinite(v) else str(v)


def _value(cur: _Cursor, vtype: int, what: str, depth: int) -> Any:
    scalar = _SCALARS.get(vtype)
    if scalar is not None:
        return _json_safe(cur.unpack(scalar[0], scalar[1], what))
    if vtype == _STRING:
        return cur.string(what).decode("utf-8", errors="replace")
    if vtype != _ARRAY:
        raise _bad(cur.where, f"{what}: unknown value type {vtype}")
    if depth >= MAX_ARRAY_DEPTH:
        raise _bad(cur.where, f"{what}: arrays nested more than {MAX_ARRAY_DEPTH} deep")
    etype = cur.u32(f"{what}'s element type")
    count = cur.u64(f"{what}'s length")
    least = _SCALARS[etype][1] if etype in _SCALARS else 8 if etype in (_STRING, _ARRAY) else None
    if least is None:
        raise _bad(cur.where, f"{what}: unknown array element type {etype}")
    if count * least > cur.left():
        raise _bad(cur.where, f"{what}: an array of {count:,} {_TYPE_WORDS[etype]}s runs past the end of the header")
    if etype not in _SCALARS:
        cur.items += count
        if cur.items > MAX_ARRAY_ITEMS:
            raise _bad(cur.where, f"{what}: an array of {count:,} {_TYPE_WORDS[etype]}s takes the header past "
                                  f"{MAX_ARRAY_ITEMS:,} strings and arrays in arrays (archviz's limit)")
    if etype in _SCALARS:
        raw = cur.take(count * least, what)
        if count > KEEP_ARRAY:
            return {"type": _TYPE_WORDS[etype], "length": count}
        return list(map(_json_safe, struct.unpack(f"{cur.order}{count}{_SCALARS[etype][0]}", raw)))
    if count > KEEP_ARRAY and etype == _STRING:
        cur.skip_strings(count, what)
        return {"type": "string", "length": count}
    items = [_value(cur, etype, f"{what}[{i}]", depth + 1) for i in range(count)]
    if count > KEEP_ARRAY:
        return {"type": _TYPE_WORDS[etype], "length": count}
    return items


def _key_values(cur: _Cursor, count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in range(count):
        key = _text(cur.string(f"key {i}", 65_536), cur.where, f"key {i}")
        if key in out:
            raise _bad(cur.where, f"key {key!r} is given twice")
        out[key] = _value(cur, cur.u32(f"key {key!r}'s type"), f"key {key!r}", 0)
    return out


def _tensor(cur: _Cursor, i: int, names: dict[int, str]) -> tuple[str, str, tuple[int, ...], int, int]:
    """(name, type, shape in PyTorch's order, offset, bytes) of the ``i``-th tensor info."""
    name = _text(cur.string(f"tensor {i}'s name", 65_536), cur.where, f"tensor {i}'s name")
    n_dims = cur.u32(f"tensor {name!r}'s rank")
    if n_dims > MAX_DIMS:
        raise _bad(cur.where, f"tensor {name!r}: rank {n_dims} (ggml allows at most {MAX_DIMS})")
    dims = struct.unpack(f"{cur.order}{n_dims}Q", cur.take(8 * n_dims, f"tensor {name!r}'s dims"))
    numel = 1
    for d in dims:
        numel *= d
        if d > _MAX_NUMEL or numel > _MAX_NUMEL:
            raise _bad(cur.where, f"tensor {name!r}: dims {list(dims)} hold more than 2**63 - 1 elements")
    type_id = cur.u32(f"tensor {name!r}'s type")
    dtype = names.get(type_id)
    if dtype is None:
        raise CheckpointError(f"{cur.where}: tensor {name!r}: unknown GGML type id {type_id}",
                              hint="a newer GGUF type needs a newer gguf package (pip install -U gguf)")
    offset = cur.u64(f"tensor {name!r}'s offset")
    if dtype in DTYPE_BITS:
        nbytes = numel * DTYPE_BITS[dtype] // 8
    else:
        from .ggml_types import block_of

        block, size = block_of(dtype) or (1, 0)
        if n_dims and dims[0] % block:
            raise _bad(cur.where, f"tensor {name!r}: {dims[0]} values per row is not a whole number of {dtype} "
                                  f"blocks of {block}")
        nbytes = numel // block * size
    return name, dtype, tuple(reversed(dims)), offset, nbytes


def _layout(rows: list[tuple[str, str, tuple[int, ...], int, int]], data_bytes: int, align: int,
            where: str) -> None:
    """Offsets aligned, inside the data region, not overlapping."""
    for name, _, _, offset, nbytes in rows:
        if offset % align:
            raise _bad(where, f"tensor {name!r}: offset {offset:,} is not a multiple of the alignment {align}")
        if offset + nbytes > data_bytes:
            raise _bad(where, f"tensor {name!r}: bytes {offset:,}..{offset + nbytes:,} run past the "
                              f"{data_bytes:,}-byte data region")
    end, prev = 0, ""
    for name, _, _, offset, nbytes in sorted(rows, key=lambda r: (r[3], r[4])):
        if offset < end:
            raise _bad(where, f"tensors {prev!r} and {name!r} overlap (offset {offset:,} < {end:,})")
        end, prev = offset + nbytes, name


def parse_gguf(read_at: ReadAt, file_bytes: int, *, shard: str, where: str, chunk: int = MiB
               ) -> tuple[ParsedShard, dict[str, Any]]:
    """The tensor table and key-values of one GGUF file read through ``read_at(offset, n)``; the data region is never
    asked for. Returns the shard (tensors in header order, data offsets relative to the data region) and the
    key-values (long arrays as ``{"type", "length"}``)."""
    cur = _Cursor(read_at, file_bytes, where, chunk)
    if cur.take(4, "the magic") != GGUF_MAGIC:
        raise CheckpointError(f"{where}: not a GGUF file (it does not begin with 'GGUF')", hint=_HINT)
    raw = cur.take(4, "the version")
    version = struct.unpack("<I", raw)[0]
    if version & 0xFFFF == 0:  # a big-endian file read little-endian: the version's bytes are swapped
        cur.order, version = ">", struct.unpack(">I", raw)[0]
    if version not in (2, 3):
        raise CheckpointError(f"{where}: GGUF version {version} is not read (archviz reads versions 2 and 3)",
                              hint="convert it again with a current llama.cpp (gguf version 3)")
    n_tensors = cur.u64("the tensor count")
    n_kv = cur.u64("the key-value count")
    for count, least, most, what in ((n_kv, 13, MAX_KEY_VALUES, "key-values"), (n_tensors, 24, MAX_TENSORS,
                                                                                 "tensors")):
        if count * least > cur.left():
            raise _bad(where, f"header claims {count:,} {what}, more than its {file_bytes:,} bytes can hold")
        if count > most:
            raise _bad(where, f"header claims {count:,} {what} (archviz reads at most {most:,})")
    kv = _key_values(cur, n_kv)
    names = type_names()
    rows = [_tensor(cur, i, names) for i in range(n_tensors)]
    align = kv.get("general.alignment", 32)
    if type(align) is not int or align <= 0 or align & (align - 1):
        raise _bad(where, f"general.alignment {align!r} is not a power of two")
    data_at = -(-cur.pos // align) * align
    data_bytes = file_bytes - data_at
    if data_bytes < 0:
        raise _bad(where, f"the data region would begin at byte {data_at:,}, past the end of the file")
    _layout(rows, data_bytes, align, where)
    tensors: dict[str, TensorInfo] = {}
    for name, dtype, shape, offset, nbytes in rows:
        if name in tensors:
            raise _bad(where, f"tensor {name!r} is listed twice")
        tensors[name] = TensorInfo(name, dtype, shape, shard, (offset, offset + nbytes))
    return ParsedShard(ShardInfo(shard, file_bytes, data_at), tensors), kv


def read_local_gguf(path: str | os.PathLike[str], *, shard: str | None = None) -> tuple[ParsedShard, dict[str, Any]]:
    """One local GGUF file's header (reads of 1 MiB from its start, as far as the tensor table goes)."""
    where = os.fspath(path)
    with open_regular(where, what=".gguf", error=CheckpointError) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        return parse_gguf(lambda at, n: os.pread(fd, n, at), size, shard=shard or os.path.basename(where),
                          where=where)

_SPLIT = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def _split_int(kv: dict[str, Any], key: str, where: str) -> int | None:
    v = kv.get(key)
    if v is not None and (type(v) is not int or v < 0):
        raise _bad(where, f"{key} {v!r} is not a count")
    return v


Reader = Callable[[str], tuple[ParsedShard, dict[str, Any]]]


def open_gguf(path: str | os.PathLike[str], *, progress: Any = None) -> CheckpointInventory:
    """Inventory of a local GGUF file, or of all the files of a split GGUF when ``path`` is one of them."""
    where = os.fspath(path)
    folder, name = os.path.split(where)

    def read(n: str) -> tuple[ParsedShard, dict[str, Any]]:
        return read_local_gguf(os.path.join(folder, n), shard=n)

    return gguf_inventory(name, read, lambda n: os.path.lexists(os.path.join(folder, n)), where=where,
                          source=where, progress=progress)


def gguf_inventory(name: str, read: Reader, exists: Callable[[str], bool], *, where: str, source: str,
                   progress: Any = None, revision: str | None = None, metadata: dict[str, Any] | None = None
                   ) -> CheckpointInventory:
    """Inventory of the GGUF file ``name`` (``read(name)`` gives its header), or of every file of its split when it
    is one (``name-00001-of-00003.gguf`` ... as llama.cpp's ``gguf-split`` writes them, each with ``split.no``,
    ``split.count``, the first with ``split.tensors.count``; ``exists(name)`` says whether a sibling is there).
    Tensors carry GGML type names (``Q4_K``, ``F16``, ...) and logical shapes in PyTorch's order;
    ``metadata["gguf"]`` holds the first file's key-values."""
    first, kv = read(name)
    count = _split_int(kv, "split.count", where) or 1
    m = _SPLIT.match(name)
    if count <= 1:
        parsed, kvs = [first], [kv]
    else:
        if m is None or int(m["count"]) != count:
            raise CheckpointError(f"{where}: split.count is {count} but the file is not named "
                                  f"<name>-0000N-of-{count:05d}.gguf", hint="pass the split files under their own names")
        parsed, kvs = [], []
        for i in range(1, count + 1):
            part = f"{m['stem']}-{i:05d}-of-{count:05d}.gguf"
            if not exists(part):
                raise CheckpointError(f"{where}: split file {part!r} is missing",
                                      hint="download every split file into one folder")
            shard, part_kv = (first, kv) if part == name else read(part)
            if _split_int(part_kv, "split.no", part) != i - 1 or _split_int(part_kv, "split.count", part) != count:
                raise _bad(f"{where}: {part}", f"split.no/split.count say {part_kv.get('split.no')!r}/"
                                               f"{part_kv.get('split.count')!r}, not {i - 1}/{count} as its name does")
            parsed.append(shard)
            kvs.append(part_kv)
            if progress is not None:
                progress(i, count, part)
    inv = assemble(parsed, source=source, revision=revision,
                   metadata={**(metadata or {}), "format": "gguf", "gguf": kvs[0]})
    want = _split_int(kvs[0], "split.tensors.count", where)
    if want is not None and want != len(inv.tensors):
        raise _bad(where, f"split.tensors.count is {want:,} but the files hold {len(inv.tensors):,} tensors")
    return inv

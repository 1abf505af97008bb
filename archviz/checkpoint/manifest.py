"""Header-only manifests: a checkpoint's tensor list without its data, small enough to commit.

Two formats are read (JSON, plain or gzip'd; gzip is recognised by its magic bytes, not the name). Both are
described in ``FORMATS.md`` next to this file.

**archviz-manifest/1** (written by :func:`write_manifest`)::

    {"format":"archviz-manifest/1",
    "source":"<what was opened>",
    "revision":"<commit>" | null,
    "metadata":{...},
    "shards":[
    {"name":"model-00001-of-00002.safetensors","file_bytes":N,"header_bytes":N,"header_sha256":"<hex>"|null,"metadata":{...}},
    ...],
    "tensors":[
    ["<name>","<dtype>",[<shape>],<shard index>],
    ["<name>","<dtype>",[<shape>],<shard index>,<begin>|null,<end>|null],
    ...]}

Keys in that order, one shard or tensor per line, tensors in on-disk order, ASCII only, compact separators,
gzip with no name and mtime 0 — so the same inventory always gives the same bytes. A 4-item tensor row's data
starts where the previous tensor of the same shard ends (0 for a shard's first); a 6-item row states its
offsets (``null, null`` when unknown).

**header-audit** (the lists under ``shared/checkpoints/*/manifest.json.gz``)::

    {"model":"owner/name","revision":"<commit>","source":"<provenance>",
     "shards":[{"name","file_bytes","header_bytes" (prefix included),"header_sha256" (prefix + header),
                "header_format":{"sortedByDtypeThenName":bool,"padded8":bool,"metadata":{...}|null}}, ...],
     "tensors":{"<name>":{"dtype","shape","shard"}, ...}}

Tensors are in on-disk order; within a shard the data is laid out consecutively from offset 0 in the listed
order, so :class:`TensorInfo.data_offsets` are derived (and left ``None`` for a shard whose sizes do not add up
to ``file_bytes - header_bytes``).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
from collections.abc import Mapping
from itertools import accumulate, chain, compress, repeat
from math import prod
from operator import and_, is_not, itemgetter, mul, rshift
from typing import Any, Literal

from archviz.errors import CheckpointError
from archviz.records.recordcheck import fail, refused_as, want_int, want_list, want_str, want_table
from archviz.files.outputs import write_file
from archviz.files.safeio import MiB, gunzip_bounded, read_regular
from archviz.files.safejson import check_text, loads as bounded_loads

from .header import JSON_SPACE, column_kinds, split_entries
from .records import DTYPE_BITS, CheckpointInventory, ShardInfo, TensorInfo, dtype_nbytes, known_dtype, stored_problem

__all__ = [
    "ARCHVIZ_MANIFEST_FORMAT",
    "IndexNotManifest",
    "inventory_from_manifest",
    "manifest_from_bytes",
    "load_json_file",
    "read_manifest",
    "write_manifest",
]

#: Format tag of the manifests archviz writes.
ARCHVIZ_MANIFEST_FORMAT = "archviz-manifest/1"
_FORMAT_PREFIX = "archviz-manifest/"
_GZIP_MAGIC = b"\x1f\x8b"
#: Largest manifest read (on disk, and once gunzipped): DeepSeek-V3's 91,991 tensors take about 8 MB of JSON.
MAX_MANIFEST_BYTES = 256 * MiB
# Largest element count a shape may describe (the safetensors limit), and so its largest dimension.
_MAX_NUMEL = 2**64 - 1


def read_json_bytes(path: str | os.PathLike[str]) -> bytes:
    """A JSON file's bytes, gunzipped first when it starts with the gzip magic bytes."""
    where = os.fspath(path)
    # a regular file only, of bounded size, inflated to a bounded size (a FIFO, /dev/zero, a gzip bomb: refused)
    raw = read_regular(where, max_bytes=MAX_MANIFEST_BYTES, what="manifest", error=CheckpointError)
    if raw[:2] == _GZIP_MAGIC:
        raw = gunzip_bounded(raw, max_bytes=MAX_MANIFEST_BYTES, where=where, what="manifest", error=CheckpointError)
    return raw


def decode_json_text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{where}: not valid UTF-8 (byte {e.start})", hint="copy the file again") from None


def parse_json_text(text: str, where: str) -> Any:
    """JSON within bounds (nesting, integer size, no lone surrogates; see ``archviz.files.safejson``)."""
    return bounded_loads(text, where=where, error=CheckpointError, hint="copy the file again")


def load_json_file(path: str | os.PathLike[str]) -> Any:
    """Load a JSON file, gunzipping it first when it starts with the gzip magic bytes."""
    where = os.fspath(path)
    return parse_json_text(decode_json_text(read_json_bytes(where), where), where)


def _bad(where: str, what: str) -> CheckpointError:
    return CheckpointError(f"{where}: {what}", hint="the manifest is damaged; regenerate or copy it again")


class IndexNotManifest(CheckpointError):
    """The JSON is a checkpoint's index (it has a ``weight_map``), not a manifest: open it as an index."""


def _int(v: Any) -> bool:
    return type(v) is int and v >= 0


def _check_shape(where: str, name: str, dtype: Any, shape: Any) -> tuple[int, ...]:
    if type(dtype) is not str or not known_dtype(dtype):
        raise CheckpointError(
            f"{where}: tensor {name!r}: unknown dtype {dtype!r}", hint=f"known dtypes: {', '.join(DTYPE_BITS)}, GGML's"
        )
    if type(shape) is not list or not all(_int(d) and d <= _MAX_NUMEL for d in shape):
        raise _bad(where, f"tensor {name!r}: shape {_short(shape)} must be a list of non-negative ints below 2**64")
    if _numel_over(shape):
        raise _bad(where, f"tensor {name!r}: shape {_short(shape)} has more than 2**64 elements")
    if (problem := stored_problem(dtype, shape)) is not None:
        raise _bad(where, f"tensor {name!r}: {problem}")
    return tuple(shape)


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _numel_over(shape: list[int]) -> bool:
    """Whether the shape (non-negative ints below 2**64) has more than 2**64 - 1 elements; stops at the first
    overflow, so a shape of 500,000 huge dims costs no bignum product."""
    if 0 in shape:
        return False
    n = 1
    for d in shape:
        n *= d
        if n > _MAX_NUMEL:
            return True
    return False


_FIRST = itemgetter(0)


class _Shapes:
    """Checked (dtype, shape) pairs, remembered: a checkpoint has few distinct ones (V3: 91,991 tensors, a few
    hundred pairs), so each is validated once and every tensor of it shares one shape tuple.

    The key is the shape's ``str`` (``[2048, 7168]``), which keeps ``1``, ``1.0`` and ``True`` apart."""

    __slots__ = ("where", "seen")

    def __init__(self, where: str) -> None:
        self.where = where
        self.seen: dict[tuple[Any, str], tuple[tuple[int, ...], int]] = {}

    def __call__(self, name: str, dtype: Any, shape: Any) -> tuple[tuple[int, ...], int]:
        """(shape tuple, data bytes) of a checked pair."""
        if type(dtype) is str and type(shape) is list:
            key = (dtype, str(shape))
            hit = self.seen.get(key)
            if hit is not None:
                return hit
        else:
            key = None
        t_shape = _check_shape(self.where, name, dtype, shape)
        out = (t_shape, dtype_nbytes(dtype, math.prod(t_shape)))
        if key is not None:
            self.seen[key] = out
        return out


def _check_shards(where: str, shards: Any, *, audit: bool) -> list[ShardInfo]:
    """The shard list, each field's type checked (archviz.records.recordcheck): a fault names the file and the field."""
    with refused_as(lambda m: _bad(where, m)):
        return _shards(where, shards, audit)


def _shards(where: str, shards: Any, audit: bool) -> list[ShardInfo]:
    out: list[ShardInfo] = []
    seen: set[str] = set()
    for i, s in enumerate(want_list("shards", shards, nonempty=True)):
        at = f"shards[{i}]"
        want_table(at, s, what="an object")
        name = want_str(f"{at}.name", s.get("name"), nonempty=True)
        fb = want_int(f"{at}.file_bytes", s.get("file_bytes"), minimum=0)
        hb = want_int(f"{at}.header_bytes", s.get("header_bytes"), minimum=8)
        if hb > fb:
            fail(f"{at}.header_bytes", f"at most file_bytes ({fb})", hb)
        if name in seen:
            raise _bad(where, f"shard {name!r} is listed twice")
        seen.add(name)
        sha = want_str(f"{at}.header_sha256", s.get("header_sha256"), optional=True)
        if audit:
            fmt = s.get("header_format")
            meta = fmt.get("metadata") if isinstance(fmt, dict) else None
        else:
            meta = s.get("metadata")
        for k, v in want_table(f"{at}.metadata", meta or {}, what="an object of strings").items():
            want_str(f"{at}.metadata.{k}", v)
        out.append(ShardInfo(name, fb, hb, sha, meta or {}))
    return out


def _check_coverage(where: str, shard: ShardInfo, spans: list[tuple[int, int, str]], *, complete: bool) -> None:
    """Offsets must not overlap nor pass the data region; with every tensor's offsets known, must cover it."""
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        if begin < pos or (complete and begin != pos):
            what = "overlaps the tensor before it" if begin < pos else f"leaves bytes {pos}..{begin} unused"
            raise _bad(where, f"shard {shard.name!r}: tensor {name!r} {what}")
        pos = end
    if pos > shard.data_bytes or (complete and pos != shard.data_bytes):
        raise _bad(where, f"shard {shard.name!r}: tensors cover {pos:,} of {shard.data_bytes:,} data bytes")


def _archviz_rows_fast(rows: list[Any], shards: list[ShardInfo], where: str) -> dict[str, TensorInfo] | None:
    """The common case at once: 4-item rows (consecutive layout) filling every shard exactly. ``None`` otherwise,
    and the row loop decides (and names any fault)."""
    if not rows or set(map(type, rows)) != {list} or set(map(len, rows)) != {4}:
        return None
    names, dtypes, shapes, sis = zip(*rows)
    n = len(shards)
    try:
        if (set(map(type, names)) != {str} or set(map(type, shapes)) != {list} or set(map(type, sis)) != {int}
                or min(sis) < 0 or max(sis) >= n or len(set(names)) != len(names)):
            return None
        checked = _Shapes(where)
        keys = list(map(str, shapes))
        sig: dict[tuple[Any, str], tuple[tuple[int, ...], int]] = {}
        for dtype, key, shape in zip(dtypes, keys, shapes):
            if (dtype, key) not in sig:
                sig[(dtype, key)] = checked("?", dtype, shape)
    except (CheckpointError, TypeError):
        return None
    pairs = list(map(sig.__getitem__, zip(dtypes, keys)))
    cursor = [0] * n
    offsets = []
    append = offsets.append
    for si, (_, size) in zip(sis, pairs):
        begin = cursor[si]
        end = cursor[si] = begin + size
        append((begin, end))
    if any(c != sh.data_bytes for c, sh in zip(cursor, shards)):
        return None
    shard_names = [sh.name for sh in shards]
    infos = map(TensorInfo, names, dtypes, map(_FIRST, pairs), map(shard_names.__getitem__, sis), offsets)
    return dict(zip(names, infos))


def _from_archviz(obj: dict[str, Any], source: str, where: str, path: str) -> CheckpointInventory | None:
    shards = _check_shards(where, obj.get("shards"), audit=False)
    rows = obj.get("tensors")
    with refused_as(lambda m: _bad(where, m)):
        want_list("tensors", rows)
    fast = None if path == "spec" else _archviz_rows_fast(rows, shards, where)
    if fast is not None or path == "fast":
        return None if fast is None else _archviz_inventory(obj, source, where, shards, fast)
    tensors: dict[str, TensorInfo] = {}
    spans: list[list[tuple[int, int, str]]] = [[] for _ in shards]
    cursor: list[int | None] = [0] * len(shards)
    partial = [False] * len(shards)
    checked = _Shapes(where)
    n_shards = len(shards)
    shard_names = [sh.name for sh in shards]
    for i, row in enumerate(rows):
        if type(row) is not list or len(row) not in (4, 6) or type(row[0]) is not str:
            raise _bad(where, f"tensors[{i}] must be [name, dtype, shape, shard index(, begin, end)]")
        name, dtype, shape, si = row[:4]
        t_shape, size = checked(name, dtype, shape)
        if type(si) is not int or not 0 <= si < n_shards:
            raise _bad(where, f"tensor {name!r}: shard index {si!r} is not in 0..{n_shards - 1}")
        if name in tensors:
            raise CheckpointError(
                f"{where}: tensor {name!r} appears in two shards, {tensors[name].shard!r} and {shard_names[si]!r}",
                hint="the manifest is damaged; regenerate it",
            )
        if len(row) == 4:
            begin = cursor[si]
            if begin is None:
                raise _bad(where, f"tensor {name!r}: no offsets, and the tensor before it in its shard has none")
            end = begin + size
        else:
            begin, end = row[4], row[5]
        offsets: tuple[int, int] | None = None
        if begin is not None or end is not None:
            if len(row) == 6 and not (_int(begin) and _int(end) and begin <= end):
                raise _bad(where, f"tensor {name!r}: offsets {begin!r}, {end!r} must be ints with begin <= end")
            if end - begin != size:
                raise _bad(where, f"tensor {name!r}: offsets span {end - begin} bytes, {dtype}{shape!r} needs {size}")
            offsets = (begin, end)
            spans[si].append((begin, end, name))
        else:
            partial[si] = True
        cursor[si] = end if offsets is not None else None
        tensors[name] = TensorInfo(name, dtype, t_shape, shard_names[si], offsets)
    for shard, sp, part in zip(shards, spans, partial, strict=True):
        _check_coverage(where, shard, sp, complete=not part)
    return _archviz_inventory(obj, source, where, shards, tensors)


def _archviz_inventory(obj: dict[str, Any], source: str, where: str, shards: list[ShardInfo],
                       tensors: dict[str, TensorInfo]) -> CheckpointInventory:
    meta = obj.get("metadata") or {}
    with refused_as(lambda m: _bad(where, m)):
        want_table("metadata", meta, what="an object")
    meta = {k: v for k, v in meta.items() if k not in ("manifest", "manifest_source")}
    meta["manifest"] = ARCHVIZ_MANIFEST_FORMAT
    if isinstance(obj.get("source"), str):
        meta["manifest_source"] = obj["source"]
    revision = obj.get("revision")
    return CheckpointInventory(
        source=source,
        revision=revision if isinstance(revision, str) else None,
        shards=tuple(shards),
        tensors=tensors,
        metadata=meta,
    )


def _audit_tensors(listed: dict[str, Any], by_name: dict[str, ShardInfo], where: str
                   ) -> tuple[dict[str, TensorInfo], dict[str, int]]:
    """Entry by entry: the specification of the bulk path, and the one that names a fault."""
    tensors: dict[str, TensorInfo] = {}
    cursor = dict.fromkeys(by_name, 0)
    checked = _Shapes(where)
    for name, t in listed.items():
        if type(t) is not dict:
            raise _bad(where, f"tensor {name!r} must be an object {{dtype, shape, shard}}")
        dtype: Any = t.get("dtype")
        shard: Any = t.get("shard")
        shape, size = checked(name, dtype, t.get("shape"))
        begin = cursor.get(shard) if type(shard) is str else None
        if begin is None:
            raise _bad(where, f'tensor {name!r} names shard {shard!r}, which "shards" does not list')
        end = cursor[shard] = begin + size
        tensors[name] = TensorInfo(name, dtype, shape, shard, (begin, end))
    return tensors, cursor


_DTYPE = itemgetter("dtype")
_SHAPE = itemgetter("shape")
_SHARD = itemgetter("shard")
_MAX_FAST_RANK = 64
_new_tuple = tuple.__new__  # map(_new_tuple, repeat(TensorInfo), rows): TensorInfo(*row) without a Python call


def _audit_tensors_fast(listed: dict[str, Any], by_name: dict[str, ShardInfo], where: str
                        ) -> tuple[dict[str, TensorInfo], dict[str, int]] | None:
    """All entries at once (C-level maps); ``None`` when anything is off, and the entry loop names the fault.

    Accepts exactly what :func:`_audit_tensors` accepts (short of very long shapes, left to it), and builds the
    same tensors.
    """
    entries = listed.values()
    if set(map(type, entries)) != {dict}:
        return None
    own = {name: name for name in by_name}
    try:
        dtypes = list(map(_DTYPE, entries))
        shapes = list(map(_SHAPE, entries))
        shards = list(map(own.__getitem__, map(_SHARD, entries)))  # the ShardInfo's name: one str per shard
        bits = list(map(DTYPE_BITS.__getitem__, dtypes))  # KeyError: unknown (or non-str); TypeError: unhashable
    except (KeyError, TypeError):
        return None
    if set(map(type, shapes)) != {list} or max(map(len, shapes)) > _MAX_FAST_RANK:
        return None
    dims = list(chain.from_iterable(shapes))
    if dims and (set(map(type, dims)) != {int} or min(dims) < 0 or max(dims) > _MAX_NUMEL):
        return None
    t_shapes = list(map(tuple, shapes))
    canon: dict[tuple[int, ...], tuple[int, ...]] = {}
    t_shapes = list(map(canon.setdefault, t_shapes, t_shapes))  # all dims are ints: equal tuples, equal shapes
    if max(map(prod, canon)) > _MAX_NUMEL:
        return None
    nbits = list(map(mul, map(prod, t_shapes), bits))
    if any(map(and_, nbits, repeat(7))):
        return None
    return _audit_layout(list(listed), dtypes, t_shapes, list(map(rshift, nbits, repeat(3))), shards, by_name)


def _audit_layout(names: list[str], dtypes: list[str], t_shapes: list[tuple[int, ...]], sizes: list[int],
                  shards: list[str], by_name: Mapping[str, ShardInfo]
                  ) -> tuple[dict[str, TensorInfo], dict[str, int]]:
    """Tensors from checked columns, each shard's data laid out consecutively in listed order; and each shard's
    end of data (its cursor). ``shards`` holds one str object per shard (runs are found by identity)."""
    cursor = dict.fromkeys(by_name, 0)
    n = len(shards)
    starts = [0, *compress(range(1, n), map(is_not, shards[1:], shards[:-1])), n]
    run_shards = [shards[i] for i in starts[:-1]]
    if len(set(run_shards)) == len(run_shards):
        # Each shard's tensors in one run (the usual on-disk order): a run's ends are the running sums of its
        # sizes, its begins 0 and then the ends before.
        begins: list[int] = []
        ends: list[int] = []
        for shard, i, j in zip(run_shards, starts, starts[1:]):
            run = list(accumulate(sizes[i:j]))
            ends += run
            begins.append(0)
            begins += run[:-1]
            cursor[shard] = run[-1]
        offsets: Any = zip(begins, ends)
    else:
        offsets = []
        append = offsets.append
        for shard, size in zip(shards, sizes):
            begin = cursor[shard]
            end = cursor[shard] = begin + size
            append((begin, end))
    infos = map(_new_tuple, repeat(TensorInfo), zip(names, dtypes, t_shapes, shards, offsets))
    return dict(zip(names, infos)), cursor


def _from_audit(obj: dict[str, Any], source: str, where: str, path: str) -> CheckpointInventory | None:
    shards = _check_shards(where, obj.get("shards"), audit=True)
    by_name = {s.name: s for s in shards}
    listed = obj.get("tensors")
    if type(listed) is not dict:
        raise _bad(where, '"tensors" must be an object of name -> {dtype, shape, shard}')
    fast = _audit_tensors_fast(listed, by_name, where) if listed and path != "spec" else None
    if fast is not None:
        tensors, cursor = fast
    elif path == "fast":
        return None
    else:
        tensors, cursor = _audit_tensors(listed, by_name, where)
    return _audit_inventory(obj, source, shards, tensors, cursor)


def _audit_inventory(obj: dict[str, Any], source: str, shards: list[ShardInfo], tensors: dict[str, TensorInfo],
                     cursor: dict[str, int]) -> CheckpointInventory:
    # Offsets are only derived facts when the consecutive layout fills each shard exactly.
    inexact = {s.name for s in shards if cursor[s.name] != s.data_bytes}
    if inexact:
        tensors = {
            n: (TensorInfo(n, t.dtype, t.shape, t.shard, None) if t.shard in inexact else t) for n, t in tensors.items()
        }
    meta: dict[str, Any] = {"manifest": "header-audit"}
    if isinstance(obj.get("model"), str):
        meta["model"] = obj["model"]
    if isinstance(obj.get("source"), str):
        meta["manifest_source"] = obj["source"]
    header_meta = [s.metadata for s in shards]
    if header_meta and all(m == header_meta[0] for m in header_meta) and header_meta[0]:
        meta = {"header": dict(header_meta[0]), **meta}
    revision = obj.get("revision")
    return CheckpointInventory(
        source=source,
        revision=revision if isinstance(revision, str) else None,
        shards=tuple(shards),
        tensors=tensors,
        metadata=meta,
    )


# -- manifests as their writers lay them out, read without a JSON parse of the tensor list ---------------------------
#
# A manifest's bulk is its tensor list; writers lay it out compactly (archviz: one row per line; header-audit: one
# object). Such text is split with one regular expression into columns, and only the rest of the document (the
# text with the list emptied) goes to ``json.loads``. Anything else takes the JSON path, which decides and explains.

# header-audit: "<name>":{"dtype":"<dtype>","shape":[<dims>],"shard":"<shard>"}
_AUDIT_ENTRY = re.compile(r'"([^"]*)":\{"dtype":"([^"]*)","shape":\[([0-9,]*)\],"shard":"([^"]*)"\}')
# archviz-manifest/1, a 4-item row: ["<name>","<dtype>",[<dims>],<shard index>]
_ARCHVIZ_ROW = re.compile(r'\["([^"]*)","([^"]*)",\[([0-9,]*)\],([0-9]+)\]')
_OPENS = {"{": re.compile(r'"tensors"[ \t\n\r]*:[ \t\n\r]*\{[ \t\n\r]*\Z'),
          "[": re.compile(r'"tensors"[ \t\n\r]*:[ \t\n\r]*\[[ \t\n\r]*\Z')}
_ARCHVIZ_HEAD = '{"format":"archviz-manifest/'  # how write_manifest starts
# The escape character and control characters other than JSON whitespace: text without them has no escapes, and
# its only control characters lie outside strings unless a column holds one (checked).
_ESCAPE_OR_CONTROL = bytes(c for c in range(0x20) if c not in b"\t\n\r") + b"\\"


def _split_list(raw: bytes, text: str, entry: re.Pattern[str], groups: int, opener: str
                ) -> tuple[dict[str, Any], list[list[str]]] | None:
    """``(document with an empty "tensors", columns of the entries' groups)`` when ``text`` is a JSON object
    whose top-level ``"tensors"`` opens with ``opener`` and holds only ``entry`` matches separated by commas;
    else ``None``. Text without escapes: every '"' delimits a string, and a string without control characters
    is valid JSON and its own text. The callers check what else JSON requires (integers without leading zeros)
    before anything that can raise, so invalid JSON never gets an error other than the JSON path's."""
    if len(raw.translate(None, _ESCAPE_OR_CONTROL)) != len(raw):
        return None
    split = split_entries(text, entry, groups)
    if split is None:
        return None
    head, tail, columns = split
    closer = "}" if opener == "{" else "]"
    if _OPENS[opener].search(head) is None or not tail.lstrip(JSON_SPACE).startswith(closer):
        return None
    emptied = head + tail  # the document with its tensor list emptied
    if emptied.count('"tensors"') != 1:
        return None
    try:
        obj = json.loads(emptied)
        check_text(emptied, obj)  # beyond the bounds: the JSON path refuses it and says why
    except (ValueError, RecursionError):
        return None
    if type(obj) is not dict or obj.get("tensors") != ({} if opener == "{" else []) or "weight_map" in obj:
        return None
    # Whitespace control characters inside a string make the text invalid JSON: none in any column (the names
    # joined; the other columns hold few distinct values).
    strings = "".join(columns[0]) + "".join(chain.from_iterable(map(set, columns[1:])))
    if "\n" in strings or "\t" in strings or "\r" in strings:
        return None
    return obj, columns


def _audit_canonical(raw: bytes, text: str, source: str, where: str) -> CheckpointInventory | None:
    split = _split_list(raw, text, _AUDIT_ENTRY, 4, "{")
    if split is None:
        return None
    obj, (names, dtype_text, shape_text, shard_text) = split
    fmt = obj.get("format")
    if not isinstance(obj.get("shards"), list) or (isinstance(fmt, str) and fmt.startswith(_FORMAT_PREFIX)):
        return None
    kinds = column_kinds(dtype_text, shape_text)
    if kinds is None:
        return None
    dtypes, t_shapes, sizes = kinds
    if t_shapes and max(map(prod, set(t_shapes))) > _MAX_NUMEL:
        return None  # the JSON path refuses it and says why
    shards = _check_shards(where, obj["shards"], audit=True)  # the JSON path's first check, and error
    by_name = {s.name: s for s in shards}
    own = {name: name for name in by_name}
    try:
        shard_names = list(map(own.__getitem__, shard_text))
    except KeyError:
        return None
    if None in sizes:
        return None
    tensors, cursor = _audit_layout(names, dtypes, t_shapes, sizes, shard_names, by_name)  # type: ignore[arg-type]
    if len(tensors) != len(names):
        return None  # a name listed twice: JSON keeps the last, and the JSON path lays the shard out without it
    return _audit_inventory(obj, source, shards, tensors, cursor)


def _archviz_canonical(raw: bytes, text: str, source: str, where: str) -> CheckpointInventory | None:
    split = _split_list(raw, text, _ARCHVIZ_ROW, 4, "[")
    if split is None:
        return None
    obj, (names, dtype_text, shape_text, index_text) = split
    if obj.get("format") != ARCHVIZ_MANIFEST_FORMAT:
        return None
    kinds = column_kinds(dtype_text, shape_text)
    if kinds is None:
        return None
    dtypes, t_shapes, sizes = kinds
    if t_shapes and max(map(prod, set(t_shapes))) > _MAX_NUMEL:
        return None  # the JSON path refuses it and says why
    try:  # digits only (the pattern says so); JSON refuses leading zeros
        sis = json.loads(f"[{','.join(index_text)}]")
    except ValueError:
        return None
    shards = _check_shards(where, obj.get("shards"), audit=False)  # the JSON path's first check, and error
    if max(sis) >= len(shards) or None in sizes or len(set(names)) != len(names):
        return None
    by_name = {sh.name: sh for sh in shards}
    shard_names = [sh.name for sh in shards]
    tensors, cursor = _audit_layout(names, dtypes, t_shapes, sizes, list(map(shard_names.__getitem__, sis)),
                                    by_name)  # type: ignore[arg-type]
    if any(cursor[sh.name] != sh.data_bytes for sh in shards):
        return None  # the row loop checks the coverage and says what is wrong
    return _archviz_inventory(obj, source, where, shards, tensors)


def _canonical_manifest(raw: bytes, text: str, source: str, where: str) -> CheckpointInventory | None:
    """The inventory of a manifest in its writers' layout, read without a JSON parse of its tensor list; or None."""
    fast = _archviz_canonical if text.startswith(_ARCHVIZ_HEAD) else _audit_canonical
    return fast(raw, text, source, where)


def manifest_from_bytes(raw: bytes, *, source: str, where: str | None = None,
                        path: Literal["auto", "fast", "spec"] = "auto") -> CheckpointInventory | None:
    """An inventory from a manifest file's (gunzipped) bytes, of either format: the one reader of them. The
    specification (``path="spec"``): the text parsed as JSON, read row by row (:func:`inventory_from_manifest`),
    which names any fault. Two fast paths give the same inventory where they hold (``path="fast"``: them alone,
    ``None`` where neither holds): the writers' layout split into columns without a JSON parse of its tensor list
    (:func:`_canonical_manifest`), and a parsed list checked in whole-column passes. ``path="auto"`` (every caller):
    a fast path where one holds, else the specification. Raises :class:`IndexNotManifest` for an index."""
    where = where or source
    text = decode_json_text(raw, where)
    inv = None if path == "spec" else _canonical_manifest(raw, text, source, where)
    if inv is None:
        inv = inventory_from_manifest(parse_json_text(text, where), source=source, where=where, path=path)
    return inv


def inventory_from_manifest(obj: Any, *, source: str, where: str | None = None,
                            path: Literal["auto", "fast", "spec"] = "auto") -> CheckpointInventory | None:
    """An inventory from a loaded manifest of either format (``path``: of the whole-column fast path alone)."""
    where = where or source
    if type(obj) is not dict:
        raise _bad(where, "a manifest must be a JSON object")
    if "weight_map" in obj:
        raise IndexNotManifest(f'{where}: a checkpoint index (it has a "weight_map"), not a manifest',
                               hint="pass it as the checkpoint: archviz reads the shards it lists")
    fmt = obj.get("format")
    if fmt == ARCHVIZ_MANIFEST_FORMAT:
        return _from_archviz(obj, source, where, path)
    if isinstance(fmt, str) and fmt.startswith(_FORMAT_PREFIX):
        raise CheckpointError(
            f"{where}: manifest format {fmt!r} is not supported (this archviz reads {ARCHVIZ_MANIFEST_FORMAT!r})",
            hint="upgrade archviz or rewrite the manifest with this version",
        )
    if isinstance(obj.get("tensors"), dict) and isinstance(obj.get("shards"), list):
        return _from_audit(obj, source, where, path)
    raise CheckpointError(
        f'{where}: not a checkpoint manifest (no "format": {ARCHVIZ_MANIFEST_FORMAT!r}, no header-audit lists)',
        hint="pass a .safetensors file, a *.safetensors.index.json, a folder, a manifest or hf://owner/name",
    )


def read_manifest(path: str | os.PathLike[str]) -> CheckpointInventory:
    """Open a manifest file of either format (plain or gzip'd JSON)."""
    where = os.fspath(path)
    return manifest_from_bytes(read_json_bytes(where), source=where)


def _dump(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=True)


def _portable_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    # "manifest"/"manifest_source" describe how an inventory was read, not the checkpoint.
    return {k: v for k, v in meta.items() if k not in ("manifest", "manifest_source")}


def manifest_text(inv: CheckpointInventory) -> str:
    """The archviz-manifest/1 text of an inventory (deterministic)."""
    index = {s.name: i for i, s in enumerate(inv.shards)}
    lines = [
        "{" + _dump("format") + ":" + _dump(ARCHVIZ_MANIFEST_FORMAT) + ",",
        _dump("source") + ":" + _dump(inv.source) + ",",
        _dump("revision") + ":" + _dump(inv.revision) + ",",
        _dump("metadata") + ":" + _dump(_portable_metadata(inv.metadata)) + ",",
        _dump("shards") + ":[",
    ]
    for i, s in enumerate(inv.shards):
        rec = {
            "name": s.name,
            "file_bytes": s.file_bytes,
            "header_bytes": s.header_bytes,
            "header_sha256": s.header_sha256,
            "metadata": dict(s.metadata),
        }
        lines.append(_dump(rec) + ("," if i + 1 < len(inv.shards) else ""))
    lines.append("],")
    lines.append(_dump("tensors") + ":[")
    n = len(inv.tensors)
    cursor: dict[str, int | None] = dict.fromkeys(index, 0)
    for i, t in enumerate(inv.tensors.values()):
        row: list[Any] = [t.name, t.dtype, list(t.shape), index[t.shard]]
        offsets = t.data_offsets
        if offsets is None:
            row += [None, None]
        elif offsets[0] != cursor[t.shard]:
            row += list(offsets)
        cursor[t.shard] = offsets[1] if offsets is not None else None
        lines.append(_dump(row) + ("," if i + 1 < n else ""))
    lines.append("]}")
    return "\n".join(lines) + "\n"


def manifest_bytes(inv: CheckpointInventory, gz: bool = False) -> bytes:
    """``inv`` as an archviz-manifest/1 file's bytes; gzip'd (deterministically) with ``gz``."""
    names = {s.name for s in inv.shards}
    missing = [t.name for t in inv.tensors.values() if t.shard not in names][:1]
    if missing:
        raise CheckpointError(f"cannot write the manifest: tensor {missing[0]!r} names a shard the inventory lacks")
    return json_text_bytes(manifest_text(inv), gz)


def json_text_bytes(text: str, gz: bool = False) -> bytes:
    """A manifest's ASCII text as a file's bytes; gzip'd deterministically (no name, mtime 0) with ``gz``."""
    data = text.encode("ascii")
    if gz:
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz_file:
            gz_file.write(data)
        data = buf.getvalue()
    return data


def write_manifest(inv: CheckpointInventory, path: str | os.PathLike[str], flag: str = "-o") -> None:
    """Write ``inv`` as an archviz-manifest/1 file; gzip'd when ``path`` ends in ``.gz`` (archviz.files.outputs: atomic,
    over a regular file only)."""
    where = os.fspath(path)
    write_file(where, manifest_bytes(inv, gz=where.endswith(".gz")), flag=flag)

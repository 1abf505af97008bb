"""Strict safetensors header parsing: the one validation path every source goes through.

A safetensors file is ``<u64 little-endian N><N bytes of UTF-8 JSON header><data>``. The header maps each
tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to the data region) and
may hold ``"__metadata__"``, an object of strings. This module reads the prefix and the header and nothing
else, and checks what the safetensors library checks when it opens a file:

- the length prefix is 8 bytes, the header fits in the file and is at most 100,000,000 bytes;
- the header is UTF-8 JSON whose top level is an object;
- ``__metadata__`` is an object of string to string;
- every tensor entry is an object with ``dtype`` (one of :data:`~archviz.checkpoint.records.DTYPE_BITS`),
  ``shape`` (list of non-negative ints) and ``data_offsets`` (two ints, ``0 <= begin <= end``);
- ``end - begin`` equals the packed size of ``prod(shape)`` elements (sub-byte dtypes must fill whole bytes);
- the byte ranges do not overlap, stay inside the data region, and cover it exactly (no holes, nothing after).

Every failure is a :class:`~archviz.errors.CheckpointError` naming the file and, where it applies, the tensor.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from itertools import chain, repeat
from math import prod
from operator import floordiv, getitem, itemgetter, mul, sub
from typing import Any

from archviz.errors import CheckpointError
from archviz.files.safeio import open_regular, read_bounded

from .strict_json import decode_header_json

from .records import DTYPE_BITS, ShardInfo, TensorInfo

__all__ = [
    "MAX_HEADER_BYTES",
    "PREFIX_BYTES",
    "ParsedShard",
    "check_entries",
    "check_header_length",
    "parse_header",
    "parse_shard_bytes",
    "read_local_shard",
]

#: Size of the little-endian length prefix.
PREFIX_BYTES = 8
#: Largest header the safetensors library accepts.
MAX_HEADER_BYTES = 100_000_000
# Largest element count a shape may describe (the safetensors library computes it in 64 bits); also the largest
# dimension and offset (it reads them as 64-bit unsigned ints).
_MAX_NUMEL = 2**64 - 1
#: Longest tensor name accepted, in characters. The safetensors library sets none; archviz does, so that no
#: name-proportional step (messages, module paths, tables) can be made to cost much: real names have < 300.
MAX_NAME_CHARS = 65_536

_HINT_CORRUPT = "the file is damaged or not a safetensors file; download it again"
_HINT_PICKLE = (
    "this looks like a PyTorch pickle/zip checkpoint; archviz never unpickles files — "
    "convert it to .safetensors (e.g. safetensors.torch.save_file) and open that"
)


@dataclass(frozen=True, slots=True)
class ParsedShard:
    """One shard's header, parsed and validated; every tensor in ``tensors`` has ``shard == shard.name``."""

    shard: ShardInfo
    tensors: dict[str, TensorInfo]


def _sniff_hint(prefix: bytes) -> str:
    if prefix[:4] == b"PK\x03\x04" or (len(prefix) >= 2 and prefix[0] == 0x80 and 2 <= prefix[1] <= 5):
        return _HINT_PICKLE
    return _HINT_CORRUPT


def check_header_length(prefix: bytes, file_bytes: int, where: str) -> int:
    """Validate the 8-byte prefix of a file of ``file_bytes`` bytes; return the header length it declares."""
    if len(prefix) < PREFIX_BYTES:
        raise CheckpointError(
            f"{where}: file is {file_bytes} bytes, too short for a safetensors header (needs at least 8)",
            hint=_HINT_CORRUPT,
        )
    n = int.from_bytes(prefix[:PREFIX_BYTES], "little")
    if n > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"{where}: declared header length {n:,} bytes exceeds the 100,000,000-byte limit",
            hint=_sniff_hint(prefix),
        )
    if PREFIX_BYTES + n > file_bytes:
        raise CheckpointError(
            f"{where}: declared header length {n:,} bytes runs past the end of the {file_bytes:,}-byte file",
            hint=_sniff_hint(prefix) if n > file_bytes else "the file is truncated; download it again",
        )
    return n


def _short(value: object, limit: int = 80) -> str:
    """``repr`` cut to ``limit`` characters, for messages about hostile input."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bad(where: str, what: str) -> CheckpointError:
    return CheckpointError(f"{where}: {what}", hint=_HINT_CORRUPT)


def _duplicate_key(header: bytes) -> str | None:
    """First top-level key the header's JSON repeats (``json.loads`` silently keeps the last one)."""
    last: list[list[tuple[str, Any]]] = []

    def hook(items: list[tuple[str, Any]]) -> dict[str, Any]:
        last[:] = [items]  # objects close innermost first: the top level closes last
        return dict(items)

    json.loads(header.decode("utf-8"), object_pairs_hook=hook)
    seen: set[str] = set()
    for k, _ in last[0] if last else ():
        if k in seen:
            return k
        seen.add(k)
    return None


def _text(header: bytes, where: str) -> str:
    try:
        return header.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(where, f"header is not valid UTF-8 (byte {PREFIX_BYTES + e.start} of the file)") from None


def _decode(text: str, where: str) -> tuple[dict[str, Any], dict[str, str]]:
    """JSON-decode the header text; split off and check ``__metadata__``."""
    obj = decode_header_json(text, where, _bad)
    if type(obj) is not dict:
        raise _bad(where, f"header must be a JSON object, not {type(obj).__name__}")
    metadata: dict[str, str] = {}
    if "__metadata__" in obj:
        meta = _metadata(obj.pop("__metadata__"))
        if type(meta) is not dict:
            raise _bad(where, f"__metadata__ must be an object of strings, not {type(meta).__name__}")
        for k, v in meta.items():
            if type(v) is not str:
                raise _bad(where, f"__metadata__[{_short(k)}] must be a string, not {type(v).__name__}")
        metadata = meta
    return obj, metadata


def _metadata(meta: Any) -> Any:
    """``__metadata__`` as read: null means none (as the safetensors library reads it)."""
    return {} if meta is None else meta


def parse_header(
    header: bytes, *, shard: str, data_bytes: int, where: str
) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """Parse and validate header bytes (prefix excluded).

    ``shard`` is recorded in each :class:`TensorInfo`; ``data_bytes`` is the size of the data region (file size
    minus prefix and header); ``where`` names the file in messages. Returns the tensors in header order and the
    ``__metadata__`` dict (empty if absent).

    Headers in the layout the safetensors writers produce take a fast path (:func:`_canonical_tensors`: a split
    on the entries' fixed punctuation instead of a JSON parse); every other header is JSON-decoded. Both then take
    the same whole-column checks (:func:`_build`); anything those reject is re-checked entry by entry by
    :func:`check_entries`, which names the first offending tensor. All paths accept exactly the same headers and
    read them to the same tensors (the fuzz tests hold them to that).
    """
    text = _text(header, where)
    fast = _canonical_tensors(header, text, shard, data_bytes)
    if fast is not None:
        _check_name_lengths(fast[0], where)
        return fast
    obj, metadata = _decode(text, where)
    tensors = _fast_tensors(obj, shard, data_bytes)
    if tensors is None:
        dup = _duplicate_key(header)
        if dup is not None:
            raise _bad(where, f"tensor {_short(dup)} is listed twice in the header")
        check_entries(obj, data_bytes, where)
        tensors = _entry_tensors(obj, shard)  # valid, beyond the bulk path (a shape of rank > 64)
    _check_name_lengths(tensors, where)
    return tensors, metadata


def _check_name_lengths(tensors: dict[str, TensorInfo], where: str) -> None:
    if tensors and max(map(len, tensors)) > MAX_NAME_CHARS:
        name = max(tensors, key=len)
        raise CheckpointError(f"{where}: tensor {_short(name)} has a {len(name):,}-character name, over archviz's "
                              f"{MAX_NAME_CHARS:,}-character limit",
                              hint="real checkpoints use names of a few hundred characters; this file is not one")


def _entry_tensors(obj: dict[str, Any], shard: str) -> dict[str, TensorInfo]:
    """Tensors of entries :func:`check_entries` passed, one by one, in header order."""
    return {name: TensorInfo(name, e["dtype"], tuple(e["shape"]), shard, (e["data_offsets"][0], e["data_offsets"][1]))
            for name, e in obj.items()}


# One tensor entry as the safetensors writers lay it out: no whitespace, keys in this order. Five groups: the
# name, the dtype, the shape's digits and commas, the begin's digits, the end's digits (each to be checked).
_ENTRY = re.compile(
    r'"([^"]*)":\{"dtype":"([^"]*)","shape":\[([0-9,]*)\],"data_offsets":\[([0-9]+),([0-9]+)\]\}'
)
_GROUPS = 5
_MAX_FAST_RANK = 64  # longer shapes take the entry checker, which stops at the first overflow
# Up to 64 JSON integers (no sign, no leading zero) below 2**64; anything else takes the JSON path.
_NUM = r"(?:0|[1-9][0-9]{0,18})"
_SHAPE_TEXT = re.compile(rf"(?:{_NUM}(?:,{_NUM}){{0,{_MAX_FAST_RANK - 1}}})?")
# Bytes no JSON string holds unescaped (control characters), and the escape character: a header without them has
# no escapes, so every '"' in it delimits a string.
_CONTROL_OR_ESCAPE = bytes(range(0x20)) + b"\\"
#: JSON's whitespace characters.
JSON_SPACE = " \t\n\r"
_META_HEAD = '{"__metadata__":'
_COMMA = {","}


def split_entries(text: str, entry: re.Pattern[str], groups: int
                  ) -> tuple[str, str, list[list[str]]] | None:
    """``(text before the first entry, text after the last, each of the pattern's groups as a column)`` when
    ``text`` holds at least one ``entry`` and only commas (JSON whitespace around them) between entries; else
    ``None``. What the text around the entries must be is the caller's to check."""
    parts = entry.split(text)
    step = groups + 1
    n = len(parts) // step
    if n == 0:
        return None
    gaps = parts[0::step]
    if n > 1 and {g.strip(JSON_SPACE) for g in set(gaps[1:-1])} != _COMMA:
        return None
    return gaps[0], gaps[-1], [parts[i::step] for i in range(1, step)]


def _whole_bytes(nbits: int) -> int | None:
    return None if nbits & 7 else nbits >> 3


def column_kinds(
    dtype_text: list[str], shape_text: list[str]
) -> tuple[list[str], list[tuple[int, ...]], list[int | None]] | None:
    """Dtype codes, shapes and data bytes of columns of dtype text and shape text (a shape's digits and commas, as
    a compact JSON list holds them); ``None`` if a dtype is unknown or a shape is not up to 64 JSON integers below
    2**64. A (dtype, shape) that does not fill whole bytes gets ``None`` bytes.

    A checkpoint has few distinct dtypes and shapes (V3: 91,991 tensors, a few hundred shapes): each is checked
    once, every tensor of a shape shares one tuple, and bytes come from a small (dtype, shape) table.
    """
    try:
        dtypes = list(map(_DTYPE_NAME.__getitem__, dtype_text))
    except KeyError:
        return None
    canon: dict[str, tuple[int, ...]] = {}
    for s in set(shape_text):
        if _SHAPE_TEXT.fullmatch(s) is None:
            return None
        canon[s] = tuple(map(int, s.split(","))) if s else ()
    need = {d: {s: _whole_bytes(prod(t) * DTYPE_BITS[d]) for s, t in canon.items()} for d in set(dtypes)}
    return (
        dtypes,
        list(map(canon.__getitem__, shape_text)),
        list(map(getitem, map(need.__getitem__, dtypes), shape_text)),
    )


def _canonical_tensors(
    header: bytes, text: str, shard: str, data_bytes: int
) -> tuple[dict[str, TensorInfo], dict[str, str]] | None:
    """Tensors and metadata of a header in the writers' layout, or ``None`` to take the JSON path.

    Accepts only text without escapes or control characters of the form ``{`` [``"__metadata__":`` M ``,``]
    E ``,`` E ... ``}`` (spaces around it and its commas), each E an :data:`_ENTRY` whose shape is up to 64 JSON
    integers and whose offsets are two, M a JSON object of strings, with distinct names, none ``__metadata__``,
    that pass :func:`_build`. ``json.loads`` reads exactly such text as a header, and to the same result (a name
    without escapes is its own text). Anything else returns ``None``, and the JSON path decides and explains.
    """
    if len(header.translate(None, _CONTROL_OR_ESCAPE)) != len(header):
        return None
    split = split_entries(text, _ENTRY, _GROUPS)
    if split is None:
        return None
    head, tail, (names, dtype_text, shape_text, begin_text, end_text) = split
    n = len(names)
    if tail.rstrip(JSON_SPACE) != "}":
        return None
    head = head.lstrip(JSON_SPACE)
    metadata: dict[str, str] = {}
    if head != "{":
        if not (head.startswith(_META_HEAD) and head.endswith(",")):
            return None
        try:  # the head closed by "}" instead of ",": valid JSON exactly when the whole text is
            top = json.loads(head[:-1] + "}", object_pairs_hook=_pairs)
        except (ValueError, RecursionError):
            return None
        # one key: a second "__metadata__" (serde refuses it; a dict would keep the last) takes the JSON path
        meta = _metadata(top[0][1]) if type(top) is list and len(top) == 1 else None
        meta = dict(meta) if type(meta) is list else meta
        if type(meta) is not dict or set(map(type, meta.values())) - {str}:
            return None
        metadata = meta
    kinds = column_kinds(dtype_text, shape_text)
    if kinds is None:
        return None
    dtypes, shapes, nbytes = kinds
    try:  # digits only (the pattern says so); JSON refuses leading zeros
        begins = json.loads(f"[{','.join(begin_text)}]")
        ends = json.loads(f"[{','.join(end_text)}]")
    except ValueError:
        return None
    tensors = _build(
        names,
        dtypes,
        shapes,
        nbytes,
        begins,
        ends,
        shard,
        data_bytes,
    )
    if tensors is None or len(tensors) != n or "__metadata__" in tensors:
        return None  # a name listed twice, or a tensor called __metadata__: the JSON path says what is wrong
    return tensors, metadata


def _pairs(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return items


_DTYPE = itemgetter("dtype")
_SHAPE = itemgetter("shape")
_DTYPE_NAME = {name: name for name in DTYPE_BITS}
_OFFSETS = itemgetter("data_offsets")
_TYPES_DICT = {dict}
_TYPES_LIST = {list}
_TYPES_INT = {int}
_SIZE_2 = {2}
_NUMEL_SAFE_BYTES = _MAX_NUMEL * min(DTYPE_BITS.values()) // 8
_new_tuple = tuple.__new__  # map(_new_tuple, repeat(TensorInfo), rows): TensorInfo(*row) without a Python call


def _fast_tensors(obj: dict[str, Any], shard: str, data_bytes: int) -> dict[str, TensorInfo] | None:
    """Validate and build all entries at once; ``None`` when anything is off (the caller finds what).

    Accepts exactly the headers :func:`check_entries` accepts (the fuzz tests hold both to that), in a few
    whole-column passes of C-level builtins.
    """
    if not obj:
        return {} if data_bytes == 0 else None
    entries = obj.values()
    if set(map(type, entries)) != _TYPES_DICT:
        return None
    try:
        dtypes = list(map(_DTYPE_NAME.__getitem__, map(_DTYPE, entries)))  # KeyError: unknown; TypeError: unhashable
        shapes = list(map(_SHAPE, entries))
        offsets = list(map(_OFFSETS, entries))
    except (KeyError, TypeError):
        return None
    if set(map(type, shapes)) != _TYPES_LIST or set(map(type, offsets)) != _TYPES_LIST:
        return None
    if max(map(len, shapes)) > _MAX_FAST_RANK:  # long shapes: the entry checker stops at the first overflow
        return None
    dims = list(chain.from_iterable(shapes))
    if dims and (set(map(type, dims)) != _TYPES_INT or min(dims) < 0 or max(dims) > _MAX_NUMEL):
        return None
    if set(map(len, offsets)) != _SIZE_2:
        return None
    flat = list(chain.from_iterable(offsets))
    if set(map(type, flat)) != _TYPES_INT:
        return None
    # One shape tuple per distinct shape (all dims are ints here, so equal tuples are equal shapes).
    t_shapes = list(map(tuple, shapes))
    canon: dict[tuple[int, ...], tuple[int, ...]] = {}
    t_shapes = list(map(canon.setdefault, t_shapes, t_shapes))
    nbits = list(map(mul, map(prod, t_shapes), map(DTYPE_BITS.__getitem__, dtypes)))
    nbytes = list(map(floordiv, nbits, repeat(8)))
    if list(map(mul, nbytes, repeat(8))) != nbits:  # some tensor does not fill whole bytes
        return None
    return _build(list(obj), dtypes, t_shapes, nbytes, flat[0::2], flat[1::2], shard, data_bytes)


def _build(
    names: list[str],
    dtypes: list[str],
    shapes: list[tuple[int, ...]],
    nbytes: list[int | None],
    begins: list[int],
    ends: list[int],
    shard: str,
    data_bytes: int,
) -> dict[str, TensorInfo] | None:
    """The checks both fast paths share, on columns of known dtype codes, shapes of non-negative ints (rank at
    most 64), the bytes each shape needs in its dtype (None where it does not fill whole bytes) and integer offsets;
    ``None`` when a size or the byte layout is off."""
    sizes = list(map(sub, ends, begins))
    # end - begin == the bytes the shape needs (never None, and >= 0): whole bytes, the right size, begin <= end.
    if sizes != nbytes:
        return None
    # Past the layout check below, each size <= data_bytes, so numel <= 8 * data_bytes / (fewest bits): the 2**64
    # element limit can only bind for a data region over _NUMEL_SAFE_BYTES (2**61 bytes).
    if data_bytes > _NUMEL_SAFE_BYTES and max(map(prod, shapes)) > _MAX_NUMEL:
        return None
    if begins[0] == 0 and ends[-1] == data_bytes and begins[1:] == ends[:-1]:
        pass  # the usual case: the data in header order, each tensor where the one before it ends
    elif min(sizes) > 0:
        n = len(begins)
        # With every size > 0, the spans [b, e) tile [0, D) exactly iff the n begins are distinct and
        # {begins} | {D} == {ends} | {0}. "Only if" is plain. "If": let S be that set; each end is above its
        # begin. (1) No begin is negative and no end is <= 0: such a value v would be an end (S minus {0} is the
        # ends), v = e_j > b_j, so b_j < 0 would be another one, and so on down without end in a finite set.
        # (2) max(S) is not a begin (its span would end above it, inside S), so max(S) = D, D is no begin, and
        # D > 0 since n >= 1 begins lie in [0, D); 0 is in S, hence a begin. (3) So |S| = n + 1 and the n ends
        # fill S minus {0}: they are distinct. (4) Sort the begins 0 = b_0 < ... < b_{n-1}: the span at b_{n-1}
        # ends above it, where S holds only D; then the span at b_{n-2} ends above it at an end not yet taken,
        # which leaves only b_{n-1}; and so on down: every span ends where the next begins, the last at D.
        starts = set(begins)
        if len(starts) != n:
            return None
        starts.add(data_bytes)
        stops = set(ends)
        stops.add(0)
        if starts != stops:
            return None
    else:  # a zero-size tensor may sit at any boundary: sort, as check_entries does
        spans = sorted(zip(begins, ends, strict=True))
        if spans[0][0] != 0 or spans[-1][1] != data_bytes:
            return None
        if list(map(_FIRST, spans[1:])) != list(map(_SECOND, spans[:-1])):
            return None
    infos = map(_new_tuple, repeat(TensorInfo), zip(names, dtypes, shapes, repeat(shard), zip(begins, ends)))
    return dict(zip(names, infos))


_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


def check_entries(obj: dict[str, Any], data_bytes: int, where: str) -> None:
    """Check tensor entries one by one (``__metadata__`` already removed); raise on the first fault.

    The reference for :func:`parse_header`'s bulk path: both accept exactly the same headers.
    """
    bits_of = DTYPE_BITS.get
    spans: list[tuple[int, int, str]] = []
    append = spans.append
    for name, entry in obj.items():
        if type(entry) is not dict:
            raise _bad(where, f"tensor {_short(name)}: entry must be an object, not {type(entry).__name__}")
        try:
            dtype = entry["dtype"]
            shape = entry["shape"]
            offsets = entry["data_offsets"]
        except KeyError as e:
            raise _bad(where, f"tensor {_short(name)}: missing {e.args[0]!r}") from None
        bits = bits_of(dtype) if type(dtype) is str else None
        if bits is None:
            raise CheckpointError(
                f"{where}: tensor {_short(name)}: unknown dtype {_short(dtype)}",
                hint=f"known safetensors dtypes: {', '.join(DTYPE_BITS)}; a newer format needs a newer archviz",
            )
        if type(shape) is not list:
            raise _bad(where, f"tensor {_short(name)}: shape must be a list of ints, not {type(shape).__name__}")
        for d in shape:
            if type(d) is not int or d < 0 or d > _MAX_NUMEL:
                raise _bad(where, f"tensor {_short(name)}: shape {_short(shape)} must hold non-negative ints "
                                  "below 2**64")
        numel = 0 if 0 in shape else 1
        for d in shape if numel else ():
            numel *= d
            if numel > _MAX_NUMEL:  # stop at once: a long shape of huge dims would take ages to multiply out
                raise _bad(where, f"tensor {_short(name)}: shape {_short(shape)} has more than 2**64 elements")
        if type(offsets) is not list or len(offsets) != 2:
            raise _bad(where, f"tensor {_short(name)}: data_offsets must be [begin, end], not {_short(offsets)}")
        begin, end = offsets
        if type(begin) is not int or type(end) is not int or begin < 0 or end < begin:
            raise _bad(
                where, f"tensor {_short(name)}: data_offsets {_short(offsets)} must be ints with 0 <= begin <= end"
            )
        if end > data_bytes:
            raise _bad(
                where,
                f"tensor {_short(name)}: data_offsets {_short(offsets)} run past the {data_bytes:,}-byte data region",
            )
        nbits = numel * bits
        if nbits & 7:
            raise _bad(where, f"tensor {_short(name)}: {numel} x {dtype} ({bits} bits each) does not fill whole bytes")
        if end - begin != nbits >> 3:
            raise _bad(
                where,
                f"tensor {_short(name)}: data_offsets {_short(offsets)} span {end - begin:,} bytes but "
                f"{dtype}{_short(shape)} needs {nbits >> 3:,}",
            )
        append((begin, end, name))

    spans.sort()
    pos = 0
    prev = ""
    for begin, end, name in spans:
        if begin != pos:
            if begin < pos:
                raise _bad(where, f"tensors {_short(prev)} and {_short(name)} overlap (data_offsets {begin} < {pos})")
            raise _bad(
                where, f"bytes {pos:,}..{begin:,} of the data region belong to no tensor (before {_short(name)})"
            )
        pos = end
        prev = name
    if pos != data_bytes:
        raise _bad(where, f"data region is {data_bytes:,} bytes but the tensors cover {pos:,}")


def parse_shard_bytes(prefix: bytes, header: bytes, *, file_bytes: int, shard: str, where: str) -> ParsedShard:
    """Validate a shard given its 8-byte prefix, its header bytes and the full file size."""
    n = check_header_length(prefix, file_bytes, where)
    if len(header) != n:
        raise _bad(where, f"read {len(header):,} header bytes, expected {n:,}")
    tensors, metadata = parse_header(header, shard=shard, data_bytes=file_bytes - PREFIX_BYTES - n, where=where)
    digest = hashlib.sha256(prefix)
    digest.update(header)
    info = ShardInfo(shard, file_bytes, PREFIX_BYTES + n, digest.hexdigest(), metadata)
    return ParsedShard(info, tensors)


def read_local_shard(path: str | os.PathLike[str], *, shard: str | None = None) -> ParsedShard:
    """Read one local safetensors file's prefix and header — two reads, nothing else — and validate them.

    ``shard`` is the name recorded for the shard (default: the file's base name).
    """
    where = os.fspath(path)
    name = shard if shard is not None else os.path.basename(where)
    # a regular file only (stat before open: a FIFO, a device or a folder is refused unopened)
    with open_regular(where, what=".safetensors", error=CheckpointError) as f:
        file_bytes = os.fstat(f.fileno()).st_size
        prefix = read_bounded(f, PREFIX_BYTES)
        n = check_header_length(prefix, file_bytes, where)
        header = read_bounded(f, n)
    return parse_shard_bytes(prefix, header, file_bytes=file_bytes, shard=name, where=where)

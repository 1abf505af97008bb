"""Joining parsed shards (and an optional index) into one :class:`CheckpointInventory`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from archviz.errors import CheckpointError
from archviz.files.safeio import MiB
from archviz.files.safejson import loads as bounded_loads

from .header import ParsedShard
from .records import CheckpointInventory, TensorInfo

__all__ = ["Progress", "assemble", "common_metadata", "natural_key", "parse_index"]

#: ``progress(done, total, label)``: called after each shard is read; ``label`` is the shard's name.
Progress = Callable[[int, int, str], None]

_DIGITS = re.compile(r"(\d+)")

INDEX_SUFFIX = ".safetensors.index.json"
#: Largest index read (local or remote): the same bound as a safetensors header, whose names it lists again.
MAX_INDEX_BYTES = 100 * MiB


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders ``model-2`` before ``model-10``."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def common_metadata(parsed: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """``__metadata__`` entries that every shard has with the same value."""
    it = iter(parsed)
    first = next(it, None)
    if first is None:
        return {}
    common = dict(first)
    for meta in it:
        for k in list(common):
            if meta.get(k) != common[k]:
                del common[k]
    return common


def parse_index(data: bytes, where: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Parse a ``*.safetensors.index.json``; return ``(weight_map, metadata)``.

    (A name repeated in ``weight_map`` keeps its last shard, as JSON readers do; :func:`assemble` then finds the
    disagreement with the shard headers.)
    """
    if len(data) > MAX_INDEX_BYTES:
        raise CheckpointError(f"{where}: index is {len(data):,} bytes, over the {MAX_INDEX_BYTES:,}-byte limit",
                              hint="this is not a safetensors index; pass the checkpoint's own")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{where}: index is not valid UTF-8 (byte {e.start})", hint="download it again") from None
    # bounded: nesting, integer size, lone surrogates (archviz.files.safejson)
    obj = bounded_loads(text, where=f"{where}: index", error=CheckpointError, hint="download it again")
    if type(obj) is not dict or type(obj.get("weight_map")) is not dict:
        raise CheckpointError(
            f'{where}: index has no "weight_map" object', hint="a safetensors index maps tensor names to shard files"
        )
    weight_map: dict[str, str] = obj["weight_map"]
    shards = weight_map.values()
    if set(map(type, shards)) - {str} or "" in shards:  # the loop names the first bad entry
        for name, shard in weight_map.items():
            if type(shard) is not str or not shard:
                raise CheckpointError(f"{where}: weight_map[{name!r}] must be a shard file name, not {shard!r}")
    meta = obj.get("metadata")
    return weight_map, (meta if isinstance(meta, dict) else {})


def index_shards(weight_map: Mapping[str, str]) -> list[str]:
    """Shard file names an index names, in natural order."""
    return sorted(set(weight_map.values()), key=natural_key)


def _raise_duplicate(parsed: list[ParsedShard], source: str) -> None:
    seen: dict[str, str] = {}
    for q in parsed:
        for name in q.tensors:
            if name in seen:
                raise CheckpointError(
                    f"{source}: tensor {name!r} appears in two shards, {seen[name]!r} and {q.shard.name!r}",
                    hint="remove the stale shard or fix the index",
                )
            seen[name] = q.shard.name
    raise AssertionError("no duplicate found")  # pragma: no cover - callers only call after a count mismatch


def assemble(
    parsed: list[ParsedShard],
    *,
    source: str,
    revision: str | None = None,
    weight_map: Mapping[str, str] | None = None,
    index_where: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> CheckpointInventory:
    """Join shards in the given order; check them against ``weight_map`` when an index was read.

    Errors: a tensor in two shards; a tensor the index places in a shard whose header lacks it; a tensor a
    shard holds that the index does not list.
    """
    tensors: dict[str, TensorInfo] = {}
    for p in parsed:
        before = len(tensors)
        tensors.update(p.tensors)
        if len(tensors) != before + len(p.tensors):
            _raise_duplicate(parsed, source)
    if weight_map is not None:
        where = index_where or source
        get = weight_map.get  # a shard's tensors all name that shard (ParsedShard), so test shard by shard
        if len(weight_map) != len(tensors) or any(not set(map(get, p.tensors)) <= {p.shard.name} for p in parsed):
            for name, shard in weight_map.items():
                t = tensors.get(name)
                if t is None:
                    raise CheckpointError(
                        f"{where}: index places tensor {name!r} in {shard!r}, whose header has no such tensor",
                        hint="the index and the shards disagree; download both again",
                    )
                if t.shard != shard:
                    raise CheckpointError(
                        f"{where}: tensor {name!r} appears in two shards, {shard!r} (index) and {t.shard!r} (header)",
                        hint="the index and the shards disagree; download both again",
                    )
            extra = next(n for n in tensors if n not in weight_map)
            raise CheckpointError(
                f"{where}: shard {tensors[extra].shard!r} holds tensor {extra!r}, which the index does not list",
                hint="the index is out of date; regenerate it or download it again",
            )
    meta: dict[str, Any] = dict(metadata or {})
    header_meta = common_metadata(p.shard.metadata for p in parsed)
    if header_meta:
        meta = {"header": header_meta, **meta}
    return CheckpointInventory(
        source=source,
        revision=revision,
        shards=tuple(p.shard for p in parsed),
        tensors=tensors,
        metadata=meta,
    )

"""Per-rank checkpoints: one shard file per tensor-parallel rank, each holding that rank's part of every tensor under
the model's own names (DeepSeek's `convert.py` writes `model{rank}-mp{world_size}.safetensors`), checked rank by
rank against the meta records built with `world_size=N, rank=r`, headers only.

A folder's rank files are found by a pattern (`{rank}` and `{world_size}` filled in). Their tensors share names
across files, so they are not one checkpoint: `rank_inventories()` opens one inventory per rank, and a rank manifest
(`archviz-ranks/1`: each rank's archviz-manifest/1 with its rank and file name, written by
`archviz manifest` of N ranks) keeps them apart for CI."""

from __future__ import annotations

import json
import os
import re
import string
from typing import Any, Callable, Sequence

from archviz.errors import CheckpointError
from archviz.records.recordcheck import fail, refused_as, want_int, want_list, want_str, want_table

from .manifest import inventory_from_manifest, load_json_file, json_text_bytes, manifest_text
from .records import CheckpointInventory
from ..errors import option

DEFAULT_PATTERN = "model{rank}-mp{world_size}.safetensors"
RANKS_FORMAT = "archviz-ranks/1"


_FIELDS = ("rank", "world_size")
_WIDTH = re.compile(r"0?[1-9]?[0-9]?d?")  # a zero-padded width of at most 99, as in {rank:02d}


def rank_file(pattern: str, rank: int, world_size: int) -> str:
    """The file name of `rank`'s shard. The pattern is a template: `{rank}` (required) and `{world_size}`, each with
    at most a zero-padded width (`{rank:02d}`), nothing else: no attribute or index access, no other format spec,
    and the name it gives is a file name in the folder (no separator, not `..`). Else CheckpointError (exit 2)."""
    hint = f"e.g. {option('rank-pattern')} {DEFAULT_PATTERN!r} or 'tp{{rank:02d}}.safetensors'"
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(pattern) if name is not None]
    except ValueError as e:
        raise CheckpointError(f"rank pattern {pattern!r}: not a template ({e})", hint=hint) from None
    for name, spec, conv in fields:
        if name not in _FIELDS or conv is not None or not _WIDTH.fullmatch(spec or ""):
            raise CheckpointError(f"rank pattern {pattern!r}: {{{name}{'!' + conv if conv else ''}"
                                  f"{':' + spec if spec else ''}}} is not allowed: only {{rank}} and {{world_size}}, "
                                  "each with at most a zero-padded width, are filled in", hint=hint)
    if "rank" not in {name for name, _, _ in fields}:
        raise CheckpointError(f"rank pattern {pattern!r}: has no {{rank}}", hint=hint)
    name = pattern.format(rank=rank, world_size=world_size)
    if os.sep in name or (os.altsep and os.altsep in name) or name in (".", "..") or "\0" in name:
        raise CheckpointError(f"rank pattern {pattern!r}: names {name!r}, not a file in the checkpoint's folder",
                              hint=hint)
    return name


def _rank_path(folder: str, name: str) -> str:
    """`folder/name`, refused unless it is a regular file inside the folder once links are resolved, owned by this
    user (or root) and not writable by others: a rank file is read from its folder alone."""
    import stat

    path = os.path.join(folder, name)
    real, inside = os.path.realpath(path), os.path.realpath(folder)
    if os.path.dirname(real) != inside:
        raise CheckpointError(f"{path}: a link to {real}, outside the checkpoint's folder",
                              hint="copy the rank files into the folder itself")
    st = os.stat(real)
    if st.st_uid not in (os.getuid(), 0) or st.st_mode & stat.S_IWOTH:
        raise CheckpointError(f"{path}: owned by another user or writable by others, so anyone could have "
                              "replaced it", hint="copy it into a folder of your own, or chmod o-w it")
    return real


def rank_inventories(spec: str, world_size: int, pattern: str | None = None
                     ) -> list[tuple[int, str, CheckpointInventory]]:
    """(rank, file name, inventory) for every rank: from a folder of rank files, or a rank manifest."""
    from .sources import open_safetensors

    pattern = pattern or DEFAULT_PATTERN
    if os.path.isdir(spec):
        out = []
        for rank in range(world_size):
            name = rank_file(pattern, rank, world_size)
            path = os.path.join(spec, name)
            if not os.path.isfile(path):
                found = sorted(f for f in os.listdir(spec) if f.endswith(".safetensors"))[:4]
                raise CheckpointError(f"{spec}: no shard for rank {rank} of {world_size} (expected {name})",
                                      hint=f"give the file names with {option('rank-pattern')} (e.g. "
                                           "'tp{rank}.safetensors')"
                                      + (f"; the folder holds {', '.join(found)}" if found else ""))
            out.append((rank, name, open_safetensors(_rank_path(spec, name))))
        return out
    if os.path.isfile(spec) and (spec.endswith(".json") or spec.endswith(".json.gz")):
        obj = load_json_file(spec)
        if not isinstance(obj, dict) or obj.get("format") != RANKS_FORMAT:
            raise CheckpointError(f"{spec}: not a rank manifest ({RANKS_FORMAT}), so it holds no rank's shard",
                                  hint=f"write one with `archviz manifest FOLDER {option('world-size')} N -o FILE`, "
                                       f"or give {option('rank')} R to compare one rank's layout with the whole "
                                       "checkpoint")
        if obj.get("world_size") != world_size:
            raise CheckpointError(f"{spec}: a manifest of {obj.get('world_size')} ranks, not {option('world-size')} "
                                  f"{world_size}", hint=f"use {option('world-size')} {obj.get('world_size')}")
        with refused_as(lambda m: CheckpointError(f"{spec}: {m}", hint="write the manifest again with `archviz "
                                                                        "manifest`")):
            ranks = want_list("ranks", obj.get("ranks"))
            for i, r in enumerate(ranks):
                want_str(f"ranks[{i}].file", want_table(f"ranks[{i}]", r, what="an object").get("file"))
                if want_int(f"ranks[{i}].rank", r.get("rank")) != i:
                    fail(f"ranks[{i}].rank", f"{i} (ranks 0 to {world_size - 1} in order)", r["rank"])
            if len(ranks) != world_size:
                fail("ranks", f"{world_size} entries, one per rank (it has {len(ranks)})")
        return [(r["rank"], r["file"], inventory_from_manifest(r.get("manifest"), source=spec,
                                                                         where=f"{spec} (rank {r['rank']})"))
                for r in ranks]
    raise CheckpointError(f"{option('checkpoint')} {spec}: {option('world-size')} {world_size} without "
                          f"{option('rank')} reads one shard per rank, "
                          "from a folder of rank files or a rank manifest",
                          hint=f"give the folder that holds model{{rank}}-mp{{N}}.safetensors, or {option('rank')} R")


def rank_manifest_text(ranks: Sequence[tuple[int, str, CheckpointInventory]], world_size: int) -> str:
    """The archviz-ranks/1 text: each rank's archviz-manifest/1, with its rank and file name (deterministic)."""
    parts = [json.dumps({"rank": r, "file": name, "manifest": json.loads(manifest_text(inv))},
                        separators=(",", ":"), ensure_ascii=True) for r, name, inv in ranks]
    return (f'{{"format":"{RANKS_FORMAT}",\n"world_size":{world_size},\n"ranks":[\n' + ",\n".join(parts) + "\n]}\n")


def rank_manifest_bytes(ranks: Sequence[tuple[int, str, CheckpointInventory]], world_size: int, gz: bool) -> bytes:
    """The rank manifest's bytes (gzip'd with `gz`), for archviz's one writer (`archviz manifest -o`)."""
    return json_text_bytes(rank_manifest_text(ranks, world_size), gz=gz)


def check_ranks(records: Callable[[int], Any], ranks: Sequence[tuple[int, str, CheckpointInventory]],
                rules: Any = None) -> dict[str, Any]:
    """Each rank's records (`records(rank)`: the model built with world_size=N, rank=r) against its shard: one
    verdict per rank (the comparison `compare` gives, with its rank and file) and one overall."""
    from .compare import EXTRA_KEY, compare

    out = []
    for rank, name, inv in ranks:
        result = compare(records(rank), inv, rules).extra(EXTRA_KEY)
        out.append({"rank": rank, "file": name, **result})
    verdict = "match" if all(r["verdict"] == "match" for r in out) else "mismatch"
    return {"verdict": verdict, "world_size": len(ranks), "ranks": out}


__all__ = ["DEFAULT_PATTERN", "RANKS_FORMAT", "check_ranks", "rank_file", "rank_inventories", "rank_manifest_bytes",
           "rank_manifest_text"]

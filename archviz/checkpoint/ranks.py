"""Per-rank checkpoints: one shard file per tensor-parallel rank, each holding that rank's part of every tensor under
the model's own names (DeepSeek's `convert.py` writes `model{rank}-mp{world_size}.safetensors`), checked rank by
rank against the meta records of `--world-size N --rank r`, headers only.

A folder's rank files are found by a pattern (`{rank}` and `{world_size}` filled in). Their tensors share names
across files, so they are not one checkpoint: `rank_inventories()` opens one inventory per rank, and a rank manifest
(`archviz-ranks/1`: each rank's archviz-manifest/1 with its rank and file name, written by `write_rank_manifest`)
keeps them apart for CI."""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Sequence

from archviz.errors import CheckpointError

from .manifest import inventory_from_manifest, load_json_file, json_text_bytes, manifest_text
from .records import CheckpointInventory

DEFAULT_PATTERN = "model{rank}-mp{world_size}.safetensors"
RANKS_FORMAT = "archviz-ranks/1"


def rank_file(pattern: str, rank: int, world_size: int) -> str:
    """The file name of `rank`'s shard; CheckpointError (exit 2) for a pattern without {rank} or with other fields."""
    if "{rank}" not in pattern:
        raise CheckpointError(f"--rank-pattern {pattern!r}: has no {{rank}}",
                              hint=f"e.g. --rank-pattern {DEFAULT_PATTERN!r}")
    try:
        return pattern.format(rank=rank, world_size=world_size)
    except (KeyError, IndexError, ValueError) as e:
        raise CheckpointError(f"--rank-pattern {pattern!r}: only {{rank}} and {{world_size}} are filled in ({e})",
                              hint=f"e.g. --rank-pattern {DEFAULT_PATTERN!r}") from None


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
                                      hint="give the file names with --rank-pattern (e.g. 'tp{rank}.safetensors')"
                                      + (f"; the folder holds {', '.join(found)}" if found else ""))
            out.append((rank, name, open_safetensors(path)))
        return out
    if os.path.isfile(spec) and (spec.endswith(".json") or spec.endswith(".json.gz")):
        obj = load_json_file(spec)
        if not isinstance(obj, dict) or obj.get("format") != RANKS_FORMAT:
            raise CheckpointError(f"{spec}: not a rank manifest ({RANKS_FORMAT}), so it holds no rank's shard",
                                  hint="write one with `archviz manifest FOLDER --world-size N -o FILE`, or give "
                                       "--rank R to compare one rank's layout with the whole checkpoint")
        if obj.get("world_size") != world_size:
            raise CheckpointError(f"{spec}: a manifest of {obj.get('world_size')} ranks, not --world-size "
                                  f"{world_size}", hint=f"use --world-size {obj.get('world_size')}")
        ranks = obj.get("ranks")
        if not isinstance(ranks, list) or [r.get("rank") if isinstance(r, dict) else None for r in ranks] \
                != list(range(world_size)):
            raise CheckpointError(f"{spec}: \"ranks\" must list ranks 0 to {world_size - 1} in order",
                                  hint="write the manifest again with `archviz manifest`")
        return [(r["rank"], str(r.get("file")), inventory_from_manifest(r.get("manifest"), source=spec,
                                                                         where=f"{spec} (rank {r['rank']})"))
                for r in ranks]
    raise CheckpointError(f"--checkpoint {spec}: --world-size {world_size} without --rank reads one shard per rank, "
                          "from a folder of rank files or a rank manifest",
                          hint="give the folder that holds model{rank}-mp{N}.safetensors, or --rank R")


def rank_manifest_text(ranks: Sequence[tuple[int, str, CheckpointInventory]], world_size: int) -> str:
    """The archviz-ranks/1 text: each rank's archviz-manifest/1, with its rank and file name (deterministic)."""
    parts = [json.dumps({"rank": r, "file": name, "manifest": json.loads(manifest_text(inv))},
                        separators=(",", ":"), ensure_ascii=True) for r, name, inv in ranks]
    return (f'{{"format":"{RANKS_FORMAT}",\n"world_size":{world_size},\n"ranks":[\n' + ",\n".join(parts) + "\n]}\n")


def write_rank_manifest(ranks: Sequence[tuple[int, str, CheckpointInventory]], world_size: int, where: str) -> None:
    """Write the rank manifest to `where` (gzip'd when it ends in .gz) through archviz's one atomic writer."""
    from archviz.files.outputs import write_file

    write_file(where, json_text_bytes(rank_manifest_text(ranks, world_size), gz=where.endswith(".gz")))


def check_ranks(records: Callable[[int], Any], ranks: Sequence[tuple[int, str, CheckpointInventory]],
                rules: Any = None) -> dict[str, Any]:
    """Each rank's records (`records(rank)`: the model built for --world-size N --rank r) against its shard: one
    verdict per rank (the comparison `compare` gives, with its rank and file) and one overall."""
    from .compare import EXTRA_KEY, compare

    out = []
    for rank, name, inv in ranks:
        result = compare(records(rank), inv, rules).extra(EXTRA_KEY)
        out.append({"rank": rank, "file": name, **result})
    verdict = "match" if all(r["verdict"] == "match" for r in out) else "mismatch"
    return {"verdict": verdict, "world_size": len(ranks), "ranks": out}


__all__ = ["DEFAULT_PATTERN", "RANKS_FORMAT", "check_ranks", "rank_file", "rank_inventories", "rank_manifest_text",
           "write_rank_manifest"]

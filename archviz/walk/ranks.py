"""Per-rank tensor shapes: the records of every rank of a tensor-parallel layout (`world_size=N, rank=r` for each
r) folded into one extra on rank 0's record, `extra("ranks")`, that the explorer's node pages read:

    {"world_size": N, "modules": {path: {tensor: [shape on rank 0, shape on rank 1, ...]}}}

A tensor a rank does not hold (a routed expert of another rank) is null there."""

from __future__ import annotations

from typing import Any, Sequence

from ..records import ModelRecord

EXTRA_KEY = "ranks"


def with_rank_shapes(records: Sequence[ModelRecord]) -> ModelRecord:
    """Rank 0's record (`records[r]` is rank r's) with every rank's tensor shapes as `extra("ranks")`."""
    n = len(records)
    modules: dict[str, dict[str, list[Any]]] = {}
    for r, rec in enumerate(records):
        for m in rec.modules:
            for t in m.tensors:
                modules.setdefault(m.path, {}).setdefault(t.name, [None] * n)[r] = list(t.shape)
    return records[0].with_extra(EXTRA_KEY, {"world_size": n, "modules": modules})


__all__ = ["EXTRA_KEY", "with_rank_shapes"]

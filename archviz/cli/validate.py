"""The command line's values checked before anything is read or built: one line (what, where, the fix) and exit 2
for a value no run could use, so that a typo costs no model build and writes nothing.

click checks types (an int is an int); this checks what the types allow and no model does: an empty `--set` key
or one given twice with different values, a layer count below one, an `--input` whose name is empty or whose dims
are not sizes, a batch, sequence, depth or row limit below what the option means, a rank outside the world size.
"""

from __future__ import annotations

import math
from typing import Mapping

from ..errors import ArchvizError


def check_options(*, sets: Mapping[str, list[str] | None] | None = None, inputs: list[str] | None = None,
                  positive: Mapping[str, int | None] | None = None,
                  non_negative: Mapping[str, int | None] | None = None,
                  world_size: int | None = None, rank: int | None = None, timeout: float | None = None) -> None:
    """Raise an ArchvizError (exit 2) for the first option value that no run could use.

    `sets`: flag -> its `key=value` texts (`--set`, `--set-a`, ...); `inputs`: the `--input` specs; `positive` and
    `non_negative`: flag -> an int it must hold at least 1 or at least 0 (None: not given); `timeout`: seconds, a
    finite number (click checks its minimum; `inf` would be no deadline at all)."""
    for flag, texts in (sets or {}).items():
        if texts:
            from ..sources.options import check_overrides  # only when there are overrides: a cache hit builds nothing

            check_overrides(texts, flag)
    if inputs:
        from ..input_specs import check_input_specs

        check_input_specs(inputs)
    for flag, value in (positive or {}).items():
        if value is not None and value < 1:
            raise ArchvizError(f"{flag} {value}: must be at least 1", hint=_fix(flag))
    for flag, value in (non_negative or {}).items():
        if value is not None and value < 0:
            raise ArchvizError(f"{flag} {value}: cannot be negative", hint=_fix(flag))
    if timeout is not None and not math.isfinite(timeout):
        raise ArchvizError(f"--timeout {timeout}: must be a finite number of seconds",
                           hint="e.g. --timeout 10 (each hf:// request; the whole read gets 30 times that)")
    if world_size is not None and world_size < 1:
        raise ArchvizError(f"--world-size {world_size}: must be at least 1", hint="e.g. --world-size 8")
    if rank is not None:
        if rank < 0:
            raise ArchvizError(f"--rank {rank}: cannot be negative", hint="ranks count from 0, e.g. --rank 0")
        if rank >= (world_size or 1):
            raise ArchvizError(f"--rank {rank} is outside --world-size {world_size or 1} (ranks 0 to "
                               f"{(world_size or 1) - 1})", hint="give a rank below the world size")


_EXAMPLES = {"--batch": "--batch 2", "--gpus": "--gpus 8", "--seq": "--seq 16", "--depth": "--depth 3", "--limit": "--limit 40"}


def _fix(flag: str) -> str:
    example = _EXAMPLES.get(flag)
    return f"e.g. {example}, or leave it out for the default" if example else "leave it out for the default"


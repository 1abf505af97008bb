"""torch.distributed's collectives answered on meta: a model laid out for rank R of N (`--world-size N --rank R`)
calls `dist.all_reduce`, `dist.all_gather`, ... in its forward; on meta they move nothing and change no shape, so the
pass answers them in place (an all-gather's outputs keep the shapes the code allocated) and notes each one on the
module that made it. `dist.get_world_size()` and `dist.get_rank()` answer the build's N and R meanwhile."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from ..sources.reference import process_group_as

# Collectives whose outputs are the tensors the caller passed (in place, or lists it allocated): nothing to compute.
_IN_PLACE = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
             "broadcast", "reduce", "all_to_all", "all_to_all_single", "barrier", "gather", "scatter")


@contextlib.contextmanager
def meta_collectives(world_size: int, rank: int, assume: Callable[[str], None]) -> Iterator[None]:
    """While inside, the collectives of torch.distributed return without communicating (`assume` told which ran),
    and the process group answers `world_size` and `rank`. Nothing changes when `world_size` is 1."""
    if world_size <= 1:
        yield
        return
    import torch.distributed as dist

    def answered(name: str) -> Callable[..., Any]:
        def collective(*args: Any, **kwargs: Any) -> None:
            assume(f"dist.{name} answered on meta: no communication, shapes as allocated (world size {world_size})")
            return None

        return collective

    replaced: dict[str, Any] = {n: getattr(dist, n) for n in _IN_PLACE if hasattr(dist, n)}
    for n in replaced:
        setattr(dist, n, answered(n))
    try:
        with process_group_as(world_size, rank):
            yield
    finally:
        for n, f in replaced.items():
            setattr(dist, n, f)


__all__ = ["meta_collectives"]

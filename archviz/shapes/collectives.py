"""torch.distributed collectives during the meta pass: called with no process group (reference code broadcasts or
all-reduces unconditionally, as DeepSeek-V3.2's indexer does), or on meta tensors no backend can move, they are
answered as the rank the build was asked for (`world_size=N, rank=R`, else 1 and 0) would see them: every
collective writes into tensors the caller sized, so the shapes are the caller's; what lands there is the rank's own
data (its chunk, for a reduce-scatter), and each answer is noted where the code made it."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch

from ..sources.reference import process_group_as

# the collectives answered, each by what the rank's own tensors would hold at the end
_NAMES = ("broadcast", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "all_gather_single",
          "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "all_to_all_single", "barrier")


class _Done:
    """The work handle of a collective run with async_op=True: already complete."""

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _copy(dst: Any, src: Any) -> None:
    if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and dst is not src:
        dst.copy_(src.reshape(dst.shape) if src.numel() == dst.numel() else src.expand_as(dst))


def _answer(name: str, args: tuple, kwargs: dict, world: int, rank: int) -> None:
    """The rank's tensors after the collective `name`, at world size `world`: shapes never change."""
    if name == "all_gather":
        out, x = (list(args) + [kwargs.get("tensor_list"), kwargs.get("tensor")])[:2]
        for t in out or ():
            _copy(t, x)
    elif name in ("all_gather_into_tensor", "all_gather_single"):
        out, x = (list(args) + [kwargs.get("output_tensor"), kwargs.get("input_tensor")])[:2]
        if isinstance(out, torch.Tensor) and isinstance(x, torch.Tensor) and out.numel() == world * x.numel():
            _copy(out.view(world, *x.shape)[rank], x)
    elif name == "reduce_scatter":
        out, xs = (list(args) + [kwargs.get("output"), kwargs.get("input_list")])[:2]
        if xs:
            _copy(out, xs[min(rank, len(xs) - 1)])
    elif name in ("reduce_scatter_tensor", "reduce_scatter_single"):
        out, x = (list(args) + [kwargs.get("output"), kwargs.get("input")])[:2]
        if isinstance(out, torch.Tensor) and isinstance(x, torch.Tensor) and x.numel() == world * out.numel():
            _copy(out, x.reshape(world, *out.shape)[rank])
    elif name == "all_to_all_single":
        out, x = (list(args) + [kwargs.get("output"), kwargs.get("input")])[:2]
        if isinstance(out, torch.Tensor) and isinstance(x, torch.Tensor) and out.shape == x.shape:
            _copy(out, x)
    # broadcast, all_reduce, reduce, barrier: in place, the tensor keeps its shape (and on meta, has no data)


def _any_meta(args: Any) -> bool:
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_meta:
            return True
        if isinstance(a, (list, tuple)) and _any_meta(a):
            return True
    return False


@contextlib.contextmanager
def collectives_answered(world_size: int, rank: int, assume: Callable[[str], None]) -> Iterator[None]:
    """While inside, `torch.distributed.<collective>(...)` with no initialized process group, or on a meta tensor, is
    answered as rank `rank` of `world_size` sees it (see the module docstring), and `assume` is told so."""
    import torch.distributed as dist

    really_initialized = dist.is_initialized if dist.is_available() else (lambda: False)
    saved = {n: getattr(dist, n) for n in _NAMES if hasattr(dist, n)}
    world = max(1, int(world_size or 1))
    rank = min(max(0, int(rank or 0)), world - 1)

    def make(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def collective(*args: Any, **kwargs: Any) -> Any:
            initialized = dist.is_available() and really_initialized()
            if initialized and not _any_meta((*args, *kwargs.values())):
                return original(*args, **kwargs)
            why = "on meta tensors" if initialized else "with no process group"
            assume(f"dist.{name} {why}: answered as rank {rank} of {world} sees it (shapes the caller's, "
                   "no data moved)")
            _answer(name, args, kwargs, world, rank)
            return _Done() if kwargs.get("async_op") else None

        collective.__wrapped__ = original  # type: ignore[attr-defined]
        return collective

    for n, f in saved.items():
        setattr(dist, n, make(n, f))
    try:
        # dist.get_world_size() / get_rank() answer the rank's N and R meanwhile (nothing changes at world size 1)
        with process_group_as(world, rank) if world > 1 else contextlib.nullcontext():
            yield
    finally:
        for n, f in saved.items():
            setattr(dist, n, f)


__all__ = ["collectives_answered"]

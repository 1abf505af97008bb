"""The block memo across a transformers cache: a decoder layer called with `past_key_values` changes one layer of
the cache (its own, `cache.layers[layer_idx]`), so an identical layer is answered from the memo when its own cache
layer holds what the first one's held before it ran (shapes, dtypes and counts, never values), and the answer
leaves that cache layer as the first one's was left. A layer that touched any other cache layer, or the cache's
length, is not memoised; a cache whose state is not tensors, numbers and names is not either."""

from __future__ import annotations

from typing import Any

import torch

from .layerpaths import plain
from .policy import Uncacheable, memo_key

_LEAVES = (int, float, bool, str, type(None), torch.dtype, torch.device)


def _is_cache(v: Any) -> bool:
    return isinstance(getattr(v, "layers", None), list) and hasattr(v, "update")


def state(obj: Any, depth: int = 0) -> Any:
    """A hashable picture of a cache layer's state: tensors by shape, stride and dtype; numbers and names as they
    are; into dicts, lists and tuples."""
    if isinstance(obj, torch.Tensor):
        if obj.device.type != "meta":
            raise Uncacheable
        return ("t", tuple(obj.shape), obj.stride(), obj.dtype)
    if isinstance(obj, _LEAVES):
        return ("v", obj)
    if depth < 4 and isinstance(obj, dict):
        return ("d", tuple((k, state(v, depth + 1)) for k, v in obj.items()))
    if depth < 4 and isinstance(obj, (list, tuple)):
        return ("l" if isinstance(obj, list) else "u", tuple(state(v, depth + 1) for v in obj))
    raise Uncacheable


def rebuild(spec: Any) -> Any:
    if spec[0] == "t":
        return torch.empty_strided(spec[1], spec[2], dtype=spec[3], device="meta")
    kind, v = spec
    if kind == "v":
        return v
    if kind == "d":
        return {k: rebuild(x) for k, x in v}
    parts = [rebuild(x) for x in v]
    return parts if kind == "l" else tuple(parts)


def layer_state(layer: Any) -> tuple:
    return tuple((k, state(v)) for k, v in vars(layer).items())


class CacheMemo:
    """For one memoised block: its cache layer index, found once (`layer_idx` on it or the first module below)."""

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self._index: int | None | bool = False  # not looked up yet

    def index(self) -> int | None:
        if self._index is False:
            self._index = None
            for m in self.module.modules():
                v = getattr(m, "layer_idx", None)
                if isinstance(v, int) and not isinstance(v, bool):
                    self._index = plain(v)  # read, not decided on: no decision noted if it is tracked
                    break
        return self._index  # type: ignore[return-value]

    def key(self, kwargs: dict) -> tuple[Any, Any]:
        """(the memo key of the kwargs, the cache among them or None); Uncacheable where it cannot be keyed."""
        caches = [k for k, v in kwargs.items() if _is_cache(v)]
        if not caches:
            return memo_key(kwargs), None
        j = self.index()
        if len(caches) > 1 or j is None:
            raise Uncacheable
        cache = kwargs[caches[0]]
        if not 0 <= j < len(cache.layers):
            raise Uncacheable
        rest = tuple((k, ("cache", type(cache).__name__, layer_state(cache.layers[j])) if k == caches[0]
                      else memo_key(v)) for k, v in kwargs.items())
        return rest, cache

    def snapshot(self, cache: Any) -> tuple | None:
        try:
            return tuple(layer_state(x) for x in cache.layers)
        except Uncacheable:
            return None

    def effect(self, cache: Any, before: tuple | None) -> tuple | None:
        """What the run left in the block's own cache layer, None if it changed anything else."""
        if before is None:
            return None
        after = self.snapshot(cache)
        j = self.index()
        if after is None or len(after) != len(before) or j is None or \
                any(a != b for i, (a, b) in enumerate(zip(before, after)) if i != j):
            return None
        return after[j]

    def apply(self, cache: Any, effect: tuple) -> None:
        layer = cache.layers[self.index()]  # type: ignore[index]
        for name, spec in effect:
            setattr(layer, name, rebuild(spec))


__all__ = ["CacheMemo"]

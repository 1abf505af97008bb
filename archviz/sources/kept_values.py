"""The values of a model's small integer bookkeeping kept through a forward on meta: while `values_kept()` is
entered (archviz.cost's decode step with a cache object, from the cache's construction through its fill and the
counted step), a small integer or bool tensor of defined values (`torch.zeros(b, dtype=torch.long,
device=cache.device)`, `torch.tensor(seqlens)`, `torch.arange(p, p + n)`; at most `meta.TWIN_NUMEL` elements) is
made on meta as before and keeps a CPU twin: the twins of the meta build (`sources.meta`, the rule for small tensors
made without a device while building) carried through the ops made of twinned tensors only (`filled += n`,
`.clamp(max=w)`, iteration), so reads of their values (`.tolist()`, `.item()`, `if n < size:`, a slice bound)
answer the values the code computed: how full a cache is, the positions a step writes, the keys it attends over.
Floating-point tensors (activations, the cache's storage) keep none; every tensor stays on meta. The twins' ops run
with the pass's dispatch modes off, so they are neither counted nor traced."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import _disable_current_modes

from . import meta
from .meta import _ANSWERED_METHODS, _READERS, _VALUE_CONSTRUCTORS, ARCHVIZ_DIR, TWIN_NUMEL, MetaNotes, _MetaMode

_TORCH_DIR = os.path.dirname(torch.__file__)
_MODE_FILES = frozenset({os.path.abspath(__file__), os.path.abspath(meta.__file__)})

_ACTIVE: list["_KeptValues"] = []  # the modes entered, innermost last


def _small_integers(t: torch.Tensor) -> bool:
    """An integer or bool tensor of at most TWIN_NUMEL elements: bookkeeping, not activations or storage."""
    return not t.dtype.is_floating_point and not t.dtype.is_complex and t.numel() <= TWIN_NUMEL


def _made_by_archviz() -> bool:
    """The tensor being made is archviz's own (the token ids a pass feeds, all zeros, whose values stand for no real
    input), not the model code's: the first frame outside torch and this mode lies in archviz."""
    f: Any = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(_TORCH_DIR) or f.f_code.co_filename in _MODE_FILES):
        f = f.f_back
    return f is not None and f.f_code.co_filename.startswith(ARCHVIZ_DIR)


class _KeptValues(_MetaMode):
    """The meta build's twins over a forward on meta: constructors keep the device the pass gives them."""

    made = "kept"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _READERS and args and isinstance(args[0], torch.Tensor) and args[0] in self.twins:
            with _disable_current_modes():  # the twin's read is archviz's, not the model's
                return super().__torch_function__(func, types, args, kwargs)
        if func in _ANSWERED_METHODS:  # `.to(...)`, `.cuda()`: as the pass answers them; the values follow
            out = func(*args, **(kwargs or {}))
            source = args[0] if args and isinstance(args[0], torch.Tensor) else None
            twin = None if source is None else self.twins.get(source) if source.is_meta else source.clone()
            if twin is not None and isinstance(out, torch.Tensor) and out.is_meta and out is not source and \
                    _small_integers(out):  # a CPU tensor of values moved to meta (`torch.tensor(ids).to(device)`)
                with _disable_current_modes():
                    self.twins[out] = twin.to(out.dtype)
            return out
        return super().__torch_function__(func, types, args, kwargs)

    def _on_twins(self, func: Any, args: tuple, kwargs: dict) -> Any:
        first = next((a for x in args for a in (x if isinstance(x, (list, tuple)) else (x,))
                      if isinstance(a, torch.Tensor)), None)
        if first is None or first not in self.twins:  # an activation: no twin, and no modes popped for it
            raise LookupError
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # a few thousand values: a busy pool's hand-offs cost more than the op
        try:
            with _disable_current_modes():
                return super()._on_twins(func, args, kwargs)
        finally:
            torch.set_num_threads(threads)

    def _construct(self, func: Any, args: tuple, kwargs: dict) -> Any:
        out = func(*args, **kwargs)
        if func in _VALUE_CONSTRUCTORS and isinstance(out, torch.Tensor) and out.is_meta and _small_integers(out) \
                and not _made_by_archviz():
            try:
                with _disable_current_modes():
                    self.twins[out] = func(*args, **{**kwargs, "device": "cpu"})
            except Exception:  # noqa: BLE001 - the twin is a convenience; the meta tensor stands as it is
                pass
        return out


@contextlib.contextmanager
def values_kept() -> Iterator[MetaNotes]:
    """Small integer and bool tensors keep their values while inside (see the module doc); the notes name each
    place the code read them."""
    notes = MetaNotes()
    mode = _KeptValues(notes)
    _ACTIVE.append(mode)
    try:
        with mode:
            yield notes
    finally:
        _ACTIVE.remove(mode)


def kept_value(t: torch.Tensor, what: str) -> torch.Tensor | None:
    """The CPU twin of meta tensor `t` that an entered `values_kept()` holds (its read `what` noted), else None:
    for readers that bypass the function mode (the meta pass's own `Tensor.tolist`)."""
    for mode in reversed(_ACTIVE):
        twin = mode.twins.get(t)
        if twin is not None:
            mode.notes.read(f"{what}() of a tensor {mode.made}")
            return twin
    return None


__all__ = ["values_kept", "kept_value"]

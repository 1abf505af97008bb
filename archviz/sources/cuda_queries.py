"""torch.cuda's queries answered while a model is built on meta, on a machine without a GPU.

Constructors ask which GPU they are on (`torch.cuda.current_device()`), how many there are, what they can do
(`get_device_capability()`, `get_device_properties(0).total_memory`, `is_bf16_supported()`), or wait on them
(`synchronize()`, `empty_cache()`), or make streams and events (`torch.cuda.Stream()`, `with torch.cuda.device(i):`);
without CUDA each raises, though a meta build needs none of the answers. Inside
`cuda_answered(answer)` each is answered as one GPU of `ASSUMED` would (device 0, one device), and `answer(what, how)`
is told once per call site, for the build's notes. `torch.cuda.is_available()` keeps its true answer (False), so a
model that branches on it builds the way it would here; `torch.cuda.set_device` is always neutralised. Where CUDA is
there, the queries are the real ones.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Iterator

import torch

#: The GPU a query is answered as (an 80 GB compute capability 8.0 part).
ASSUMED = types.SimpleNamespace(name="meta (no GPU: answered by archviz)", major=8, minor=0,
                                total_memory=80 * 1024 ** 3, multi_processor_count=108, is_integrated=False,
                                is_multi_gpu_board=False, L2_cache_size=40 * 1024 ** 2, warp_size=32)

class _Stream:
    """A CUDA stream or event where there is no GPU: every method a no-op, usable as a context manager."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.device = kwargs.get("device")

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None

    def __enter__(self) -> "_Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


_ANSWERS: dict[str, Callable[..., Any]] = {
    "device": _Stream,  # `with torch.cuda.device(i):`
    "stream": _Stream,  # `with torch.cuda.stream(s):`
    "Stream": _Stream,
    "Event": _Stream,
    "current_stream": _Stream,
    "default_stream": _Stream,
    "current_device": lambda *a, **k: 0,
    "device_count": lambda *a, **k: 1,
    "get_device_capability": lambda *a, **k: (ASSUMED.major, ASSUMED.minor),
    "get_device_properties": lambda *a, **k: ASSUMED,
    "get_device_name": lambda *a, **k: ASSUMED.name,
    "is_bf16_supported": lambda *a, **k: True,
    "synchronize": lambda *a, **k: None,
    "empty_cache": lambda *a, **k: None,
    "memory_allocated": lambda *a, **k: 0,
    "max_memory_allocated": lambda *a, **k: 0,
    "memory_reserved": lambda *a, **k: 0,
    "reset_peak_memory_stats": lambda *a, **k: None,
}


def _shown(value: Any) -> str:
    if value is ASSUMED:
        return f"as an {ASSUMED.total_memory // 1024 ** 3} GiB compute capability {ASSUMED.major}.{ASSUMED.minor} GPU"
    return repr(value)


def _answering(name: str, fn: Callable[..., Any], answer: Callable[[str, str], None]) -> Any:
    """`fn` (a query, or the no-op class standing for a type) answering as torch.cuda's `name` and noting each call.
    A type stays a type, so module code that annotates with it (`torch.cuda.Stream | None`) or checks
    `isinstance` against it still imports and runs."""

    def noted(value: Any) -> Any:
        answer(f"torch.cuda.{name}()",
               "skipped (no GPU here: built on meta)" if value is None or isinstance(value, _Stream) else
               f"answered {_shown(value)} (no GPU here: built on meta)")
        return value

    if isinstance(fn, type):
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            fn.__init__(self, *args, **kwargs)
            noted(self)

        return type(name, (fn,), {"__init__": __init__})
    return lambda *args, **kwargs: noted(fn(*args, **kwargs))


@contextlib.contextmanager
def cuda_answered(answer: Callable[[str, str], None]) -> Iterator[None]:
    """torch.cuda's queries answered inside (see the module doc); `answer(what, how)` notes each."""
    cuda = torch.cuda
    saved = {"set_device": cuda.set_device}

    def set_device(device: Any) -> None:
        answer(f"torch.cuda.set_device({device!r})", "neutralised: built on meta")

    cuda.set_device = set_device  # type: ignore[assignment]
    if not cuda.is_available():
        for name, fn in _ANSWERS.items():
            saved[name] = getattr(cuda, name)

            setattr(cuda, name, _answering(name, fn, answer))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(cuda, name, fn)

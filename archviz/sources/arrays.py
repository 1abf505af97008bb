"""Weights made in numpy during a meta build, never allocated.

Code that makes its weights in numpy and wraps them (`nn.Parameter(torch.from_numpy(np.random.randn(V, D)))`,
`torch.tensor(np.random.uniform(-b, b, size=(n, m)).astype(np.float32))`) would allocate every weight for real, meta
build or not. Inside `unallocated_arrays(notes)`, numpy's random draws of at least `LARGE_NUMEL` values (`np.random`'s
functions, and the methods of the `default_rng()` generators made inside) give an `Unallocated` array
instead: one value broadcast to the shape, no memory behind it, which stays so through elementwise arithmetic,
`astype`, `copy`, reshapes and slices. `wrapped_on_meta` turns a large array the code wraps (`torch.from_numpy`,
`torch.tensor`, `torch.as_tensor`, `torch.asarray`) into a meta tensor of its shape and dtype, with no copy. The values
of such arrays are not what numpy would have drawn: a meta build reads no weight values, and smaller draws (a
permutation, a handful of rates) are drawn for real.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np
import torch

#: The fewest values a draw or a wrapped array must have to stand unallocated (512 KiB of float64).
LARGE_NUMEL = 1 << 16

# numpy's draws of floats, and where each takes its size: the dims as arguments (randn, rand) or `size` (its index).
_DRAWS: dict[str, int | None] = {"randn": None, "rand": None, "random": 0, "random_sample": 0, "ranf": 0,
                                 "sample": 0, "standard_normal": 0, "normal": 2, "uniform": 2, "laplace": 2,
                                 "logistic": 2, "gumbel": 2, "exponential": 1}


class Unallocated(np.ndarray):
    """A numpy array with no values behind it: one value broadcast to its shape (strides 0)."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is not None and all(isinstance(o, Unallocated) for o in out):  # `w *= 2`: nothing to write
            return out[0] if len(out) == 1 else out
        if method == "__call__" and ufunc.nout == 1 and out is None and \
                all(isinstance(x, Unallocated) and x.size or np.ndim(x) == 0 for x in inputs):
            shape = np.broadcast_shapes(*(np.shape(x) for x in inputs))
            first = tuple(x.view(np.ndarray)[(0,) * x.ndim] if isinstance(x, Unallocated) else x for x in inputs)
            return unallocated(ufunc(*first, **kwargs), shape)
        plain = tuple(x.view(np.ndarray) if isinstance(x, Unallocated) else x for x in inputs)
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, Unallocated) else o for o in out)
        return getattr(ufunc, method)(*plain, **kwargs)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return unallocated(np.asarray(self._value()).astype(dtype), self.shape)

    def copy(self, order: Any = "C") -> Any:  # type: ignore[override]
        return self

    def __setitem__(self, key: Any, value: Any) -> None:  # its values are not kept: nothing to write
        return None

    def _value(self) -> Any:
        return self.view(np.ndarray)[(0,) * self.ndim] if self.size else np.zeros((), self.dtype)


def unallocated(value: Any, shape: tuple[int, ...]) -> Unallocated:
    """`value` broadcast to `shape`, as an Unallocated array."""
    return np.broadcast_to(np.asarray(value), shape).view(Unallocated)


def _size_of(name: str, args: tuple, kwargs: dict) -> tuple[int, ...] | None:
    where = _DRAWS[name]
    if where is None:
        dims = args
    else:
        dims = kwargs.get("size", args[where] if len(args) > where else None)
    if dims is None:
        return None
    if isinstance(dims, (int, np.integer)):
        dims = (dims,)
    if not isinstance(dims, (tuple, list)) or len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0] if isinstance(dims, (tuple, list)) and dims else dims
    try:
        return tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        return None


def _drawn(fn: Callable, name: str, note: Callable[[str, str], None]) -> Callable:
    def draw(*args: Any, **kwargs: Any) -> Any:
        shape = _size_of(name, args, kwargs)
        arrays = any(isinstance(a, np.ndarray) and a.ndim for a in (*args, *kwargs.values()))  # loc per row: real
        if shape is None or arrays or int(np.prod(shape, dtype=np.int64)) < LARGE_NUMEL:
            return fn(*args, **kwargs)
        note(f"np.random.{name}() of {int(np.prod(shape, dtype=np.int64)):,} values",
             "not drawn: stood in unallocated (a meta build reads no weight values)")
        return unallocated(np.zeros((), kwargs.get("dtype", np.float64)), shape)

    return draw


class _Drawing:
    """A numpy Generator whose large draws stand unallocated."""

    def __init__(self, real: Any, note: Callable[[str, str], None]):
        self._real = real
        self._note = note

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        return _drawn(attr, name, self._note) if name in _DRAWS else attr


@contextlib.contextmanager
def unallocated_arrays(note: Callable[[str, str], None]) -> Iterator[None]:
    """numpy's large random draws stand unallocated inside, and `torch.from_numpy` of a large array is a meta tensor;
    `note(what, how)` is told of each."""
    rnd = np.random
    saved = {name: getattr(rnd, name) for name in (*_DRAWS, "default_rng") if hasattr(rnd, name)}
    from_numpy = torch.from_numpy

    def wrap(array: Any) -> torch.Tensor:  # torch.from_numpy passes by no function mode: answered here
        wrapped = wrapped_on_meta(from_numpy, (array,), {}, note)
        return from_numpy(array) if wrapped is None else wrapped

    torch.from_numpy = wrap  # type: ignore[assignment]
    try:
        for name in _DRAWS:
            if name in saved:
                setattr(rnd, name, _drawn(saved[name], name, note))
        maker = saved["default_rng"]
        rnd.default_rng = lambda *a, **k: _Drawing(maker(*a, **k), note)
        yield
    finally:
        torch.from_numpy = from_numpy  # type: ignore[assignment]
        for name, fn in saved.items():
            setattr(rnd, name, fn)


#: torch's functions that wrap a numpy array as a tensor and pass by a function mode (`from_numpy` does not).
ARRAY_WRAPPERS = frozenset(getattr(torch, n) for n in ("tensor", "as_tensor", "asarray")
                           if hasattr(torch, n))


def wrapped_on_meta(func: Any, args: tuple, kwargs: dict, note: Callable[[str, str], None]) -> torch.Tensor | None:
    """A large numpy array wrapped as a tensor (`func` one of ARRAY_WRAPPERS) as a meta tensor of its shape and
    dtype, never copied; None for anything else."""
    arr = args[0] if args else kwargs.get("data", kwargs.get("obj"))
    if not isinstance(arr, np.ndarray) or (arr.size < LARGE_NUMEL and not isinstance(arr, Unallocated)):
        return None
    dtype = kwargs.get("dtype") or torch.from_numpy(np.zeros(0, arr.dtype)).dtype
    out = torch.empty(arr.shape, dtype=dtype, device="meta")
    if kwargs.get("requires_grad"):
        out.requires_grad_(True)
    note(f"torch.{func.__name__}() of a numpy array of {arr.size:,} values", "made a meta tensor, never copied")
    return out

"""The meta forward pass: every module call's input and output shapes, symbolic dims and call sites.

The model runs on the meta device with hooks on every module. What meta cannot answer (a tensor's value: `.item()`,
`.tolist()`, a boolean test, `nonzero`, `bincount`, masked indexing) is answered by a deterministic policy, and every
answer is recorded as an assumption on the module where it was made:

- a boolean test on a tensor takes the common path: it holds (e.g. "the attention mask is all ones");
- routing: `topk` indices over E choices are spread evenly, so a test `indices == e` holds for 1/E of them,
  `bincount` gives every bin numel/E, and `nonzero`/`where`/masked indexing return ceil(numel · fraction) rows:
  every expert receives ceil(B·T·k/E) tokens (dim symbol `R`); a k-hot `scatter` of top-k indices holds k/E;
- counts read with `.tolist()` that must add up (sizes for `split`, JetMoE) keep their whole total: B·T·k spread
  as evenly as possible, the first counts one larger where it does not divide (both sizes are `R`);
- a mask with no known fraction is all true, so its negation holds none, and masks concatenated hold the share
  of their parts; an integer read from a tensor with no known value is 1; a float, 0.0; integers of unknown value
  summed count 1 each (so a total of durations agrees with repeat_interleave's 1 each), and the max or min of equal
  values is that value.

Stubbed kernels (modules that could not import) are answered by the rules in `archviz.kernels`; a kernel without a
rule stops the pass with a message that names it and says how to declare one.

Dims are named after the pass: B (batch) and T (positions) are run at values chosen to collide with no width of the
model, so a dim equal to B, T or B·T is that symbol; every other dim is a fixed int.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import linecache
import math
import operator
import os
import sys
import weakref
from contextlib import nullcontext
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import kernels, stubs
from .gcpause import collector_paused
from .meta import strays_to_meta, unset_field_hint, warnings_noted
from .errors import ShapeError
from .records import Call, CallSite, ModelRecord, ModuleRecord
from .sources import Built

aten = torch.ops.aten

_TORCH_DIR = os.path.dirname(torch.__file__)
_ARCHVIZ_DIR = os.path.dirname(__file__)
# torch.nn.Module's call machinery: frames whose `self` is the module being called, never a parent calling a child
_CALL_MACHINERY = frozenset(("_call_impl", "_wrapped_call_impl", "inner", "_fn", "__call__"))
_MAX_CALLS = 8  # distinct call signatures kept per module

ROUTED = "R"


@dataclasses.dataclass
class _Prov:
    range: int | None = None  # integer values in [0, range)
    density: float | None = None  # fraction of True in a bool tensor
    value: float | None = None  # expected value of each element
    parent: Any = None  # weakref to the tensor this one is a view or reshape of


class _Policy:
    """Provenance of meta tensors and the policy answers, with the assumptions they imply."""

    def __init__(self, tracer: "Tracer"):
        self.tracer = tracer
        self._prov: dict[int, tuple[weakref.ref, _Prov]] = {}
        self.policy_sizes: set[int] = set()
        self.split_sizes: set[int] = set()  # counts spread exactly by .tolist(): routed sizes when split() takes them

    def get(self, t: Any) -> _Prov | None:
        if not isinstance(t, torch.Tensor):
            return None
        hit = self._prov.get(id(t))
        if hit is None or hit[0]() is not t:
            return None
        return hit[1]

    def set(self, t: torch.Tensor, prov: _Prov) -> None:
        key = id(t)
        self._prov[key] = (weakref.ref(t, lambda _r, k=key: self._prov.pop(k, None)), prov)

    def assume(self, text: str) -> None:
        self.tracer.assume(text)


def _numel(shape: Any) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


class _Uncacheable(Exception):
    pass


_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)


def _key(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        if obj.device.type != "meta":
            raise _Uncacheable
        return (tuple(obj.shape), obj.stride(), obj.dtype)
    if isinstance(obj, (tuple, list)):
        return tuple(_key(x) for x in obj)
    if isinstance(obj, dict):
        return tuple((k, _key(v)) for k, v in obj.items())
    if isinstance(obj, _SCALARS):
        return (type(obj), obj)
    raise _Uncacheable


def _spec(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return ("t", tuple(out.shape), out.stride(), out.dtype) if out.device.type == "meta" else None
    if out is None:  # a block's tuple may hold None (XLNet's layers: (output_h, None) without a query stream)
        return ("none",)
    if isinstance(out, (tuple, list)):
        parts = [_spec(o) for o in out]
        if any(p is None for p in parts):
            return None
        return ("tuple" if isinstance(out, tuple) else "list", tuple(parts))
    return None


def _rebuild(spec: Any) -> Any:
    if spec[0] == "t":
        return torch.empty_strided(spec[1], spec[2], dtype=spec[3], device="meta")
    if spec[0] == "none":
        return None
    parts = [_rebuild(p) for p in spec[1]]
    return tuple(parts) if spec[0] == "tuple" else parts


_NOT_MEMO = {aten.empty.memory_format, aten.empty_strided.default}


# Ops whose result depends on values, which the policy answers for meta tensors.
_POLICY_OPS = frozenset(op for op in (
    aten._local_scalar_dense.default, aten.nonzero.default, aten.argwhere.default, aten.nonzero_numpy.default,
    aten.where.default, aten.masked_select.default, aten.bincount.default, aten.index.Tensor,
    aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default, aten.repeat_interleave.Tensor,
    aten._unique2.default, aten.unique_dim.default, aten.unique_consecutive.default))


def _any_meta(args: Any) -> bool:
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.is_meta:
                return True
        elif isinstance(a, (list, tuple)) and _any_meta(a):
            return True
    return False


class _DispatchPolicy(TorchDispatchMode):
    def __init__(self, policy: _Policy, observer: Callable[..., None] | None = None):
        super().__init__()
        self.p = policy
        self.observer = observer  # op_observer(func, args, kwargs, out, module path) after every aten op (archviz.cost)
        self._memo: dict = {}
        self._cacheable: dict = {}

    def _rows(self, mask: torch.Tensor) -> int:
        prov = self.p.get(mask)
        n = mask.numel()
        if mask.dtype != torch.bool:
            if prov is not None and prov.value is not None:
                return n if prov.value else 0
            self.p.assume(f"nonzero of a {mask.dtype} tensor: all {n} elements assumed non-zero")
            return n
        if prov is None or prov.density is None:
            self.p.assume(f"mask of {n} elements with no known fraction: assumed all true")
            return n
        rows = math.ceil(n * prov.density)
        self.p.policy_sizes.add(rows)
        return rows

    def _nonzero(self, mask: torch.Tensor) -> torch.Tensor:
        return torch.empty((self._rows(mask), mask.dim()), dtype=torch.long, device="meta")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = self._answer(func, types, args, kwargs)
        if self.observer is not None:
            stack = self.p.tracer.stack
            self.observer(func, args, kwargs or {}, out, stack[-1] if stack else "")
        return out

    def _answer(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        p = self.p
        if func in _POLICY_OPS and not _any_meta(args):
            # Real tensors have real values: `torch.div(seq_len, window, rounding_mode="trunc") - 1` (LED's chunk
            # count, a CPU scalar) is read for what it is, never answered by the policy.
            return func(*args, **kwargs)
        if func is aten._local_scalar_dense.default:
            return self._scalar(args[0])
        if func in (aten.nonzero.default, aten.argwhere.default):
            return self._nonzero(args[0])
        if func is aten.nonzero_numpy.default or (func is aten.where.default and len(args) == 1):
            nz = self._nonzero(args[0])
            return tuple(nz[:, i] for i in range(nz.shape[1]))
        if func is aten.nonzero_static.default:
            return func(*args, **kwargs)
        if func is aten.masked_select.default:
            x, mask = args
            return torch.empty((self._rows(torch.broadcast_to(mask, torch.broadcast_shapes(x.shape, mask.shape))),),
                               dtype=x.dtype, device="meta")
        if func is aten.bincount.default:
            x = args[0]
            minlength = kwargs.get("minlength", args[2] if len(args) > 2 else 0) or 0
            prov = p.get(x)
            bins = max(minlength, prov.range if prov and prov.range else 0)
            if minlength and not (prov and prov.range):
                # Values of unknown range counted into `minlength` bins (e.g. experts picked by a hash table):
                # assume they spread evenly over those bins, so later tests `x == e` hold for 1/minlength of them
                # -- on the tensor counted and on what it is a view of (`bincount(indices.flatten())`).
                t: Any = x
                while t is not None:
                    old = p.get(t)
                    p.set(t, _Prov(range=minlength, parent=old.parent if old else None))
                    t = old.parent() if old is not None and old.parent is not None else None
                p.assume(f"values of unknown range assumed spread evenly over {minlength} bins")
            if bins == 0:
                bins = max(minlength, 1)
                p.assume("bincount of values with no known range: one bin assumed")
            out = torch.empty((bins,), dtype=torch.long, device="meta")
            p.set(out, _Prov(value=x.numel() / bins))
            return out
        if func in (aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default):
            indices = args[1]
            if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
                new: list[Any] = []
                for i in indices:
                    if i is not None and i.dtype in (torch.bool, torch.uint8):
                        nz = self._nonzero(i)
                        new.extend(nz.unbind(1) if i.dim() else [nz[:, 0]])
                    else:
                        new.append(i)
                args = (args[0], new, *args[2:])
        if func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None and len(args) < 3:
            reps = args[0]
            prov = p.get(reps)
            total = int(math.ceil((prov.value if prov and prov.value is not None else 1) * reps.numel()))
            if not (prov and prov.value is not None):
                p.assume("repeat_interleave with unknown repeats: 1 each")
            kwargs = {**kwargs, "output_size": total}
        if func in (aten.split_with_sizes.default, aten.split_with_sizes_copy.default) and p.split_sizes:
            p.policy_sizes.update(set(args[1]) & p.split_sizes)
        if func in (aten._unique2.default, aten.unique_dim.default, aten.unique_consecutive.default):
            x = args[0]
            p.assume("unique: all values assumed distinct")
            return _unique_meta(func, x, args, kwargs)

        key = self._memo_key(func, args, kwargs)
        if key is not None:
            hit = self._memo.get(key)
            if hit is not None:
                out = _rebuild(hit)
                self._propagate(func, args, kwargs, out)
                return out
        out = func(*args, **kwargs)
        if key is not None:
            spec = _spec(out)
            if spec is not None:
                self._memo[key] = spec
        self._propagate(func, args, kwargs, out)
        return out

    # Meta kernels of many ops are Python decompositions (clamp: ~1 ms). Identical calls (every expert of a layer,
    # every layer of a kind) are answered from a memo of output shapes, for functional ops with fresh outputs only.
    _memo: dict = {}

    def _memo_key(self, func: Any, args: tuple, kwargs: dict) -> tuple | None:
        ok = self._cacheable.get(func)
        if ok is None:
            schema = func._schema
            ok = not schema.is_mutable and all(r.alias_info is None for r in schema.returns) and \
                func not in _NOT_MEMO
            self._cacheable[func] = ok
        if not ok:
            return None
        try:
            return (func, _key(args), _key(kwargs))
        except _Uncacheable:
            return None

    def _scalar(self, t: torch.Tensor) -> Any:
        prov = self.p.get(t)
        if t.dtype == torch.bool:
            if prov is not None and prov.density is not None:
                return prov.density > 0
            self.p.assume("a boolean test on a tensor: assumed true (the common path)")
            return True
        if t.dtype.is_floating_point or t.dtype.is_complex:
            if prov is not None and prov.value is not None:
                return float(prov.value)
            self.p.assume("a float read from a tensor: assumed 0.0")
            return 0.0
        if prov is not None and prov.value is not None:
            return int(math.ceil(prov.value))
        self.p.assume("an integer read from a tensor: assumed 1")
        return 1

    def _propagate(self, func, args, kwargs, out) -> None:  # noqa: C901 - one rule per op
        p = self.p
        if func is aten.topk.default:
            x = args[0]
            dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
            p.set(out[1], _Prov(range=x.shape[dim]))
            return
        if func in (aten.eq.Scalar, aten.eq.Tensor, aten.ne.Scalar, aten.ne.Tensor):
            x = args[0]
            prov = p.get(x)
            if prov is not None and prov.range:
                d = 1.0 / prov.range
                p.set(out, _Prov(density=d if func in (aten.eq.Scalar, aten.eq.Tensor) else 1.0 - d))
            elif prov is not None and prov.value is not None and func in (aten.eq.Scalar, aten.ne.Scalar):
                hit = float(prov.value) == float(args[1])
                p.set(out, _Prov(density=float(hit if func is aten.eq.Scalar else not hit)))
            return
        if func in (aten.gt.Scalar, aten.ge.Scalar, aten.lt.Scalar, aten.le.Scalar):
            prov = p.get(args[0])
            if prov is not None and prov.value is not None:
                v, s = prov.value, float(args[1])
                hit = {aten.gt.Scalar: v > s, aten.ge.Scalar: v >= s, aten.lt.Scalar: v < s,
                       aten.le.Scalar: v <= s}[func]
                p.set(out, _Prov(density=float(hit)))
            return
        if func in (aten.sum.dim_IntList, aten.sum.default, aten.count_nonzero.dim_IntList,
                    aten.count_nonzero.default):
            x = args[0]
            prov = p.get(x)
            if not isinstance(out, torch.Tensor) or not isinstance(x, torch.Tensor) or not x.is_meta:
                return
            per = None
            if prov is not None:
                per = prov.density if prov.density is not None else prov.value
            if per is None and not x.dtype.is_floating_point and not x.dtype.is_complex:
                # Counts of unknown value (durations, lengths) are each taken as 1, as a single integer read is, so
                # a total agrees with what repeat_interleave makes of the same counts (1 each).
                p.assume("integers of unknown value summed as ones")
                per = 1.0
            if per is not None:
                reduced = x.numel() / max(1, out.numel())
                p.set(out, _Prov(value=per * reduced))
            return
        if func in (aten.max.default, aten.min.default, aten.amax.default, aten.amin.default,
                    aten.max.dim, aten.min.dim):
            prov = p.get(args[0])
            first = out[0] if isinstance(out, tuple) else out
            if prov is not None and prov.value is not None and isinstance(first, torch.Tensor):
                p.set(first, _Prov(value=prov.value))  # the extreme of equal values is that value
            return
        if func is aten.one_hot.default:
            n = out.shape[-1]
            p.set(out, _Prov(value=1.0 / n, density=1.0 / n))
            return
        if func in (aten.scatter.value, aten.scatter_.value):
            # zeros.scatter(dim, topk_indices, 1): a k-hot row per token (JetMoE's gates), the one-hot of top-k
            x, dim, index, value = args[0], args[1], args[2], args[3]
            prov = p.get(index)
            if prov is not None and prov.range and float(value) != 0 and x.dim() == index.dim() and x.shape[dim]:
                d = min(1.0, index.shape[dim] / x.shape[dim])
                p.set(out, _Prov(value=d * float(value), density=d))
            return
        if func in (aten.logical_not.default, aten.bitwise_not.default) and isinstance(out, torch.Tensor) \
                and out.dtype == torch.bool:
            prov = p.get(args[0])
            if prov is not None and prov.density is not None:
                p.set(out, _Prov(density=1.0 - prov.density))
            else:  # a mask of unknown fraction is taken as all true (see _rows): its negation holds none
                p.assume("negation of a mask with no known fraction: the mask assumed all true, its negation none")
                p.set(out, _Prov(density=0.0))
            return
        if func is aten.cat.default and isinstance(out, torch.Tensor) and out.dtype == torch.bool:
            parts = [t for t in args[0] if isinstance(t, torch.Tensor) and t.numel()]
            provs = [p.get(t) for t in parts]
            if parts and any(q is not None and q.density is not None for q in provs):
                # masks of unknown fraction count as all true, as _rows takes them
                hit = sum((q.density if q is not None and q.density is not None else 1.0) * t.numel()
                          for q, t in zip(provs, parts))
                p.set(out, _Prov(density=hit / sum(t.numel() for t in parts)))
            return
        if func in (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.flatten.using_ints,
                    aten.clone.default, aten.contiguous.default, aten.squeeze.dim, aten.squeeze.default,
                    aten.unsqueeze.default, aten.permute.default, aten.t.default, aten.transpose.int,
                    aten.expand.default, aten._to_copy.default, aten.select.int, aten.slice.Tensor,
                    aten.alias.default, aten.detach.default, aten.lift_fresh.default):
            prov = p.get(args[0])
            if isinstance(out, torch.Tensor) and isinstance(args[0], torch.Tensor):
                if prov is not None:
                    p.set(out, dataclasses.replace(prov, parent=weakref.ref(args[0])))
                elif not args[0].dtype.is_floating_point:
                    p.set(out, _Prov(parent=weakref.ref(args[0])))
            return


def _unique_meta(func, x, args, kwargs):
    out = torch.empty((x.numel(),), dtype=x.dtype, device="meta")
    if func is aten._unique2.default:
        return out, torch.empty(x.shape, dtype=torch.long, device="meta"), torch.empty((x.numel(),), dtype=torch.long,
                                                                                        device="meta")
    return out, torch.empty((0,), dtype=torch.long, device="meta"), torch.empty((0,), dtype=torch.long, device="meta")


class _TolistPolicy:
    """`Tensor.tolist()` on meta has no data: answer it from provenance (patched on torch.Tensor for the pass:
    cheaper than a function mode that would see every torch call)."""

    def __init__(self, policy: _Policy):
        self.p = policy
        self.saved: Any = None

    def __enter__(self) -> "_TolistPolicy":
        self.saved = torch.Tensor.tolist
        policy = self

        def tolist(t: torch.Tensor) -> Any:
            if t.is_meta:
                return policy.answer(t)
            return policy.saved(t)

        torch.Tensor.tolist = tolist  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.Tensor.tolist = self.saved  # type: ignore[method-assign]

    def answer(self, t: torch.Tensor) -> Any:
        prov = self.p.get(t)
        if t.dtype == torch.bool:
            v: Any = (prov.density or 0) > 0 if prov and prov.density is not None else True
        elif t.dtype.is_floating_point:
            v = float(prov.value) if prov and prov.value is not None else 0.0
        else:
            v = int(math.ceil(prov.value)) if prov and prov.value is not None else 1
            if prov and prov.value is not None and t.dim() == 1:
                exact = _exact_split(prov.value, t.shape[0])
                if exact is not None:  # counts that must add up (sizes for split()): spread the total exactly
                    self.p.policy_sizes.add(v)
                    self.p.split_sizes.update(exact)  # routed sizes too once split() uses them
                    return exact
        if not (prov and (prov.value is not None or prov.density is not None)):
            self.p.assume(f"tolist() of a tensor with no known values: each assumed {v!r}")
        elif not t.dtype.is_floating_point and t.dtype != torch.bool:
            self.p.policy_sizes.add(v)
        return _nested(v, tuple(t.shape))


def _exact_split(per: float, n: int) -> list[int] | None:
    """n whole counts that add up to the whole total n × per, as evenly as possible (the first ones one larger), when
    that total is whole but per is not and every count stays at least 1; else None (each count is ceil(per))."""
    total = per * n
    whole = round(total)
    if n < 2 or abs(total - whole) > 1e-6 or per == int(per) or whole < n:
        return None
    base, extra = divmod(whole, n)
    return [base + 1] * extra + [base] * (n - extra)


def _nested(v: Any, shape: tuple[int, ...]) -> Any:
    if not shape:
        return v
    return [_nested(v, shape[1:]) for _ in range(shape[0])]


# ---------------------------------------------------------------------------------------------------------------------
# The tracer


_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def _tensors(obj: Any, out: list, depth: int = 0) -> None:
    if len(out) > 64 or depth > 4:
        return
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            _tensors(x, out, depth + 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, out, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _tensors(getattr(obj, f.name, None), out, depth + 1)


class Tracer:
    def __init__(self, model: torch.nn.Module, display: Callable[[str], str]):
        self.model = model
        self.display = display
        from .walk import _preorder

        self.paths: dict[int, str] = {}
        self.objects_by_id: dict[int, Any] = {}
        for path, mod in _preorder(model):  # the first path of a module registered under several, as named_modules
            if id(mod) not in self.paths:
                self.paths[id(mod)] = path
                self.objects_by_id[id(mod)] = mod
        self.stack: list[str] = []
        self.calls: dict[str, list[tuple]] = {}
        self.sites: dict[str, dict[tuple, None]] = {}
        self.assumptions: dict[str, dict[str, None]] = {}
        self.kernels: dict[str, dict[str, None]] = {}
        self.policy = _Policy(self)
        self._positions: dict[Any, list] = {}
        self.handles: list[Any] = []
        self.fired = 0
        # Called after every stubbed kernel call: (module path, kernel, args, kwargs, result). The probe logs them.
        self.on_kernel: Callable[[str, str, tuple, dict, Any], None] | None = None
        # Called when a repeated block is answered from the memo: (path that ran, path answered). archviz.cost copies
        # the FLOPs of the one that ran, as _BlockMemo copies its calls.
        self.on_memo: Callable[[str, str], None] | None = None

    # -- assumptions and kernels are noted on the module running now, with the user's file:line
    def _where(self) -> str:
        f = sys._getframe(2)
        while f is not None:
            fn = f.f_code.co_filename
            if not fn.startswith((_TORCH_DIR, _ARCHVIZ_DIR, "<frozen")):
                return f"{self.display(fn)}:{f.f_lineno}"
            f = f.f_back
        return "?"

    def assume(self, text: str) -> None:
        path = self.stack[-1] if self.stack else ""
        self.assumptions.setdefault(path, {})[f"{text} ({self._where()})"] = None

    def kernel(self, qualname: str, impl: str) -> None:
        path = self.stack[-1] if self.stack else ""
        self.kernels.setdefault(path, {})[qualname if impl == qualname else f"{qualname} → {impl}"] = None

    # -- call sites
    def _call_site(self, parent: Any) -> tuple | None:
        f = sys._getframe(3)
        fallback = None
        while f is not None:
            code = f.f_code
            fn = code.co_filename
            if fn.startswith(_ARCHVIZ_DIR) or (fn.startswith(_TORCH_DIR) and (
                    parent is None or code.co_name in _CALL_MACHINERY or "self" not in code.co_varnames)):
                f = f.f_back
                continue
            # A parent whose forward is torch's own (TransformerEncoderLayer, Sequential) calls its children there
            if parent is not None and f.f_locals.get("self") is parent:
                return self._site(f)
            if fallback is None and not fn.startswith(_TORCH_DIR):
                fallback = f
            f = f.f_back
        return self._site(fallback) if fallback is not None else None

    def _site(self, frame: Any) -> tuple:
        code = frame.f_code
        pos = self._positions.get(code)
        if pos is None:
            pos = self._positions[code] = list(code.co_positions())
        i = frame.f_lasti // 2
        line, end_line, col, end_col = pos[i] if i < len(pos) else (frame.f_lineno, frame.f_lineno, None, None)
        line = line or frame.f_lineno
        text = _source_text(code.co_filename, line, end_line or line, col, end_col)
        return (self.display(code.co_filename), line, text)

    # -- hooks
    # Global module hooks (one registration, not two handles for each of 60,000 modules): the pre-hook tracks
    # which module runs and where its parent called it; the post-hook, which sees args and kwargs, records shapes.
    def pre_hook(self, module: Any, args: Any) -> None:
        path = self.paths.get(id(module))
        if path is None:
            return
        parent = self.objects[-1] if self.objects else None
        if path:
            site = self._call_site(parent)
            if site is not None:
                self.sites.setdefault(path, {})[site] = None
        self.stack.append(path)
        self.objects.append(module)

    def post_hook(self, module: Any, args: Any, kwargs: Any, output: Any) -> None:
        path = self.paths.get(id(module))
        if path is None or not self.stack:
            return
        self.stack.pop()
        self.objects.pop()
        tensors: list = []
        _tensors(args, tensors)
        _tensors(kwargs, tensors)
        ins = [(tuple(t.shape), _DTYPE_NAMES.get(t.dtype) or _dtype_name(t.dtype)) for t in tensors]
        outs: list = []
        _tensors(output, outs)
        entry = (tuple(ins), tuple((tuple(t.shape), _DTYPE_NAMES.get(t.dtype) or _dtype_name(t.dtype)) for t in outs))
        lst = self.calls.setdefault(path, [])
        if entry not in lst and len(lst) < _MAX_CALLS:
            lst.append(entry)
        self.fired += 1
        if self.progress is not None and self.fired % 256 == 0:
            self.progress(min(self.fired, self.total), self.total)

    def install(self) -> None:
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self.objects: list = []
        self.progress = None
        self.total = len(self.paths)
        self.handles.append(register_module_forward_pre_hook(self.pre_hook))
        self.handles.append(register_module_forward_hook(self.post_hook, with_kwargs=True))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def stub_call(self, qualname: str, args: tuple, kwargs: dict) -> Any:
        hit = kernels.lookup(qualname, meta=True)
        path = self.stack[-1] if self.stack else "(model)"
        if hit is None:
            raise ShapeError(f"{qualname} (called by {path or 'the model'}) has no shape rule",
                             hint=f"declare one: @archviz.kernels.shape_rule({qualname!r}) in a file passed with "
                                  f"--kernel-rules FILE (see archviz/kernels.py)")
        fn, impl = hit
        self.kernel(qualname, impl)
        result = fn(*args, **kwargs)
        if self.on_kernel is not None:
            self.on_kernel(self.stack[-1] if self.stack else "", qualname, args, kwargs, result)
        return result


@functools.lru_cache(maxsize=4096)  # every layer calls its sub-modules from the same lines
def _source_text(file: str, line: int, end_line: int, col: int | None, end_col: int | None) -> str:
    lines = [linecache.getline(file, n) for n in range(line, end_line + 1)]
    if not lines or not lines[0]:
        return ""
    if col is None or end_col is None:
        return lines[0].strip()
    if line == end_line:
        b = lines[0].encode("utf-8")
        return b[col:end_col].decode("utf-8", "replace").strip()
    first = lines[0].encode("utf-8")[col:].decode("utf-8", "replace")
    last = lines[-1].encode("utf-8")[:end_col].decode("utf-8", "replace")
    parts = _without_comments([first.rstrip("\r\n"), *(x.rstrip("\r\n") for x in lines[1:-1]), last])
    text = " ".join(x.strip() for x in parts if x.strip()).replace("( ", "(").replace(" )", ")")
    # The span is a call: the comma a multi-line argument list ends with means nothing on one line.
    return text[:-2] + ")" if text.endswith(",)") else text


def _without_comments(lines: list[str]) -> list[str]:
    """The lines of a multi-line expression with their `# ...` comments cut (a comment inside the call would read
    as if it commented out the arguments after it once the lines are joined); as they are if they do not
    tokenize."""
    import io
    import tokenize

    try:
        cuts = {t.start[0] - 1: t.start[1] for t in tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline)
                if t.type == tokenize.COMMENT}
    except (tokenize.TokenError, SyntaxError):
        return lines
    return [x[:cuts[i]] if i in cuts else x for i, x in enumerate(lines)]


# ---------------------------------------------------------------------------------------------------------------------
# Inputs and dims


_PRIMES_B = (7, 5, 11, 3, 13, 17)
# Small first; the larger ones are there for MoE models, whose routed count R = ceil(B·T·k/E) must clear the small
# ints the model's widths and config take (see choose_dims).
_PRIMES_T = (13, 11, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109,
             113, 127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181, 191, 193, 197, 199, 211, 223, 227, 229,
             233, 239, 241, 251)


def _taken(record: ModelRecord) -> set[int]:
    taken: set[int] = set()
    for m in record.modules:
        for t in m.tensors:
            taken.update(int(d) for d in t.shape)
    for _, v in record.source.config:
        if isinstance(v, int) and not isinstance(v, bool):
            taken.add(v)
        elif isinstance(v, list):
            taken.update(x for x in v if isinstance(x, int) and not isinstance(x, bool))
    return taken


def choose_dims(record: ModelRecord, batch: int | None, seq: int | None,
                avoid: tuple[int, int] | None = None, routed: bool = True) -> tuple[int, int, bool]:
    """(B, T, clean): values that collide with no width of the model (tensor dims, config ints, routed token counts)
    when possible (`clean`), within the model's max_batch_size / max_seq_len; `avoid` excludes a pair already used.
    `routed=False` keeps T small rather than R apart (the probe, whose real pass costs tokens)."""
    taken = _taken(record)
    config = dict(record.source.config)
    max_b = config.get("max_batch_size") if isinstance(config.get("max_batch_size"), int) else None
    max_t = config.get("max_seq_len") if isinstance(config.get("max_seq_len"), int) else None
    moe = [(m.top_k or 1, m.experts or 1) for m in record.summary.moe]

    def r_not_b_t(b: int, t: int) -> bool:  # R = ceil(B·T·k/E) is none of B, T, B·T
        return all(math.ceil(b * t * k / e) not in (b, t, b * t) for k, e in moe)

    def ok(b: int, t: int) -> bool:
        return b != t and b not in taken and t not in taken and b * t not in taken and r_not_b_t(b, t)

    def routed_apart(b: int, t: int) -> bool:
        # R of at least 2 and equal to no width: with 256 experts and few tokens R is 1, and every size-1 dim (a
        # keepdim, an unsqueeze) would read as R.
        return all((r := math.ceil(b * t * k / e)) >= 2 and r not in taken for k, e in moe)

    def but_b(b: int, t: int) -> bool:  # every B the model allows is a width too: keep T, B·T and R apart
        return b != t and t not in taken and b * t not in taken and r_not_b_t(b, t) and routed_apart(b, t)

    if batch and seq:
        return batch, seq, ok(batch, seq)
    bs = [batch] if batch else [b for b in _PRIMES_B if not max_b or b <= max_b] + (
        list(range(max_b, 1, -1)) if max_b else [])
    ts = [seq] if seq else [t for t in _PRIMES_T if not max_t or t <= max_t]
    bs = bs or [1]
    tiers = (((lambda b, t: ok(b, t) and routed_apart(b, t)), True), (ok, True), (but_b, False)) if routed else \
        ((ok, True),)
    for good, clean in tiers:
        for b in bs:
            for t in ts:
                if (b, t) != avoid and good(b, t):
                    return b, t, clean
    for b in bs:
        for t in ts:
            if (b, t) != avoid and b != t:
                return b, t, False
    return bs[0], ts[0], False


@contextlib.contextmanager
def cache_off(model: Any) -> Iterator[None]:
    """transformers models whose top forward takes `use_cache` only through **kwargs read it from their config
    (`merge_with_config_defaults`): one pass needs no KV cache, and some models cannot build one for their default
    layers (granitemoehybrid's all-Mamba default dies in `get_seq_length`), so every config the modules hold says
    `use_cache=False` for the pass, and what it said before afterwards."""
    saved: dict[int, tuple[Any, Any]] = {}
    for mod in model.modules():
        cfg = getattr(mod, "config", None)
        if cfg is not None and id(cfg) not in saved and getattr(cfg, "use_cache", None) is not None:
            saved[id(cfg)] = (cfg, cfg.use_cache)
    try:
        for cfg, _ in saved.values():
            cfg.use_cache = False
        yield
    finally:
        for cfg, value in saved.values():
            cfg.use_cache = value


def default_inputs(built: Built, B: int, T: int) -> tuple[tuple, dict]:
    model = built.model
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params]
    ids = torch.zeros((B, T), dtype=torch.long, device="meta")
    if built.kind == "hf":
        named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if named and "input_ids" not in named:  # a vision or audio model (a bare (*args, **kwargs) proves nothing)
            first = named[0]
            raise ShapeError(f"{type(model).__name__}.forward takes no token ids (its first input is {first})",
                             hint=f"give its inputs with --input, e.g. --input {first}={_input_example(built, first)}")
        kwargs: dict[str, Any] = {"input_ids": ids}
        if "use_cache" in names:
            kwargs["use_cache"] = False
        return (), kwargs
    if not params:
        raise ShapeError(f"{type(model).__name__}.forward takes no inputs archviz can guess",
                         hint="give them with --input name=B,T,512[:dtype]")
    args: list[Any] = [ids]
    kwargs = {}
    if "start_pos" in names[1:]:
        kwargs["start_pos"] = 0
    return tuple(args), kwargs


# Forward inputs archviz does not make up: other modalities (their sizes come from a preprocessor) and a decoder's
# own token ids, each with an example --input.
_MODALITY_INPUTS = {"pixel_values": "B,3,224,224:float32", "pixel_values_videos": "B,2,3,224,224:float32",
                    "input_features": "B,80,3000:float32", "input_values": "B,16000:float32", "bbox": "B,T,4",
                    "decoder_input_ids": "B,T"}


def _missing_input_hint(built: Built, given: dict, error: BaseException | None = None) -> str | None:
    """For a failed pass: the model's forward takes an image or audio input, or decoder token ids, that were not
    given (CLIP, BLIP, LongT5): name them, with an example (sized from the config's image size where it has one).
    Else the forward's inputs the error names that were not given (LXMERT: "`visual_feats` cannot be `None`")."""
    import re

    try:
        params = inspect.signature(built.model.forward).parameters
    except (TypeError, ValueError):
        return None
    missing = [n for n in _MODALITY_INPUTS if n in params and n not in given]
    if not missing:
        text = str(error) if error is not None else ""
        asks = re.search(r"none|missing|required|specify|provide|must (?:be )?pass", text, re.I)
        named = set(re.findall(r"\w+", text)) if asks else set()
        asked = [n for n in params if n in named and n not in given and n not in ("self", "args", "kwargs")]
        if not asked:
            return None
        return (f"{type(built.model).__name__}.forward's {', '.join(asked)} {'was' if len(asked) == 1 else 'were'} "
                f"not given: give {'it' if len(asked) == 1 else 'them'} with --input name=dims[:dtype] (dims are "
                f"ints, B or T; e.g. --input {asked[0]}=B,T,64:float32); --debug shows the traceback")
    first = missing[0]
    return (f"{type(built.model).__name__}.forward also takes {', '.join(missing)}, which archviz does not make up: "
            f"give {'it' if len(missing) == 1 else 'them'} with --input, e.g. --input {first}="
            f"{_input_example(built, first)}; --debug shows the traceback")


def _none_hint(error: BaseException, built: Built) -> str | None:
    """For a pass that died on a None: the config field left unset that it comes from (see `unset_field_hint`),
    else both likely causes."""
    config = built.config if isinstance(built.config, dict) else {}
    if not isinstance(error, (TypeError, AttributeError)) or "NoneType" not in str(error):
        return None
    return unset_field_hint(error, config) or (
        "a value the forward reads is None: a forward input not given (--input name=B,T,...) or a config field "
        "left unset (--set FIELD=VALUE); --debug shows the traceback")


def _input_example(built: Built, name: str) -> str:
    """An --input value for a forward input archviz does not make up; pixel_values sized from the config's image
    size and channels where it has them."""
    if name == "pixel_values":
        vision = built.config.get("vision_config") if isinstance(built.config.get("vision_config"), dict) else {}
        size = vision.get("image_size") or built.config.get("image_size")
        channels = vision.get("num_channels") or built.config.get("num_channels") or 3
        if isinstance(size, int) and isinstance(channels, int):
            return f"B,{channels},{size},{size}:float32"
    return _MODALITY_INPUTS.get(name, "B,3,224,224:float32")


def parse_inputs(specs: list[str], B: int, T: int) -> tuple[tuple, dict]:
    """`--input name=B,T,512:float32` (repeatable): forward keyword arguments as meta tensors; dims are ints or the
    symbols B and T; the dtype defaults to int64 for [B, T] and float32 otherwise. `name=int:5` passes a number,
    `name=none` passes None."""
    kwargs: dict[str, Any] = {}
    for spec in specs:
        if "=" not in spec:
            raise ShapeError(f"--input {spec!r} is not name=dims[:dtype]", hint="write e.g. --input x=B,T,512:float32")
        name, rest = spec.split("=", 1)
        if rest.strip().lower() == "none":
            kwargs[name] = None
            continue
        dims_text, _, dtype_text = rest.partition(":")
        if dims_text in ("int", "float", "bool"):
            kwargs[name] = {"int": int, "float": float, "bool": lambda v: v.lower() in ("1", "true")}[dims_text](
                dtype_text)
            continue
        dims: list[int] = []
        for d in filter(None, dims_text.split(",")):
            d = d.strip()
            if d in ("B", "T"):
                dims.append(B if d == "B" else T)
            elif d.isdigit():
                dims.append(int(d))
            else:
                raise ShapeError(f"--input {spec!r}: dim {d!r} is not an int, B or T", hint="e.g. B,T,512")
        default = "int64" if dims_text.replace(" ", "") == "B,T" else "float32"
        dtype = getattr(torch, dtype_text or default, None)
        if not isinstance(dtype, torch.dtype):
            raise ShapeError(f"--input {spec!r}: {dtype_text!r} is not a torch dtype", hint="e.g. float32, int64")
        kwargs[name] = torch.zeros(dims, dtype=dtype, device="meta")
    return (), kwargs


def merge_inputs(model: Any, base: tuple[tuple, dict], given: dict[str, Any]) -> tuple[tuple, dict]:
    """The default inputs with the given ones added, a given name replacing the default of that name -- also the
    default token ids passed positionally to the forward's first parameter (`--input pixels=B,T,24` stands in for
    them, `--input decoder_input_ids=B,T` comes beside them)."""
    args, kwargs = base
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    bound = {p.name: a for p, a in zip(params, args) if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD}
    if len(bound) == len(args) and any(name in bound for name in given):
        return (), {**bound, **kwargs, **given}
    return tuple(args), {**kwargs, **given}


def name_dims(shape: tuple[int, ...], B: int, T: int, routed: set[int]) -> tuple[int | str, ...]:
    out: list[int | str] = []
    for d in shape:
        d = int(d)
        if d == B * T:
            out.append("B·T")
        elif d == B:
            out.append("B")
        elif d == T:
            out.append("T")
        elif d in routed:
            out.append(ROUTED)
        else:
            out.append(d)
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------------------
# Entry point


def trace_shapes(built: Built, record: ModelRecord, *, batch: int | None = None, seq: int | None = None,
                 inputs: tuple[tuple, dict] | None = None, input_specs: list[str] | None = None,
                 on_kernel: Callable[[str, str, tuple, dict, Any], None] | None = None,
                 memo: bool = True,
                 progress: Callable[[int, int], None] | None = None,
                 op_observer: Callable[..., None] | None = None,
                 on_memo: Callable[[str, str], None] | None = None) -> ModelRecord:
    """Run the model's forward on meta and return `record` with calls, call sites, assumptions and kernels filled."""
    # The pass makes many short-lived meta tensors and records, but no cycles worth a rescan of the model's heap.
    # --quantized: its modules call kernels meta cannot run; the unquantized ones they replaced are put back for it.
    with collector_paused(), built.unquantized() if built.unquantized is not None else nullcontext():
        traced = _trace_shapes(built, record, batch=batch, seq=seq, inputs=inputs, input_specs=input_specs,
                               on_kernel=on_kernel, memo=memo, progress=progress, op_observer=op_observer,
                               on_memo=on_memo)
    if built.unquantized is not None:
        info = traced.extra("shapes")
        traced = traced.with_extra("shapes", {**info, "notes": [
            *info["notes"], "traced through the unquantized modules that --quantized replaced (a quantized linear "
            "or expert block computes the same shapes)"]})
    return traced


def _trace_shapes(built: Built, record: ModelRecord, *, batch: int | None, seq: int | None,
                  inputs: tuple[tuple, dict] | None, input_specs: list[str] | None,
                  on_kernel: Callable[[str, str, tuple, dict, Any], None] | None, memo: bool,
                  progress: Callable[[int, int], None] | None, op_observer: Callable[..., None] | None = None,
                  on_memo: Callable[[str, str], None] | None = None) -> ModelRecord:
    from .walk import _Spans

    B, T, clean = choose_dims(record, batch, seq)
    spans = _Spans(built.display_roots)
    tracer = Tracer(built.model, spans.display)
    tracer.on_kernel = on_kernel
    tracer.on_memo = on_memo
    if inputs is not None:
        base = inputs
    else:
        try:
            base = default_inputs(built, B, T)
        except ShapeError:
            if not input_specs:
                raise
            base = ((), {})
    args, kwargs = merge_inputs(built.model, base, parse_inputs(input_specs, B, T)[1]) if input_specs else base
    notes: list[str] = []
    moved = strays_to_meta(tracer.objects_by_id.values())
    if moved:
        notes.append(f"{moved:,} tensors the build left on the CPU (legacy constructors such as "
                     "torch.FloatTensor(...)) moved to meta for the pass")
    if built.kind == "hf" and hasattr(built.model, "set_experts_implementation"):
        # grouped_mm has no float32 meta kernel; batched_mm computes every expert for every token without a
        # data-dependent loop (shapes are the same; 2x faster than the eager loop on meta).
        for impl in ("batched_mm", "eager"):
            try:
                built.model.set_experts_implementation(impl)
                if record.summary.moe or impl != "batched_mm":  # every transformers model takes it; say it for MoE
                    notes.append(f"transformers experts traced with experts_implementation={impl!r}")
                break
            except Exception:  # noqa: BLE001 - models without fused experts refuse; nothing to change then
                continue
    registry = built.stubs or stubs.StubRegistry()
    # Reference code runs under the default dtype its launcher sets (DeepSeek's generate.py: bfloat16).
    compute = getattr(torch, built.default_dtype) if built.default_dtype else None
    experts: _BlockMemo | None = None
    previous = stubs.set_call_handler(tracer.stub_call)
    saved_dtype = torch.get_default_dtype()
    error: BaseException | None = None
    try:
        tracer.install()
        tracer.progress = progress
        experts = _BlockMemo(tracer, record) if memo else None
        if compute is not None:
            torch.set_default_dtype(compute)

        def warned(text: str) -> None:
            notes.append(f"warning from {(tracer.stack[-1] if tracer.stack else '') or 'the model'}: {text}")

        with warnings_noted(warned), torch.no_grad(), torch.device("meta"), \
                _DispatchPolicy(tracer.policy, op_observer), \
                _TolistPolicy(tracer.policy), cache_off(built.model) if built.kind == "hf" else nullcontext(), \
                ImportsInForward(registry, built.roots if built.kind != "hf" else (),
                                 lambda name: tracer.assume(f"import {name} failed (not installed): stubbed")):
            built.model(*args, **kwargs)
    except ShapeError:
        raise
    except Exception as e:  # noqa: BLE001
        error = e
    finally:
        if experts is not None:
            experts.remove()
        stubs.set_call_handler(previous)
        tracer.remove()
        torch.set_default_dtype(saved_dtype)
    if error is not None:
        where = tracer.stack[-1] if tracer.stack else "(model)"
        frame = _user_frame(error)
        raise ShapeError(f"the meta forward pass failed in {where or 'the model'}"
                         f"{' at ' + frame if frame else ''}: {type(error).__name__}: {str(error)[:300]}",
                         hint=_missing_input_hint(built, kwargs, error) or _none_hint(error, built) or
                         "give a missing forward input with --input name=B,T (repeatable), run with --debug "
                         "for the traceback") from error
    if progress is not None:
        progress(tracer.total, tracer.total)
    routed = set(tracer.policy.policy_sizes) - {B, T, B * T}
    named: dict[tuple, tuple] = {}

    def dims(shape: tuple) -> tuple:
        hit = named.get(shape)
        if hit is None:
            hit = named[shape] = name_dims(shape, B, T, routed)
        return hit

    made: dict[tuple, Call] = {}  # identical calls (every expert, every norm) share one record

    def call(ins: tuple, outs: tuple) -> Call:
        c = made.get((ins, outs))
        if c is None:
            c = made[(ins, outs)] = Call(inputs=tuple(dims(s) for s, _ in ins), outputs=tuple(dims(s) for s, _ in outs),
                                         input_dtypes=tuple(d for _, d in ins), output_dtypes=tuple(d for _, d in outs))
        return c

    modules = []
    site_of: dict[tuple, CallSite] = {}
    for m in record.modules:
        path = m.path
        calls = tuple(call(tuple(ins), tuple(outs)) for ins, outs in tracer.calls.get(path, ()))
        sites = []
        for s in tracer.sites.get(path, ()):
            cs = site_of.get(s)
            if cs is None:
                cs = site_of[s] = CallSite(*s)
            sites.append(cs)
        fields = list(_ALL_FIELDS(m))  # dataclasses.replace, without its per-call introspection
        fields[_CALLS:_CALLS + 5] = (calls, tuple(sites), bool(calls) or path in tracer.calls,
                                     tuple(tracer.assumptions.get(path, ())), tuple(tracer.kernels.get(path, ())))
        modules.append(ModuleRecord(*fields))
    modules = _weight_uses(modules, spans)
    files = dict(record.source.files)
    files.update(spans.files)
    stubbed = tuple(sorted(set(record.source.stubbed_imports) | set(registry.taken())))
    source = dataclasses.replace(record.source, files=tuple(sorted(files.items())), stubbed_imports=stubbed)
    if experts is not None and experts.hits:
        notes.append(f"{experts.hits:,} call{'' if experts.hits == 1 else 's'} of repeated blocks (layers, MoE blocks, "
                     "experts) answered from an "
                     "identical one's shapes (taken as pure functions of their input shapes)")
    shapes_info = {"B": B, "T": T, "clean": clean, "notes": notes, "routed_symbol": ROUTED,
                   "routed_sizes": sorted(routed),
                   "policy": "see archviz/shapes.py: boolean tests hold; routing spreads B·T·k tokens evenly over E "
                             "experts (R = ceil(B·T·k/E))"}
    return dataclasses.replace(record, modules=tuple(modules), source=source).with_extra("shapes", shapes_info)


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ModuleRecord))
_ALL_FIELDS = operator.attrgetter(*_FIELD_NAMES)
_CALLS = _FIELD_NAMES.index("calls")
assert _FIELD_NAMES[_CALLS:_CALLS + 5] == ("calls", "call_sites", "called", "assumptions", "kernels")


def _weight_uses(modules: list[ModuleRecord], spans: Any) -> list[ModuleRecord]:
    """A module the forward never calls may still be used: its parent's forward reads `self.<name>.weight`
    (DeepSeek's MLA absorbs wkv_b into an einsum over a view of its weight). Such uses become its call sites."""
    index = {m.path: i for i, m in enumerate(modules)}
    for i, m in enumerate(modules):
        if m.called or not m.path or not m.own.parameters:
            continue
        parent = modules[index.get(m.parent or "", 0)]
        fs = parent.forward_span
        if fs is None:
            continue
        absolute = spans.files.get(fs.file)
        if not absolute:
            continue
        needle = f"self.{m.name}."
        sites = []
        for n in range(fs.start, fs.end + 1):
            text = linecache.getline(absolute, n)
            if needle in text:
                sites.append(CallSite(fs.file, n, text.strip()))
        if sites:
            modules[i] = dataclasses.replace(m, call_sites=tuple(sites))
    return modules


# Attributes that number a block rather than shape it: two layers (or experts) differing only in these are one kind.
_INDEX_ATTRS = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "layer_num", "idx", "index",
                          "block_idx", "block_id", "block_index", "expert_idx", "expert_id", "expert_index"})


def _memo_targets(record: ModelRecord) -> list[str]:
    """Modules answered from the memo: every MoE block and its routed experts, and every repeated block -- an
    entry with sub-modules of a ModuleList, ModuleDict or Sequential (the decoder layers)."""
    index = record.index()
    targets: list[str] = []
    for moe in record.summary.moe:
        lst = index.get(moe.path)
        if lst is None:
            continue
        if lst.parent is not None and lst.parent in index and lst.parent != "":
            targets.append(lst.parent)  # the MoE block: gate, experts, shared experts
        if lst.class_name in ("ModuleList", "ModuleDict"):
            targets.extend(lst.children)
        else:
            targets.append(lst.path)  # fused experts
    for m in record.modules:
        if m.class_name in ("ModuleList", "ModuleDict", "Sequential") and len(m.children) > 1:
            targets.extend(c for c in m.children if index[c].children)
    return list(dict.fromkeys(targets))


class _BlockMemo:
    """Repeated blocks (decoder layers, MoE blocks, routed experts) are taken as pure functions of their inputs'
    shapes: once one has run for given input shapes, every other of the same kind -- same classes, tensors and
    attributes below it, the layer number aside -- answers from the memo: its outputs made from the recorded shapes,
    its sub-modules' calls, call sites, assumptions and kernels copied from the one that ran (the policy answers
    data-dependent values the same way for both). On a 671B MoE this runs 2 of 61 layers. Installed as an instance
    `forward`, so the module's own hooks still record its call and call site. Tests check that the records are the
    same as without the memo for every model they trace."""

    def __init__(self, tracer: Tracer, record: ModelRecord):
        self.tracer = tracer
        self.memo: dict[tuple, tuple[str, Any]] = {}
        self.installed: list[Any] = []
        self.hits = 0
        self.record = record
        self.position = {m.path: i for i, m in enumerate(record.modules)}
        self._rels: dict[str, tuple[str, ...]] = {}
        targets = _memo_targets(record)
        # A block's kind, bottom-up: its own classes, tensors and attributes (the layer number aside) and its
        # children's kinds by name -- each module's part made once, however many targets nest around it.
        tree: dict[str, tuple] = {}
        index = record.index()
        for m in reversed(record.modules):
            own = (m.class_module, m.class_name, tuple((t.name, t.shape, t.dtype, t.kind) for t in m.tensors),
                   tuple((k, repr(v)) for k, v in m.attributes if k not in _INDEX_ATTRS))
            tree[m.path] = (own, tuple((index[c].name, tree[c]) for c in m.children))
        self.kind: dict[str, tuple] = {t: tree[t] for t in targets}
        by_path = {path: tracer.objects_by_id[i] for i, path in tracer.paths.items()}
        for path in self.kind:
            mod = by_path.get(path)
            if mod is None:
                continue
            if "forward" in mod.__dict__:  # already wrapped (a module under two paths) or patched by its code
                continue
            mod.forward = self._shim(path, mod.forward)
            self.installed.append(mod)

    def remove(self) -> None:
        for mod in self.installed:
            mod.__dict__.pop("forward", None)
        self.installed.clear()

    def _shim(self, path: str, forward: Callable[..., Any]) -> Callable[..., Any]:
        def memoized(*args: Any, **kwargs: Any) -> Any:
            try:
                key = (self.kind[path], _key(args), _key(kwargs))
            except _Uncacheable:
                return forward(*args, **kwargs)
            hit = self.memo.get(key)
            if hit is not None:
                self._copy(hit[0], path)
                self.hits += 1
                return _rebuild(hit[1])
            out = forward(*args, **kwargs)
            spec = _spec(out)
            if spec is not None:
                self.memo[key] = (path, spec)
            return out

        return memoized

    def rels(self, target: str) -> tuple[str, ...]:
        """Paths below `target`, relative to it (".attn", ".attn.wq", ...)."""
        rels = self._rels.get(target)
        if rels is None:
            modules = self.record.modules
            prefix = target + "."
            out = []
            for i in range(self.position[target] + 1, len(modules)):
                path = modules[i].path
                if not path.startswith(prefix):
                    break
                out.append(path[len(target):])
            rels = self._rels[target] = tuple(out)
        return rels

    def _copy(self, source: str, target: str) -> None:
        t = self.tracer
        for rel in self.rels(target):
            src = source + rel
            dst = target + rel
            if src in t.calls:
                lst = t.calls.setdefault(dst, [])
                for entry in t.calls[src]:
                    if entry not in lst and len(lst) < _MAX_CALLS:
                        lst.append(entry)
                t.fired += 1
            for table in (t.sites, t.assumptions, t.kernels):
                if src in table:
                    table.setdefault(dst, {}).update(table[src])
        for table in (t.assumptions, t.kernels):  # what the block's own forward noted (its hooks record the rest)
            if source in table:
                table.setdefault(target, {}).update(table[source])
        if t.on_memo is not None:
            t.on_memo(source, target)


class ImportsInForward:
    """Imports inside forward (`from fast_hadamard_transform import hadamard_transform`) of modules that are not
    installed get stub modules too, recorded like the build's, so their functions are answered by shape rules (meta
    pass) or `archviz.kernels` implementations (probe). Only imports made by the model's own files (under `roots`)
    are answered: libraries handle their own ImportErrors (sympy probing for gmpy2 inside torch)."""

    def __init__(self, registry: stubs.StubRegistry, roots: tuple[str, ...],
                 on_stub: Callable[[str], None] | None = None):
        self.registry = registry
        self.on_stub = on_stub
        self.roots = tuple(os.path.abspath(r) + os.sep for r in roots if r)
        self.added: list[str] = []

    def _from_model_code(self) -> bool:
        f = sys._getframe(2)
        while f is not None:
            fn = f.f_code.co_filename
            if fn.startswith("<frozen") or fn.startswith(_ARCHVIZ_DIR) or "importlib" in fn:
                f = f.f_back
                continue
            return os.path.abspath(fn).startswith(self.roots)
        return False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        import importlib.machinery

        if "." in name or not self.roots or not self._from_model_code():
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: Any) -> Any:
        self.added.append(spec.name)
        if self.on_stub is not None:
            self.on_stub(spec.name)
        return self.registry.module(spec.name, "not installed (imported inside forward)")

    def exec_module(self, module: Any) -> None:
        return None

    def __enter__(self) -> "ImportsInForward":
        sys.meta_path.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.meta_path.remove(self)
        for name in self.added:
            sys.modules.pop(name, None)


def _user_frame(e: BaseException) -> str | None:
    import traceback

    hit = None
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        fn = frame.f_code.co_filename
        if not fn.startswith(_TORCH_DIR) and not fn.startswith(_ARCHVIZ_DIR):
            hit = f"{os.path.basename(fn)}:{lineno}"
    return hit


__all__ = ["trace_shapes", "choose_dims", "name_dims", "Tracer", "ModuleRecord"]

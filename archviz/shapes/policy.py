"""What meta cannot answer, answered by a deterministic policy (the rules are listed in `trace`'s docstring):
the dispatch mode that sees every aten op, routing spread evenly, `.tolist()` counts that add up, and each answer
recorded as an assumption on the module that asked."""

from __future__ import annotations

import dataclasses
import math
import weakref
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..sources.kept_values import kept_value
from .gathers import GATHER_OPS

if TYPE_CHECKING:
    from .gathers import Gathers


aten = torch.ops.aten


ROUTED = "R"


@dataclasses.dataclass
class _Prov:
    range: int | None = None  # integer values in [0, range)
    density: float | None = None  # fraction of True in a bool tensor
    value: float | None = None  # expected value of each element
    parent: Any = None  # weakref to the tensor this one is a view or reshape of
    k: int | None = None  # top-k indices: how many each row chose (the k of `range`)


class Policy:
    """Provenance of meta tensors and the policy answers, with the assumptions they imply."""

    def __init__(self, tracer: Any):
        self.tracer = tracer  # the Tracer (shapes.tracer) that made this policy: its assume, user_frame, frame, stack
        self._prov: dict[int, tuple[weakref.ref, _Prov]] = {}
        self.policy_sizes: set[int] = set()
        self.split_sizes: set[int] = set()  # counts spread exactly by .tolist(): routed sizes when split() takes them
        self.gathers: Gathers | None = None  # parameters read by index, where the pass records them

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


class Uncacheable(Exception):
    pass


_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout)


def memo_key(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        if obj.device.type != "meta":
            raise Uncacheable
        return (tuple(obj.shape), obj.stride(), obj.dtype)
    if isinstance(obj, (tuple, list)):
        return tuple(memo_key(x) for x in obj)
    if isinstance(obj, dict):
        return tuple((k, memo_key(v)) for k, v in obj.items())
    if isinstance(obj, _SCALARS):
        return (type(obj), obj)
    raise Uncacheable


def output_spec(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return ("t", tuple(out.shape), out.stride(), out.dtype) if out.device.type == "meta" else None
    if out is None:  # a block's tuple may hold None (XLNet's layers: (output_h, None) without a query stream)
        return ("none",)
    if isinstance(out, (tuple, list)):
        parts = [output_spec(o) for o in out]
        if any(p is None for p in parts):
            return None
        if isinstance(out, tuple) and type(out) is not tuple:  # a namedtuple (reformer's ReformerOutput): read by name
            return ("named", type(out), tuple(parts)) if hasattr(type(out), "_fields") else None
        return ("tuple" if isinstance(out, tuple) else "list", tuple(parts))
    return None


def rebuild_output(spec: Any) -> Any:
    if spec[0] == "t":
        return torch.empty_strided(spec[1], spec[2], dtype=spec[3], device="meta")
    if spec[0] == "none":
        return None
    if spec[0] == "named":
        return spec[1](*(rebuild_output(p) for p in spec[2]))
    parts = [rebuild_output(p) for p in spec[1]]
    return tuple(parts) if spec[0] == "tuple" else parts


_NOT_MEMO = {aten.empty.memory_format, aten.empty_strided.default}


# Ops whose result depends on values, which the policy answers for meta tensors.
_POLICY_OPS = frozenset(op for op in (
    aten._local_scalar_dense.default, aten.nonzero.default, aten.argwhere.default, aten.nonzero_numpy.default,
    aten.where.default, aten.masked_select.default, aten.bincount.default, aten.index.Tensor,
    aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default, aten.repeat_interleave.Tensor,
    aten._unique2.default, aten.unique_dim.default, aten.unique_consecutive.default, aten.equal.default,
    aten.is_nonzero.default))

# A test on a tensor asked again and again by one frame at one place (a `while` on a tensor, which the policy's
# "it holds" would never end) is answered false from this many answers on.
LOOP_LIMIT = 1024


def _any_meta(args: Any) -> bool:
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.is_meta:
                return True
        elif isinstance(a, (list, tuple)) and _any_meta(a):
            return True
    return False


class DispatchPolicy(TorchDispatchMode):
    def __init__(self, policy: Policy, observer: Callable[..., None] | None = None):
        super().__init__()
        self.p = policy
        self.observer = observer  # op_observer(func, args, kwargs, out, module path) after every aten op (archviz.cost)
        self._memo: dict = {}
        self._cacheable: dict = {}
        self._asked: dict[tuple[int, int], list] = {}  # (frame id, instruction) -> [frame, answers so far]

    def _looping(self) -> bool:
        """Whether the model's frame asking this test has asked it at the same instruction LOOP_LIMIT times (a
        `while` on a tensor); an `if` in a layer run many times is a new frame each time."""
        f = self.p.tracer.user_frame(3)
        if f is None:
            return False
        if len(self._asked) > 256:  # the frames held are the recent ones
            self._asked.clear()
        hit = self._asked.setdefault((id(f), f.f_lasti), [f, 0])
        if hit[0] is not f:
            hit[:] = [f, 0]
        hit[1] += 1
        return hit[1] > LOOP_LIMIT

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
        frame = self.p.tracer.frame
        if frame is not None:  # the running module's own forward (archviz.shapes.flow)
            frame.op(func, args, kwargs or {}, out)
        if self.observer is not None:
            stack = self.p.tracer.stack
            self.observer(func, args, kwargs or {}, out, stack[-1] if stack else "")
        return out

    def _answer(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        p = self.p
        if p.gathers is not None and func in GATHER_OPS:
            p.gathers.op(func, args, p)
        if func in _POLICY_OPS and not _any_meta(args):
            # Real tensors have real values: `torch.div(seq_len, window, rounding_mode="trunc") - 1` (LED's chunk
            # count, a CPU scalar) is read for what it is, never answered by the policy.
            return func(*args, **kwargs)
        if func is aten._local_scalar_dense.default:
            return self._scalar(args[0])
        if func is aten.is_nonzero.default:  # bool(t), `if t:`, `assert t` where the call is not decomposed
            return self._truth(args[0])
        if func is aten.equal.default:  # torch.equal: no meta kernel
            if tuple(args[0].shape) != tuple(args[1].shape):
                return False
            p.assume("torch.equal of two tensors of one shape: assumed equal")
            return True
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
            return self._bincount(args, kwargs)
        if func in (aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default):
            args = self._boolean_indices_as_positions(args)
        if func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None and len(args) < 3:
            kwargs = {**kwargs, "output_size": self._repeated_size(args[0])}
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
                out = rebuild_output(hit)
                self._propagate(func, args, kwargs, out)
                return out
        out = func(*args, **kwargs)
        if key is not None:
            spec = output_spec(out)
            if spec is not None:
                self._memo[key] = spec
        self._propagate(func, args, kwargs, out)
        return out

    def _bincount(self, args: tuple, kwargs: dict) -> torch.Tensor:
        """bincount: as many bins as the values' known range (or `minlength`), each holding an even share."""
        p = self.p
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

    def _boolean_indices_as_positions(self, args: tuple) -> tuple:
        """Boolean masks among an index op's indices replaced by the positions they hold (as many as assumed)."""
        indices = args[1]
        if not any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
            return args
        new: list[Any] = []
        for i in indices:
            if i is not None and i.dtype in (torch.bool, torch.uint8):
                nz = self._nonzero(i)
                new.extend(nz.unbind(1) if i.dim() else [nz[:, 0]])
            else:
                new.append(i)
        return (args[0], new, *args[2:])

    def _repeated_size(self, reps: torch.Tensor) -> int:
        """repeat_interleave's output size: the repeats' known value (else 1 each) times their count."""
        p = self.p
        prov = p.get(reps)
        total = int(math.ceil((prov.value if prov and prov.value is not None else 1) * reps.numel()))
        if not (prov and prov.value is not None):
            p.assume("repeat_interleave with unknown repeats: 1 each")
        return total

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
            return (func, memo_key(args), memo_key(kwargs))
        except Uncacheable:
            return None

    def _truth(self, t: torch.Tensor) -> bool:
        """A truth test of a one-element tensor: a known value's, else it holds (as a boolean test does)."""
        kept = kept_value(t, "bool")
        if kept is not None:
            return bool(kept)
        prov = self.p.get(t)
        if t.dtype != torch.bool and prov is not None and prov.value is not None:
            return bool(prov.value)
        if t.dtype != torch.bool:
            t = torch.empty((), dtype=torch.bool, device="meta")
        return bool(self._scalar(t, prov))

    def _scalar(self, t: torch.Tensor, prov: _Prov | None = None) -> Any:
        kept = kept_value(t, "item")  # the code's bookkeeping, its values kept (sources.kept_values)
        if kept is not None:
            return kept.item()
        prov = prov or self.p.get(t)
        if t.dtype == torch.bool:
            if prov is not None and prov.density is not None:
                return prov.density > 0
            if self._looping():
                self.p.assume(f"a boolean test on a tensor asked over {LOOP_LIMIT} times at one place in one call: "
                              "assumed false from then on (a loop on it ends)")
                return False
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
        """What an op's output is known to hold (a range, a density, a value), from what its inputs held.

        Long because: a flat table, one rule per op, on the path of every op the meta pass dispatches (a split
        adds a call to each view op of the pass)."""
        p = self.p
        if func is aten.topk.default:
            x = args[0]
            dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
            p.set(out[1], _Prov(range=x.shape[dim], k=out[1].shape[dim]))
            if p.gathers is not None:  # a routing: experts looped in Python take their top-k from it
                p.gathers.route(p.tracer.stack[-1] if p.tracer.stack else "", x.shape[dim], out[1].shape[dim])
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
            elif prov is not None and prov.range and prov.k is None and isinstance(first, torch.Tensor):
                # positions made by arange(n): the largest is n - 1, the least 0 (a mask sized from them fits T)
                top = func in (aten.max.default, aten.amax.default, aten.max.dim)
                p.set(first, _Prov(value=float(prov.range - 1 if top else 0)))
            return
        if func in (aten.arange.default, aten.arange.start, aten.arange.start_step) and \
                isinstance(out, torch.Tensor) and out.dim() == 1 and not out.dtype.is_floating_point:
            start = args[0] if func is not aten.arange.default and args else 0
            step = args[2] if func is aten.arange.start_step and len(args) > 2 else 1
            if start == 0 and step == 1 and out.shape[0] > 0:
                p.set(out, _Prov(range=int(out.shape[0])))  # 0, 1, ..., n - 1: each value once
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


class TolistPolicy:
    """`Tensor.tolist()` on meta has no data: answer it from provenance (patched on torch.Tensor for the pass:
    cheaper than a function mode that would see every torch call)."""

    def __init__(self, policy: Policy):
        self.p = policy
        self.saved: Any = None

    def __enter__(self) -> "TolistPolicy":
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
        kept = kept_value(t, "tolist")
        if kept is not None:
            return kept.tolist()
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

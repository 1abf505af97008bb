"""FLOPs per module per call, counted in the meta forward pass from the aten ops the model's code runs.

One multiply-accumulate is 2 FLOPs; element-wise ops (norms, activations, softmax, adds) count nothing, as
`torch.utils.flop_counter.FlopCounterMode`, fvcore and every published per-token figure count. The formulas are
torch's own for the ops it knows (mm, addmm, bmm, baddbmm, _scaled_mm, convolutions, the fused attention kernels),
so a dense model's figure equals FlopCounterMode's on a real run, and ours for what it leaves out:

- `_grouped_mm` (transformers' grouped-GEMM experts): 2 × rows × K × N with the rows the routing policy gave each
  group, so routed experts count for the tokens they receive (batched_mm experts are bmm over the B·T·k pairs);
- attention computed by a fused CPU or overridable kernel (`_scaled_dot_product_flash_attention_for_cpu`, ...):
  the same formula as sdpa's, 4·B·H·Tq·Tk·D; `matmul`, `einsum` and `linear` reach us as their decompositions;
- stubbed kernels (DeepSeek's fp8_gemm, sparse_attn, ...): the formula their shape rule declares
  (`@archviz.kernels.shape_rule(name, flops=...)`).

Ops are attributed to the innermost module running. An op that computes (a matmul, convolution or attention by its
name) with no formula, or a stubbed kernel with no FLOPs formula, makes its module's FLOPs *unknown*: named, never
silently zero. Repeated blocks answered from the memo get the FLOPs of the one that ran, as they get its shapes.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

import torch
from torch.utils import flop_counter

from ..shapes.flex import flex_call
from ..shapes.memo import unnumbered
from .masks import Masks, band_count, is_product, is_sdpa, mask_mod_share

aten = torch.ops.aten


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(t.shape)


def _grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """torch._grouped_mm: 2-D × 3-D (rows of a split by offsets over the groups of b), 3-D × 3-D (batched),
    3-D × 2-D, or 2-D × 2-D (K split by offsets). Every output element is a K-long dot product, except in the
    2-D × 2-D case, where the groups split K: then 2·M·K_total·N."""
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        return 2 * mat_a.shape[0] * mat_a.shape[1] * mat_b.shape[1]
    out = out_val if isinstance(out_val, torch.Tensor) else None
    n_out = out.numel() if out is not None else math.prod(_shape(mat_a)[:-1]) * mat_b.shape[-1]
    return 2 * n_out * mat_a.shape[-1]


def _sdpa_like(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, out_val: Any = None,
               **kwargs: Any) -> int:
    """Fused attention [B, H, Tq, D] × [B, Hk, Tk, D]: QKᵀ and P·V, 4·B·H·Tq·Tk·D (torch's sdpa formula; key
    and value heads broadcast to the query's as GQA does)."""
    b, h, sq, d = _shape(query)
    sk, dv = key.shape[-2], value.shape[-1]
    return 2 * b * h * sq * sk * d + 2 * b * h * sq * sk * dv


def _mv(a: torch.Tensor, v: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    return 2 * a.shape[0] * a.shape[1]


def _addmv(bias: Any, a: torch.Tensor, v: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    return 2 * a.shape[0] * a.shape[1]


def _dot(a: torch.Tensor, b: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    return 2 * a.numel()


def _linear(x: torch.Tensor, w: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """aten.linear (whole on meta for some dtypes): 2 × output elements × K; the bias add is not counted (torch's
    addmm formula does not count it either)."""
    return 2 * math.prod(_shape(x)[:-1]) * x.shape[-1] * w.shape[0]


def _matmul(a: torch.Tensor, b: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """aten.matmul, broadcast: 2 × output elements × K."""
    n_out = out_val.numel() if isinstance(out_val, torch.Tensor) else 1
    return 2 * n_out * a.shape[-1]


def _addbmm(bias: Any, a: torch.Tensor, b: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    n, m, k = _shape(a)
    return 2 * n * m * k * b.shape[-1]


def _einsum(equation: str, operands: Any, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """aten.einsum (it reaches the dispatch mode whole on meta): operands contracted left to right, each pairwise
    step 2 × the product of the sizes of every index either side holds (a batched matmul's 2·b·m·k·n); a single
    operand (a sum, a trace) computes nothing."""
    ops = list(operands)
    lhs, _, out = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if "." in equation or len(terms) != len(ops):  # ellipsis: count it as a matmul of the shapes' products
        return None  # type: ignore[return-value]
    size: dict[str, int] = {}
    for term, t in zip(terms, ops):
        for ch, d in zip(term, t.shape):
            size[ch] = max(size.get(ch, 1), int(d))
    if not _ and len(terms) == 1:
        return 0
    keep = set(out) if _ else {c for c in size if sum(t.count(c) for t in terms) == 1}
    total = 0
    cur = terms[0]
    for i in range(1, len(terms)):
        both = set(cur) | set(terms[i])
        total += 2 * math.prod(size[c] for c in both)
        later = keep.union(*terms[i + 1:]) if i + 1 < len(terms) else keep
        cur = "".join(c for c in both if c in later)
    return total


# The formulas by op (OpOverloadPacket): torch's first, then ours for what it has none for.
_OURS: dict[Any, Callable[..., int]] = {}
for _name, _fn in (("_grouped_mm", _grouped_mm), ("_scaled_grouped_mm", _grouped_mm),
                   ("_scaled_dot_product_flash_attention_for_cpu", _sdpa_like),
                   ("_scaled_dot_product_fused_attention_overrideable", _sdpa_like),
                   ("einsum", _einsum), ("linear", _linear), ("matmul", _matmul), ("mv", _mv), ("addmv", _addmv),
                   ("dot", _dot), ("vdot", _dot), ("addbmm", _addbmm)):
    _packet = getattr(aten, _name, None)
    if _packet is not None:
        _OURS[_packet] = _fn
FORMULAS: dict[Any, Callable[..., int]] = {**_OURS, **flop_counter.flop_registry}

# An op whose name says it computes, with no formula above, makes its module's FLOPs unknown.
_COMPUTE_WORDS = ("mm", "conv", "attention", "matmul", "einsum", "linear", "gemm", "bmm")
_BACKWARD = "backward"


def op_flops(func: Any, args: tuple, kwargs: dict, out: Any) -> int | None:
    """FLOPs of one aten op call; None for an op that computes and has no formula here."""
    packet = getattr(func, "_overloadpacket", func)
    formula = FORMULAS.get(packet)
    if formula is not None:
        n = formula(*args, **kwargs, out_val=out)
        return None if n is None else int(n)
    name = getattr(packet, "__name__", str(packet))
    if _BACKWARD not in name and any(w in name for w in _COMPUTE_WORDS):
        return None
    return 0


def _in_stub_call() -> bool:
    """Whether an op runs inside a stubbed kernel's rule (its FLOPs are the kernel's formula's, not its ops')."""
    from ..shapes import Tracer

    code = Tracer.stub_call.__code__
    f = sys._getframe(2)
    while f is not None:
        if f.f_code is code:
            return True
        f = f.f_back
    return False


MIXING = -2  # an event's rows field for a product of two activations (-1: any other op; >= 0: a module's call)


def _storages(tensors: Any) -> set[int]:
    """The storages `tensors` hold (a view shares its base's), as ids."""
    out: set[int] = set()
    for t in tensors:
        try:
            out.add(t.untyped_storage()._cdata)
        except (RuntimeError, NotImplementedError, AttributeError, TypeError):  # a tensor subclass with no storage
            continue
    return out


def module_paths(model: torch.nn.Module) -> dict[int, str]:
    """id(module) -> its first path in pre-order, as the tracer names modules (one walk; share it between passes)."""
    from ..walk.walker import preorder

    paths: dict[int, str] = {}
    for path, mod in preorder(model):
        paths.setdefault(id(mod), path)
    return paths


def _sig(obj: Any, depth: int = 0) -> Any:
    """The shapes, dtypes and scalars of a call's positional inputs (what the block memo keys on, less kwargs and
    the layer numbers: `unnumbered`)."""
    if isinstance(obj, torch.Tensor):
        return (tuple(obj.shape), obj.dtype)
    if isinstance(obj, (tuple, list)) and depth < 4:
        return tuple(_sig(x, depth + 1) for x in obj)
    if isinstance(obj, (int, float, bool, str, type(None))):
        return obj
    return type(obj).__name__


class FlopCounter:
    """The pass's observer: `observe` is trace_shapes' op_observer, `kernel` its on_kernel, `memo` its on_memo;
    `install` adds global module hooks that count calls and mark where each call's ops begin and end (so that a
    block answered from the memo gets the FLOPs of the call it was answered from)."""

    def __init__(self, model: torch.nn.Module, paths: dict[int, str] | None = None):
        self.paths = paths if paths is not None else module_paths(model)
        # (path, flops, unknown reason or None, token rows if a call of the module else -1, flops attended): in the
        # order they happened
        self.events: list[tuple[str, int, str | None, int, int]] = []
        self.masks = Masks()
        self._open: list[tuple[str, Any, int]] = []
        self._runs: dict[tuple[str, Any], tuple[int, int]] = {}  # (path, input signature) -> its first call's events
        self._handles: list[Any] = []
        self._weights = _storages((*model.parameters(), *model.buffers()))
        self._flex: dict[tuple[Any, int, int], float] = {}  # (mask_mod, Tq, Tk) -> the share it keeps
        self.notes: dict[str, None] = {}  # what the counter assumed, in the order met

    # -- trace_shapes' callbacks
    def observe(self, func: Any, args: tuple, kwargs: dict, out: Any, path: str) -> None:
        n = op_flops(func, args, kwargs, out)
        if n == 0:
            masked = self.masks.observe(func, args, kwargs, out)
            if masked is not None:  # scores masked: the products that made them attended over the kept share
                events, share = masked
                for i in events:
                    p, m, why, rows, _ = self.events[i]
                    self.events[i] = (p, m, why, rows, round(m * share))
            return
        if _in_stub_call():
            return
        if n is None:
            self.events.append((path, 0, f"aten op {func} has no FLOPs formula", -1, 0))
            return
        share = None
        if is_sdpa(func):
            share = self.masks.sdpa(args, kwargs)
        elif is_product(func):
            share = self.masks.product(func, args, out, len(self.events))
        mixing = is_sdpa(func) or is_product(func) and not self._reads_weights(args)
        if mixing and not is_sdpa(func):
            share = self._flex_share(path, share)
        self.events.append((path, n, None, MIXING if mixing else -1, n if share is None else round(n * share)))

    def _flex_share(self, path: str, share: float | None) -> float | None:
        """Inside flex attention's dense reference, its scores and weighted sums are attended over the share of
        positions its BlockMask's mask_mod keeps; where that is not known, a causal mask's share, said in a note."""
        call = flex_call()
        if call is None:
            return share
        key = (call.mask_mod, call.tq, call.tk)
        if key not in self._flex:
            got = mask_mod_share(call.mask_mod, call.tq, call.tk)
            if got is None:
                got = band_count(call.tq, call.tk, -math.inf, call.tk - call.tq) / (call.tq * call.tk)
                name = getattr(call.mask_mod, "__name__", type(call.mask_mod).__name__)
                self.notes.setdefault(
                    f"flex attention ({path}): the layout of its BlockMask's mask_mod {name} is not known on meta "
                    "(it reads tensors that hold no values there, or makes no band); its FLOPs attended are "
                    "counted as a causal mask's (assumed)", None)
            self._flex[key] = got
        return self._flex[key]

    def _reads_weights(self, args: tuple) -> bool:
        """An operand is (a view of) a parameter or buffer: a projection, not scores or their weighted sum."""
        return bool(self._weights & _storages(a for a in args if isinstance(a, torch.Tensor)))

    def kernel(self, path: str, qualname: str, args: tuple, kwargs: dict, result: Any) -> None:
        from ..shapes.kernels import flops_formula, is_mixing, own_name

        formula = flops_formula(qualname)
        if formula is None:
            name = own_name(qualname)
            self.events.append((path, 0, f"stubbed kernel {name} has no FLOPs formula (declare one: "
                                         f"@archviz.kernels.shape_rule({name!r}, flops=...))", -1, 0))
            return
        n = int(formula(*args, **kwargs))
        self.events.append((path, n, None, MIXING if is_mixing(qualname) else -1, round(n * _kept(qualname, args,
                                                                                                  kwargs))))

    def memo(self, source: str, target: str) -> None:
        sig = self._open[-1][1] if self._open and self._open[-1][0] == target else None
        span = self._runs.get((source, sig))
        if span is None:
            self.events.append((target, 0, f"answered from the memo of {source}, whose FLOPs were not recorded",
                                -1, 0))
            return
        prefix = source + "."
        for path, n, why, call, kept in self.events[span[0]:span[1]]:
            if path == source:
                path = target
            elif path.startswith(prefix):
                path = target + path[len(source):]
            self.events.append((path, n, why, call, kept))

    # -- module hooks
    def _pre(self, module: Any, args: Any) -> None:
        path = self.paths.get(id(module))
        if path is None:
            return
        first = next((a for a in args if isinstance(a, torch.Tensor)), None) if isinstance(args, tuple) else None
        rows = first.numel() // first.shape[-1] if first is not None and first.dim() and first.shape[-1] else 0
        self.events.append((path, 0, None, rows, 0))
        keyed = unnumbered(module, args)[0] if isinstance(args, tuple) else args  # as the block memo keys it
        self._open.append((path, _sig(keyed), len(self.events)))

    def _post(self, module: Any, args: Any, output: Any) -> None:
        path = self.paths.get(id(module))
        if path is None or not self._open:
            return
        p, sig, start = self._open.pop()
        self._runs.setdefault((p, sig), (start, len(self.events)))

    def install(self) -> None:
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._handles.append(register_module_forward_pre_hook(self._pre))
        self._handles.append(register_module_forward_hook(self._post))

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def __enter__(self) -> "FlopCounter":
        self.install()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    # -- the result
    def by_path(self) -> tuple[dict[str, int], dict[str, int], dict[str, tuple[str, ...]]]:
        """(own FLOPs per module path, calls per path, unknown reasons per path)."""
        flops: dict[str, int] = {}
        calls: dict[str, int] = {}
        unknown: dict[str, dict[str, None]] = {}
        for path, n, why, rows, _ in self.events:
            if rows >= 0:
                calls[path] = calls.get(path, 0) + 1
            elif why is not None:
                unknown.setdefault(path, {})[why] = None
            elif n:
                flops[path] = flops.get(path, 0) + n
        return flops, calls, {p: tuple(w) for p, w in unknown.items()}

    def unknown_calls(self) -> dict[str, int]:
        """How many calls each reason for unknown FLOPs was met in (a kernel with no formula, called in every
        layer: one reason, its count of calls)."""
        out: dict[str, int] = {}
        for _, _, why, rows, _ in self.events:
            if rows < 0 and why is not None:
                out[why] = out.get(why, 0) + 1
        return out

    def mixing(self) -> dict[str, int]:
        """FLOPs per module path of products between two activations (attention's scores and their weighted sum,
        retention, linear attention, a scan's state products) and of fused attention: attention-like work by the
        ops, whatever the module is named."""
        out: dict[str, int] = {}
        for path, n, why, rows, _ in self.events:
            if rows == MIXING and why is None and n:
                out[path] = out.get(path, 0) + n
        return out

    def masked(self) -> dict[str, int]:
        """FLOPs spent on masked positions per module path (as written − attended)."""
        out: dict[str, int] = {}
        for path, n, why, rows, kept in self.events:
            if rows < 0 and why is None and kept != n:
                out[path] = out.get(path, 0) + n - kept
        return out

    def rows(self) -> dict[str, int]:
        """Token rows each module received over its calls (leading dims of its first tensor input)."""
        out: dict[str, int] = {}
        for path, _, _, rows, _ in self.events:
            if rows > 0:
                out[path] = out.get(path, 0) + rows
        return out


def _kept(qualname: str, args: tuple, kwargs: dict) -> float:
    """The share of its (query, key) pairs an attention kernel's mask keeps (its rule's `attends` bands), else 1."""
    from ..shapes.kernels import attends_formula

    formula = attends_formula(qualname)
    bands = formula(*args, **kwargs) if formula is not None else None
    total = sum(q * k for q, k, _, _ in bands or ())
    return sum(band_count(q, k, lo, hi) for q, k, lo, hi in bands) / total if bands and total else 1.0


def exact_routing(flops: dict[str, int], rows: dict[str, int], record: Any, tokens: int) -> tuple[dict[str, int],
                                                                                                   list[str]]:
    """Routed experts held in a list run, under the pass's policy, R = ceil(B·T·k/E) token rows each: more than
    the B·T·k a step routes when B·T·k does not divide by E (decode: 1 token, 8 of 256 experts, but R = 1 for all
    256). Expert FLOPs are linear in their rows, so each collection's are scaled to B·T·k rows. Fused experts
    (transformers' batched_mm, grouped_mm) compute the B·T·k pairs exactly and are left as counted."""
    index = record.index()
    out = dict(flops)
    notes: list[tuple[str, int, float]] = []
    scales: dict[str, float] = {}
    for moe in record.summary.moe:
        lst = index.get(moe.path)
        if lst is None or lst.class_name not in ("ModuleList", "ModuleDict") or not moe.top_k:
            continue
        ran = sum(rows.get(c, 0) for c in lst.children)
        exact = tokens * moe.top_k * moe.local_experts / max(1, moe.experts)
        if not ran or ran <= exact:
            continue
        scales[moe.path] = exact / ran
        notes.append((moe.path, ran, exact))
    if scales:
        for path, n in out.items():
            parent = path
            while "." in parent:  # the innermost collection above the path
                parent = parent.rsplit(".", 1)[0]
                scale = scales.get(parent)
                if scale is not None:
                    out[path] = round(n * scale)
                    break
    if not notes:
        return out, []
    path, ran, exact = notes[0]
    more = f" (and {len(notes) - 1} more collections alike)" if len(notes) > 1 else ""
    return out, [f"routed experts held in a list ({path}{more}): the routing policy ran {ran:,} token rows over "
                 f"their experts, R = ceil(B·T·k/E) each; their FLOPs are scaled to the {exact:g} rows B·T·k "
                 "routes"]

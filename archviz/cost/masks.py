"""FLOPs attended: the share of attention's score and P·V products over the positions its mask keeps.

Attention that scores every position and then masks most of them (a causal mask in a prefill, a sliding window done
by masking, an index's top-k kept with a -inf mask) computes the masked products all the same: the FLOPs as written.
The FLOPs attended are what a kernel that skips masked blocks does, and what model cards compare. On meta no mask
holds values, so the masks' layouts are followed from the ops that make them:

- a constant (`full`, `ones`, `zeros`, `*_like`), then `triu(d)` / `tril(d)` (a band of diagonals j − i, chained:
  a causal mask, a sliding window);
- `scatter(dim, index, v)` with `index` from `topk` into a constant: k of the dim's n positions hold v;
- `logical_not`, `masked_fill(mask, v)` of a constant, and view-like ops (view, expand, transpose, ...);

and where a mask meets scores -- `scores + mask` (kept: finite), `scores.masked_fill(mask, -inf)` (kept: where the
mask is false), sdpa's `attn_mask` (bool: true; float: finite) or `is_causal` -- the product that made the scores
is attended over the kept share, and so is the next product of the softmax of those scores (P·V). A mask of unknown
layout keeps everything: the figure is then the one as written.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

aten = torch.ops.aten

_NEG = -1e30  # a fill at or below this masks (-inf, finfo.min)


@dataclass(frozen=True, slots=True)
class Mask:
    """Values of a tensor over its last two dims (i, j): `inside` where lo ≤ j − i ≤ hi (a band) or, for a
    `share` mask, on that share of each row's positions; `outside` elsewhere."""

    inside: float
    outside: float
    lo: float = -math.inf
    hi: float = math.inf
    share: float | None = None
    tq: int = 1  # the (query, key) dims the band was cut in: the mask's share is its own, however it is then
    tk: int = 1  # unsqueezed and broadcast (over heads, sequences)

    def inside_share(self) -> float:
        if self.share is not None:
            return self.share
        if self.lo == -math.inf and self.hi == math.inf:
            return 1.0
        if not self.tq or not self.tk:
            return 0.0
        return band_count(self.tq, self.tk, self.lo, self.hi) / (self.tq * self.tk)

    def kept(self, keep: Callable[[float], bool]) -> float:
        """Share of positions kept, `keep(value)` saying which values keep."""
        a = self.inside_share()
        return (a if keep(self.inside) else 0.0) + ((1.0 - a) if keep(self.outside) else 0.0)


def band_count(tq: int, tk: int, lo: float, hi: float) -> int:
    """(i, j) in [0, tq) × [0, tk) with lo ≤ j − i ≤ hi: summed per run of rows over which the row's count is one
    linear piece (its ends clamped or not), so a mask over a million positions costs no more than one over ten."""
    cuts = {0, tq}
    for x in (-lo, 1 - lo, -hi - 1, -hi, tk - 1 - hi, tk - hi, tk - lo - 1, tk - lo):
        if math.isfinite(x):
            cuts.add(min(tq, max(0, math.floor(x))))
            cuts.add(min(tq, max(0, math.ceil(x))))
    bounds = sorted(cuts)
    return sum(_rows_kept(s, e, tk, lo, hi) for s, e in zip(bounds, bounds[1:]) if e > s)


def _row_kept(i: int, tk: int, lo: float, hi: float) -> int:
    a = max(0, i + lo) if lo != -math.inf else 0
    b = min(tk - 1, i + hi) if hi != math.inf else tk - 1
    return int(b - a + 1) if b >= a else 0


def _rows_kept(s: int, e: int, tk: int, lo: float, hi: float) -> int:
    """Rows s..e-1 kept, where each row's count is linear in i (or 0): the arithmetic series of its two ends."""
    first, last = _row_kept(s, tk, lo, hi), _row_kept(e - 1, tk, lo, hi)
    if e - s > 2 and (first == 0) != (last == 0):  # a piece that crosses 0 inside: row by row (never met)
        return sum(_row_kept(i, tk, lo, hi) for i in range(s, e))
    return (first + last) * (e - s) // 2


def _finite(v: float) -> bool:
    return v > _NEG


def _true(v: float) -> bool:
    return v != 0


def _false(v: float) -> bool:
    return v == 0


_VIEWS = frozenset(op for op in (
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default, aten.clone.default,
    aten.contiguous.default, aten.transpose.int, aten.permute.default, aten.unsqueeze.default, aten.squeeze.dim,
    aten.squeeze.default, aten.slice.Tensor, aten.alias.default, aten.detach.default, aten._to_copy.default,
    aten.to.dtype, aten.to.dtype_layout, aten.type_as.default, aten.lift_fresh.default, aten.select.int, aten.t.default, aten.dropout.default,
    aten.native_dropout.default, aten.flatten.using_ints) if op is not None)
_CONST = {aten.full.default: None, aten.ones.default: 1.0, aten.zeros.default: 0.0, aten.full_like.default: None,
          aten.ones_like.default: 1.0, aten.zeros_like.default: 0.0, aten.new_full.default: None,
          aten.new_ones.default: 1.0, aten.new_zeros.default: 0.0, aten.fill.Scalar: None, aten.fill_.Scalar: None,
          aten.scalar_tensor.default: None}
_BAND = {aten.triu.default: "triu", aten.tril.default: "tril", aten.triu_.default: "triu",
         aten.tril_.default: "tril"}
_SCALE = frozenset((aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar, aten.mul_.Tensor,
                    aten.div_.Tensor, aten.tanh.default))
_SOFTMAX = frozenset((aten._softmax.default, aten.softmax.int, aten._safe_softmax.default))
_PRODUCTS = frozenset((aten.bmm.default, aten.baddbmm.default, aten.matmul.default, aten.mm.default,
                       aten.einsum.default))
_SDPA = "scaled_dot_product"


def _fill(func: Any, args: tuple) -> float | None:
    v = _CONST[func]
    if func is aten.scalar_tensor.default:
        x = args[0] if args else None
        return float(x) if isinstance(x, (int, float)) else None
    if v is None:
        x = args[1] if func in (aten.full.default, aten.full_like.default, aten.new_full.default,
                                 aten.fill.Scalar, aten.fill_.Scalar) and len(args) > 1 else None
        if isinstance(x, bool):
            return float(x)
        return float(x) if isinstance(x, (int, float)) else None
    return v


class Masks:
    """Follows mask layouts and scores through a pass's aten ops: `product` and `sdpa` give the share a product is
    attended over as it is counted (P·V of masked probabilities, a fused attention's mask), and `observe` the
    product events whose scores a mask has just masked, with their share (the counter updates those events)."""

    def __init__(self) -> None:
        # id(tensor) -> (a weak reference to it, what it is): never keeps a tensor alive (the activation peak sees
        # tensors freed)
        self.masks: dict[int, tuple[Any, Mask]] = {}  # a mask's layout
        # scores or probs: (the product events that made them, kept share)
        self.scores: dict[int, tuple[Any, tuple[tuple[int, ...], float]]] = {}

    @staticmethod
    def _lookup(table: dict[int, tuple[Any, Any]], t: Any) -> Any:
        hit = table.get(id(t))
        return hit[1] if hit is not None and hit[0]() is t else None

    @staticmethod
    def _put(table: dict[int, tuple[Any, Any]], t: Any, value: Any) -> None:
        if isinstance(t, torch.Tensor):
            key = id(t)
            table[key] = (weakref.ref(t, lambda _r, k=key, d=table: d.pop(k, None)), value)

    def _get(self, t: Any) -> Mask | None:
        return self._lookup(self.masks, t)

    def tag(self, t: Any) -> Mask | None:
        """The layout of mask `t` (None: not a mask followed): the block memo keys a block's inputs by it, so a
        layer given a sliding-window mask is not answered from one given a causal mask of the same shape."""
        return self._get(t)

    def _score(self, t: Any) -> tuple[tuple[int, ...], float] | None:
        return self._lookup(self.scores, t)

    def _set(self, t: Any, m: Mask) -> None:
        self._put(self.masks, t, m)

    def _set_score(self, t: Any, events: tuple[int, ...], kept: float) -> None:
        self._put(self.scores, t, (events, kept))

    def product(self, func: Any, args: tuple, out: Any, event: int) -> float | None:
        """A product just counted as `event`: the share it is attended over when an operand is masked
        probabilities (P·V), else None; its output is followed as scores."""
        share = None
        operands = args[1] if func is aten.einsum.default and len(args) > 1 else args
        for a in operands:
            if isinstance(a, torch.Tensor):
                s = self._score(a)
                if s is not None and s[1] < 1.0:
                    share = s[1]
        if isinstance(out, torch.Tensor) and out.dim() >= 2 and func is not aten.mm.default:
            self._set_score(out, (event,), 1.0)
        return share

    def sdpa(self, args: tuple, kwargs: dict) -> float | None:
        """The kept share of a fused attention call: its `is_causal` (torch's top-left causal mask) or its mask."""
        q, k = args[0], args[1]
        tq, tk = q.shape[-2], k.shape[-2]
        mask = kwargs.get("attn_mask")
        if mask is None and len(args) > 3 and isinstance(args[3], torch.Tensor):  # efficient attention's attn_bias
            mask = args[3]
        causal = kwargs.get("is_causal")
        if causal is None:
            causal = next((a for a in args[3:] if isinstance(a, bool)), False)
        if causal:
            return band_count(tq, tk, -math.inf, 0) / (tq * tk) if tq and tk else None
        if isinstance(mask, torch.Tensor):
            m = self._get(mask)
            if m is not None:
                return m.kept(_true if mask.dtype == torch.bool else _finite)
        return None

    def observe(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Follow one op; (the product events of the scores, kept share) where it masks scores. A mask or scores
        changed in place by an op not followed here lose their layout (what they hold is no longer known)."""
        if not args or out is not args[0] or not isinstance(out, torch.Tensor):
            return self._observe(func, args, kwargs, out)
        key = id(out)
        before = self.masks.get(key), self.scores.get(key)
        got = self._observe(func, args, kwargs, out)
        if self.masks.get(key) is before[0] and self.scores.get(key) is before[1]:
            self.masks.pop(key, None)
            self.scores.pop(key, None)
        return got

    def _observe(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """What one op makes of the masks and scores it reads; (score dims, share kept) where it masks scores."""
        if func in _VIEWS:
            return self._on_view(func, args, kwargs, out)
        if func in _CONST:
            return self._on_constant(func, args, kwargs, out)
        if func in _BAND:
            return self._on_band(func, args, kwargs, out)
        if func in (aten.scatter.value, aten.scatter_.value, aten.scatter.src, aten.scatter_.src):
            return self._on_scatter(func, args, kwargs, out)
        if func is aten.where.self:  # where(mask, a, b) of constants a and b: the mask's layout, a and b its values
            return self._on_where(func, args, kwargs, out)
        if func in (aten.logical_not.default, aten.bitwise_not.default):
            return self._on_not(func, args, kwargs, out)
        if func in (aten.masked_fill.Scalar, aten.masked_fill_.Scalar):
            return self._on_masked_fill(func, args, kwargs, out)
        if func in (aten.add.Tensor, aten.add_.Tensor):
            return self._on_add(func, args, kwargs, out)
        if func in _SCALE:  # scores scaled (by 1/sqrt(d), a softcap's factor): the same scores
            return self._on_scale(func, args, kwargs, out)
        if func in _SOFTMAX:
            return self._on_softmax(func, args, kwargs, out)
        return None

    def _on_view(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """A view: the mask and the scores its source carries."""
        src = args[0] if args else None
        m = self._get(src)
        if m is not None:
            self._set(out, m)
        s = self._score(src)
        if s is not None and isinstance(out, torch.Tensor):
            self._set_score(out, s[0], s[1])
        return None

    def _on_constant(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """A constant fill: a mask of one value."""
        v = _fill(func, args)
        if v is not None:
            self._set(out, Mask(inside=v, outside=v))
        return None

    def _on_band(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Triu/tril: a band of the mask."""
        m = self._get(args[0])
        d = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
        if m is None or m.share is not None or not isinstance(d, int):
            return None
        if _BAND[func] == "triu":  # keeps j − i ≥ d, zeroes the rest
            lo, hi = max(m.lo, d), m.hi
        else:
            lo, hi = m.lo, min(m.hi, d)
        x = args[0]
        if x.dim() >= 2 and (m.lo == -math.inf and m.hi == math.inf or
                             (m.outside == 0.0 and (m.tq, m.tk) == tuple(x.shape[-2:]))):
            self._set(out, Mask(inside=m.inside, outside=0.0, lo=lo, hi=hi, tq=x.shape[-2], tk=x.shape[-1]))
        return None

    def _on_scatter(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Scatter of a constant into a constant: a share of positions."""
        m = self._get(args[0])
        dim, index = args[1], args[2]
        if m is not None and m.inside == m.outside and isinstance(index, torch.Tensor) and \
                isinstance(args[0], torch.Tensor) and args[0].shape[dim]:
            v = args[3]
            if isinstance(v, torch.Tensor):
                v = self._get(v).inside if self._get(v) is not None else None
            if isinstance(v, (int, float)):
                share = min(1.0, index.shape[dim] / args[0].shape[dim])
                self._set(out, Mask(inside=float(v), outside=m.inside, share=share))
        return None

    def _on_where(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Where(mask, a, b) of constants a and b."""
        m, a, b = (self._get(x) for x in args[:3])
        if m is not None and a is not None and b is not None and a.inside == a.outside and b.inside == b.outside:
            self._set(out, Mask(inside=a.inside if m.inside else b.inside,
                                outside=a.inside if m.outside else b.inside, lo=m.lo, hi=m.hi, share=m.share,
                                tq=m.tq, tk=m.tk))
        return None

    def _on_not(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Logical or bitwise not of a mask."""
        m = self._get(args[0])
        if m is not None:
            self._set(out, Mask(inside=float(not m.inside), outside=float(not m.outside), lo=m.lo, hi=m.hi,
                                share=m.share, tq=m.tq, tk=m.tk))
        return None

    def _on_masked_fill(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Scores masked to -inf, or a constant masked to another."""
        x, mask, v = args[0], args[1], args[2]
        mm = self._get(mask)
        if mm is None:
            return None
        s = self._score(x)
        if s is not None and isinstance(v, (int, float)) and v <= _NEG:
            kept = mm.kept(_false)
            self._set_score(out, s[0], kept)
            return s[0], kept
        m = self._get(x)
        if m is not None and m.inside == m.outside and isinstance(v, (int, float)):
            self._set(out, Mask(inside=float(v), outside=m.inside, lo=mm.lo, hi=mm.hi, share=mm.share,
                                tq=mm.tq, tk=mm.tk)
                      if mm.inside else Mask(inside=m.inside, outside=float(v), lo=mm.lo, hi=mm.hi,
                                             share=mm.share, tq=mm.tq, tk=mm.tk))
        return None

    def _on_add(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Scores plus a mask, or two masks summed."""
        a, b = args[0], args[1]
        sa, sb = self._score(a), self._score(b) if isinstance(b, torch.Tensor) else None
        if sa is not None and sb is not None:  # two products' scores summed (MLA: latent and rope parts)
            self._set_score(out, sa[0] + sb[0], min(sa[1], sb[1]))
            return None
        ma, mb = self._get(a), self._get(b) if isinstance(b, torch.Tensor) else None
        if ma is not None and mb is not None:  # two additive masks: one that masks nothing leaves the other's
            for x, y in ((ma, mb), (mb, ma)):
                if x.kept(_finite) == 1.0:
                    self._set(out, y)
                    return None
            self.masks.pop(id(out), None)  # their intersection is not known: neither layout holds
            return None
        for x, mask in ((a, b), (b, a)):
            s = self._score(x)
            mm = self._get(mask) if isinstance(mask, torch.Tensor) else None
            if s is not None and mm is not None:
                kept = mm.kept(_finite)
                self._set_score(out, s[0], kept)
                return s[0], kept
        return None

    def _on_scale(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Scores scaled: the same scores."""
        for x in args[:2]:
            s = self._score(x)
            if s is not None and isinstance(out, torch.Tensor) and out.shape == x.shape:
                self._set_score(out, s[0], s[1])
                break
        return None

    def _on_softmax(self, func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[tuple[int, ...], float] | None:
        """Softmax of scores: the probabilities keep what was kept."""
        s = self._score(args[0])
        if s is not None and isinstance(out, torch.Tensor):
            self._set_score(out, (), s[1])
        return None


_EXACT_PAIRS = 1 << 24  # (query, key) pairs a mask_mod is evaluated over one by one (4,096²); beyond: as a band
_ROW_CHUNK = 1 << 20  # pairs evaluated at once


def mask_mod_share(mask_mod: Callable[..., Any], tq: int, tk: int) -> float | None:
    """The share of the tq × tk (query, key) pairs a flex attention `mask_mod(b, h, q_idx, kv_idx)` keeps (batch 0,
    head 0), evaluated on the CPU: every pair where there are at most `_EXACT_PAIRS`, else from sampled rows where
    they make one band lo ≤ j − i ≤ hi (causal, a sliding window). None: not known (the function reads tensors
    that hold no values on meta, or the rows make no band)."""
    if not tq or not tk:
        return None
    try:
        if tq * tk <= _EXACT_PAIRS:
            step = max(1, _ROW_CHUNK // tk)
            kept = sum(int(_rows(mask_mod, range(s, min(tq, s + step)), tk).sum()) for s in range(0, tq, step))
            return kept / (tq * tk)
        band = _band(mask_mod, tq, tk)
    except Exception:  # the model's function, run on tensors it was not written for: its layout is not known
        return None
    return band_count(tq, tk, *band) / (tq * tk) if band is not None else None


def _rows(mask_mod: Callable[..., Any], rows: Any, tk: int) -> torch.Tensor:
    """mask_mod over rows × [0, tk) as a bool [len(rows), tk] (a mask_mod that returns a scalar broadcast)."""
    zero = torch.zeros((), dtype=torch.int32, device="cpu")
    q = torch.tensor(list(rows), dtype=torch.int32, device="cpu").unsqueeze(-1)
    kv = torch.arange(tk, dtype=torch.int32, device="cpu").unsqueeze(0)
    out = mask_mod(zero, zero, q, kv)
    if not isinstance(out, torch.Tensor) or out.device.type != "cpu":
        raise ValueError("the mask_mod gave no CPU tensor")
    return torch.broadcast_to(out.bool(), (q.shape[0], tk))


def _band(mask_mod: Callable[..., Any], tq: int, tk: int) -> tuple[float, float] | None:
    """(lo, hi) of the band lo ≤ j − i ≤ hi every sampled row keeps exactly, or None."""
    rows = sorted({min(tq - 1, max(0, r)) for r in (*range(0, tq, max(1, tq // 32)), 1, 2, tq - 2, tq - 1)})
    got = _rows(mask_mod, rows, tk)
    lo: set[float] = set()
    hi: set[float] = set()
    for i, row in zip(rows, got):
        idx = row.nonzero().flatten()
        if idx.numel():
            a, b = int(idx[0]), int(idx[-1])
            if a > 0:
                lo.add(a - i)
            if b < tk - 1:
                hi.add(b - i)
    if len(lo) > 1 or len(hi) > 1:
        return None
    band = (lo.pop() if lo else -math.inf, hi.pop() if hi else math.inf)
    for i, row in zip(rows, got):
        j = torch.arange(tk)
        want = (j - i >= band[0]) & (j - i <= band[1])
        if not torch.equal(row, want):
            return None
    return band


def is_sdpa(func: Any) -> bool:
    return _SDPA in getattr(getattr(func, "_overloadpacket", func), "__name__", "")


def is_product(func: Any) -> bool:
    return func in _PRODUCTS


__all__ = ["Masks", "Mask", "band_count", "is_sdpa", "is_product", "mask_mod_share"]

"""Dims named for people: an int width by the expression that built the module (``m.dims``, first) or by the
config field, or product of two fields, it equals when exactly one does; else as half a field or a field less the
rotary width (``qk_rope_head_dim/2``, ``head_dim − qk_rope_head_dim``), or from the model width (``4 × n_embd``,
``n_embd ÷ n_head``); B and T by what they stand for. A size several fields equal, that nothing beside it decides,
reads with every one of them on the site (``64 (index_n_heads, num_attention_heads or qk_rope_head_dim)``).

A names file's ``[dims]`` table renames them (kept in the grouping as ``dims``): a key is a width (``"8192"``), a
name as found (a config field ``"dim"``, a product ``"n_groups × o_lora_rank"``) or a symbol (``"T"``); the width's
own key wins. ``"8192" = "groups × rank"`` names a width the config alone leaves unnamed, too.

Pure functions of records and config values, shared by the site, the terminal card and JSON output (no torch)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Mapping, Sequence

_SYMBOLS = {"B": "batch", "T": "positions", "S": "positions", "L": "positions", "N": "tokens", "H": "heads",
            "E": "experts", "K": "top-k", "G": "groups", "C": "channels"}
_NOT_DIMS = ("theta", "eps", "factor", "scale", "seed", "_id", "token", "iters", "beta", "alpha", "dropout",
             "max_batch",
             "init", "range", "coef", "version", "limit", "ratio")
_WIDTH_KEYS = ("dim", "hidden_size", "d_model", "n_embd", "hidden_dim", "model_dim")
_ROTARY = re.compile(r"rope|rotary", re.I)  # a field of the rotary position encoding's width
_MIN_PART = 16  # the smallest dim named as half, or difference, of config fields (a rotary half-width of 16)
_MIN_PRODUCT = 256  # the smallest dim named as a product of two config fields (o_groups × o_lora_rank = 8192)
_MAX_MULTIPLE = 8  # the largest multiple of the model width named as such (an MLP's 4×, a fused QKV's 3×)
_HEADS = re.compile(r"head(?!_?(dim|size))", re.I)  # a field counting heads (n_head, num_attention_heads) ...
_KV = re.compile(r"kv|key_value", re.I)  # ... not the key/value heads (the model width over them is no head's)


class DimNames:
    """Name an int dim by the config field(s) it equals, when exactly one field (or one product of two) does."""

    def __init__(self, config: Mapping[str, Any], renames: Mapping[str, str] | None = None,
                 candidates: bool = False):
        """`candidates`: a size several fields equal, and nothing beside it decides, reads "64 (a, b or c)" (the
        site's pages) rather than bare (the terminal's narrow columns)."""
        self.renames = dict(renames or {})
        self.candidates = candidates
        ints = {k: v for k, v in config.items() if isinstance(v, int) and not isinstance(v, bool) and v > 1
                and not any(x in k.lower() for x in _NOT_DIMS)}
        self.ints = ints
        self.single: dict[int, list[str]] = {}
        for k, v in sorted(ints.items()):
            self.single.setdefault(v, []).append(k)
        self.product: dict[int, list[str]] = {}
        keys = sorted(ints)
        for i, a in enumerate(keys):
            for b in keys[i:]:
                self.product.setdefault(ints[a] * ints[b], []).append(f"{a} × {b}")
        self.diff: dict[int, list[str]] = {}
        for a in keys:
            for b in keys:
                if ints[a] > ints[b]:
                    self.diff.setdefault(ints[a] - ints[b], []).append(f"{a} − {b}")
        self.width = next((config[k] for k in _WIDTH_KEYS if isinstance(config.get(k), int)), None)
        self.width_key = next((k for k in _WIDTH_KEYS if isinstance(config.get(k), int)), None)

    @classmethod
    def for_record(cls, record: Any, candidates: bool = False) -> "DimNames":
        """The record's config fields, renamed by the names file its grouping was made with."""
        return cls(dict(record.source.config), dim_renames(record), candidates)

    def name(self, d: int, local: Mapping[int, str] | None = None, near: Sequence[str] = ()) -> str | None:
        """`near`: the names of the sizes beside `d` (its shape's other dims, the module's other widths); where
        several config fields (or products) equal `d`, the one made only of fields named near it is its name."""
        found = self._found(d, local, near)
        if self.renames:
            mine = self.renames.get(str(d))
            if mine is not None:
                return mine
            if found is not None:
                return self.renames.get(found, found)
        return found

    def _found(self, d: int, local: Mapping[int, str] | None = None, near: Sequence[str] = ()) -> str | None:
        if local and d in local:  # the walk put the code's name in the config's terms; "" when it could not
            return local[d] or None  # (no name beats one guessed from the config)
        s = self.single.get(d)
        if s:
            return s[0] if len(s) == 1 else _pick(s, near)
        p = self.product.get(d) if d >= _MIN_PRODUCT else None  # small numbers are products of two fields by
        if p:                                                    # chance: 32 is not hc_mult × o_groups (4 × 8)
            return p[0] if len(p) == 1 else _pick(p, near)
        return _rotary(self._parts(d), near) or self._of_width(d)

    def _of_width(self, d: int) -> str | None:
        """`d` as a small multiple of the model width (`4 × n_embd`: an MLP's inner width; `3 × n_embd`: a fused QKV)
        or as its share per head (`n_embd ÷ n_head`, where no head_dim field is in the config): how model code makes
        those widths when the config names none."""
        w, key = self.width, self.width_key
        if not w or d < _MIN_PART:
            return None
        if d % w == 0 and 2 <= d // w <= _MAX_MULTIPLE:
            return f"{d // w} × {key}"
        per = [k for k, v in self.ints.items() if _HEADS.search(k) and not _KV.search(k) and w % v == 0
               and w // v == d]
        return f"{key} ÷ {per[0]}" if len(per) == 1 else None

    def _parts(self, d: int) -> list[str]:
        """`d` as half of a field (`qk_rope_head_dim/2`), else as the difference of two, one of them the rotary
        encoding's (`head_dim − qk_rope_head_dim`): the rotary half-width and the width a partial rotary leaves, in
        attention code."""
        if d < _MIN_PART:  # 2 is half of hc_mult (4) by chance, not a rotary width
            return []
        half = [f"{k}/2" for k in self.single.get(2 * d, ())]
        return half or [c for c in self.diff.get(d, ()) if _ROTARY.search(c)]  # head_dim − 32 heads is chance

    def ambiguous(self, d: int, local: Mapping[int, str] | None = None) -> list[str]:
        """The fields (or products, halves) `d` equals where none of them is its name: every one of them, for a
        reader to choose from; [] where `d` has a name or no field gives it."""
        if (local and d in local) or str(d) in self.renames or self._found(d, local) is not None:
            return []
        s = self.single.get(d) or (self.product.get(d) if d >= _MIN_PRODUCT else None)
        return list(s) if s and len(s) > 1 else [k for k in self._parts(d) if "/" in k]

    def names_near(self, dims: Sequence[int | str], local: Mapping[int, str] | None = None) -> list[str]:
        """The names that `dims` have on their own (each one field or product, or the module's own width name)."""
        out = [n for n in (local or {}).values() if n]
        for d in dims:
            if isinstance(d, int) and not isinstance(d, bool):
                n = self._found(d, local)
                if n:
                    out.append(n)
        return out

    def dim(self, d: int | str, local: Mapping[int, str] | None = None, words: bool = True,
            near: Sequence[str] = ()) -> str:
        """`words=False` keeps symbols short: "B", not "B batch", and a size several fields equal bare."""
        if isinstance(d, str):
            word = (self.renames.get(d) or _SYMBOLS.get(d)) if words else None
            return f"{d} {word}" if word else d
        n = self.name(d, local, near)
        if n:
            return f"{d} {n}"
        some = self.choices(d, local) if self.candidates and words else None  # not in a picture's short labels
        return f"{d} ({some})" if some else str(d)

    def choices(self, d: int, local: Mapping[int, str] | None = None) -> str | None:
        """"a, b or c": the fields (products, halves) `d` equals where nothing decides between them (`ambiguous`),
        three at most named; None where fewer than two."""
        some = self.ambiguous(d, local)
        if len(some) < 2:
            return None
        shown = some if len(some) <= 3 else [*some[:2], f"{len(some) - 2} more"]
        return f"{', '.join(shown[:-1])} or {shown[-1]}"

    def left_bare(self, dims: Sequence[int | str], local: Mapping[int, str] | None = None,
                  near: Sequence[int | str] = ()) -> dict[int, str]:
        """The sizes of `dims` that `shape(..., words=False)` writes bare although several fields equal them: size
        -> `choices`, for a legend beside a picture whose labels stay short."""
        beside = self.names_near([*dims, *near], local)
        out: dict[int, str] = {}
        for d in dims:
            if isinstance(d, int) and not isinstance(d, bool) and self.name(d, local, beside) is None:
                some = self.choices(d, local)
                if some:
                    out[d] = some
        return out

    def shape(self, dims: Sequence[int | str], local: Mapping[int, str] | None = None, words: bool = True,
              near: Sequence[int | str] = ()) -> str:
        """`local`: the module's own width names (from the expression that built it) come first. A size several
        fields equal is named by the one whose fields name the shape's other dims, its module's widths, or `near`
        (the other dims of the module's calls): [B, T, 16384] beside [B, T, 4 hc_mult, 4096 hidden_size] reads
        16384 hc_mult × hidden_size."""
        beside = self.names_near([*dims, *near], local)
        out = [self.dim(d, local, words, beside) for d in dims]
        if len(out) > 1 and dims[-1] == 2 and out[-1] == "2" and out[-2].endswith("/2"):
            out[-1] = "2 pair"  # a half width's pairs: `x.view(..., -1, 2)` before rotary's complex form
        return "[" + ", ".join(out) + "]"


def width_names(m: Any, around: Sequence[Any]) -> dict[int, str]:
    """`m`'s own width names (the expression that built it), then those its neighbours' expressions give (`around`:
    its children and siblings) by the name most of them give: a norm beside `Linear(dim, q_lora_rank)` and
    `Linear(q_lora_rank, ...)` reads 1024 q_lora_rank even where o_lora_rank is 1024 too and a third sibling's
    parameter is 1024 = 2 × head_dim; neighbours naming one width two ways as often name it neither."""
    seen: dict[int, Counter[str]] = {}
    for x in around:
        for v, n in x.dims:
            if n:
                seen.setdefault(v, Counter())[n] += 1
    out: dict[int, str] = {}
    for v, names in seen.items():
        (top, k), *rest = names.most_common(2)
        if not rest or rest[0][1] < k:
            out[v] = top
    out.update(dict(m.dims))
    return out


def _pick(candidates: Sequence[str], near: Sequence[str]) -> str | None:
    """The one candidate (a field, or `a × b`) made only of fields named in `near`; None when none or several are."""
    fields = {f for n in near for f in n.split(" × ")}
    fit = [c for c in candidates if all(f in fields for f in c.split(" × "))]
    return fit[0] if len(fit) == 1 else None


def _rotary(candidates: Sequence[str], near: Sequence[str]) -> str | None:
    """A half or difference of fields (`_parts`) by the fields named near it, else by the one field of rotary
    position encoding among them (`qk_rope_head_dim/2`, `head_dim − qk_rope_head_dim`): the rotary split
    (rotate_half, a head laid out [nope | rope]) is where attention code halves or cuts a width. None when that
    decides nothing, a lone candidate included (a difference of two fields is often one by chance)."""
    if not candidates:
        return None
    fields = {f for n in near for f in n.split(" × ")}
    fit = [c for c in candidates if any(f in fields for f in re.split(r" − |/", c) if not f.isdigit())]
    fit = fit if len(fit) == 1 else [c for c in (fit or candidates) if _ROTARY.search(c)]
    return fit[0] if len(fit) == 1 else None


def dim_renames(record: Any) -> dict[str, str]:
    """The `[dims]` table of the names file the record was grouped with ({} without one)."""
    g = record.extra("grouping") if hasattr(record, "extra") else None
    raw = g.get("dims") if isinstance(g, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items() if isinstance(v, str) and v.strip()}


def named_dims(m: Any, config: Mapping[str, Any], renames: Mapping[str, str] | None = None) -> dict[int, str]:
    """Every int dim of a module's recorded calls that has a name: its own widths first, then the config's."""
    names = DimNames(config, renames)
    local = dict(m.dims)
    dims = list(local) + [d for c in m.calls for shape in (*c.inputs, *c.outputs) for d in shape if isinstance(d, int)]
    out: dict[int, str] = {}
    for d in dict.fromkeys(dims):
        n = names.name(d, local)
        if n:
            out[d] = n
    return out


__all__ = ["DimNames", "dim_renames", "named_dims", "width_names"]

"""Compact names: `layers.{0-60}.ffn.experts.{0-255}.w1.weight` for long lists of entries and names."""

from __future__ import annotations

import math
import re
from itertools import chain, repeat
from typing import Any, Iterable, Sequence

from archviz.format import ranges
from archviz.paths import collapse, compress_paths, compress_templates, fill, grouped, split_indices

from .templates import sibling_template, split_name

_DIGITS = re.compile(r"\d+")


def compress_names(names: Iterable[str]) -> list[str]:
    """Names that differ only in integer path components, written once with index ranges, in first-seen order
    (archviz.paths.compress_paths)."""
    return compress_paths(names)


class _AsEntry:
    """An entry's JSON read as the ``Entry`` it was written from (``compact_entry_list`` reads entries so)."""

    __slots__ = ("d",)

    def __init__(self, d: dict[str, Any]):
        self.d = d

    def __getattr__(self, name: str) -> Any:
        return self.d.get(name)

    def to_json(self) -> dict[str, Any]:
        return dict(self.d)


def compact_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Collapse entries that differ only in integer path components (layers, experts) into one with a count."""
    return compact_entry_list([_AsEntry(e) for e in entries])


def compact_entry_list(entries: Sequence[Any], split_names: bool = False,
                       positions: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """``compact_entries([e.to_json() for e in entries])`` for ``Entry`` objects, writing the JSON of one entry per
    group only. Entries made from one verdict share their note's text: its digit-blind form is worked out once.

    ``split_names``: the caller vouches that no name holds ``"{}"`` or a NUL character, so the names' splits
    (:func:`~archviz.checkpoint.templates.split_name`) stand for their templates: a direct entry's are read from its
    pair (compare split each name once, as it mapped it), and the rest of its key once per verdict it shares. With
    it, an entry may be a ``FamilyEntry`` (families.py: one verdict for many pairs) and ``positions`` gives each
    entry's place in the per-tensor order (a family's first)."""
    keyed: dict[tuple, list[tuple[Any, Any, Any, int]]] = {}
    blind: dict[str, str] = {}
    shared: dict[int, tuple] = {}  # id of a shared verdict → the key's fields beyond the names

    def fields(e: Any) -> tuple:
        note = e.note
        if note:
            nk = blind.get(note)
            if nk is None:
                nk = blind[note] = _DIGITS.sub("#", note)
        else:
            nk = None
        return (e.verdict, e.kind, e.model_elements, e.checkpoint_elements, nk, tuple(e.model_shape or ()),
                tuple(e.checkpoint_shape or ()), e.model_dtype or None, e.checkpoint_dtype or None,
                e.checkpoint_bytes)

    split = split_name if split_names else split_indices
    for k, e in enumerate(entries):
        pos = positions[k] if positions is not None else k
        ck = e.checkpoint
        members = e.members if split_names else None
        pair = e.pair if split_names else None
        if pair is not None:
            m, u, proto = pair
            rest = shared.get(id(proto))
            if rest is None:
                rest = shared[id(proto)] = fields(e)
            key = (m.template, u.template, len(ck)) + rest
            if members is not None:
                mt = cts = None
            else:
                mt = (m.template, m.nums)
                cts = [(u.template, u.nums)]
                if u.scales:
                    cts.extend(_scale_splits(u))
        else:
            cts = [split(c) for c in ck]
            mt = split(e.model) if e.model is not None else (cts[0] if ck else split(""))
            key = (mt[0], cts[0][0] if ck else None, len(ck)) + fields(e)
        group = keyed.get(key)
        if group is None:
            keyed[key] = [(e, mt, cts, pos)]
        else:
            group.append((e, mt, cts, pos))
    compress = _compress_splits if split_names else compress_templates
    out = []
    for group in keyed.values():
        first = group[0][0].to_json()
        families = [g for g in group if g[1] is None]
        count = len(group) + sum(len(g[0].members) - 1 for g in families)
        if count == 1:
            out.append(first)
            continue
        if families and len(group) == 1:
            models, cks = _family_names(group[0][0])
        else:
            flat = _instances(group) if families else group
            models = compress(mt for _, mt, _, _ in flat) if first["model"] is not None else []
            cks = compress(c for _, _, cts, _ in flat for c in cts)
        if first["model"] is not None:
            first["model"] = models[0] if len(models) == 1 else " | ".join(models)
        first["checkpoint"] = cks
        first["count"] = count
        out.append(first)
    return out


def _family_names(fam: Any) -> tuple[list[str], list[str]]:
    """(``_compress_splits`` of a family's model names, of its checkpoint names): the indices are collapsed once
    where they form a full product, and the model's and the checkpoint's are the same."""
    m_idx = [m.nums for _, m, _ in fam.members]
    c_idx = [u.nums for _, _, u in fam.members]
    m_template = fam.members[0][1].template
    c_templates = (fam.members[0][2].template, *fam.scale_templates)
    parts = _product_parts(c_idx) if c_idx[0] else None
    if parts is None:
        return (_compress_splits(zip(repeat(m_template), m_idx)),
                _compress_splits(chain.from_iterable(zip(repeat(t), c_idx) for t in c_templates)))
    cks = [fill(t, parts) for t in c_templates]
    if m_idx == c_idx:
        return [fill(m_template, parts)], cks
    return _compress_splits(zip(repeat(m_template), m_idx)), cks


def _product_parts(idx: list[tuple[str, ...]]) -> list[str] | None:
    """What ``fill`` fills a template with where the indices are a full product of canonical numerals (an index, or
    its ranges in braces: ``collapse``'s one pattern, worked out on the strings), or None."""
    k = len(idx[0])
    cols = [{t[i] for t in idx} for i in range(k)]
    if any(len(v) > 1 and v[0] == "0" for c in cols for v in c):
        return None
    if math.prod(len(c) for c in cols) != len(set(idx)):
        return None
    uniq = [sorted(map(int, c)) for c in cols]
    return [str(u[0]) if len(u) == 1 else "{" + ranges(u) + "}" for u in uniq]


def _instances(group: list[tuple[Any, Any, Any, int]]) -> list[tuple[Any, Any, Any, int]]:
    """A group's entries one per pair, family members spelled out, in the per-tensor order."""
    flat = []
    for e, mt, cts, pos in group:
        if mt is None:
            sts = e.scale_templates
            for p, m, u in e.members:
                flat.append((None, (m.template, m.nums), [(u.template, u.nums), *((st, u.nums) for st in sts)], p))
        else:
            flat.append((e, mt, cts, pos))
    flat.sort(key=lambda x: x[3])
    return flat


def _scale_splits(u: Any) -> list[tuple[str, tuple[str, ...]]]:
    """``split_name`` of each of a unit's scales, from its weight's where it can be (``sibling_template``)."""
    out = []
    for s in u.scales:
        t = sibling_template(u.info.name, u.template, s.name)
        out.append((t, u.nums) if t is not None else split_name(s.name))
    return out


def _compress_splits(splits: Iterable[tuple[str, tuple[str, ...]]]) -> list[str]:
    """``compress_templates`` of names given as their ``split_name``s (indices as numerals, a leading zero kept)."""
    out: list[str] = []
    for t, idx in grouped(splits).items():
        if not idx[0]:
            out.append(t)
            continue
        parts = _product_parts(idx)
        if parts is not None:  # a full product of canonical numerals, worked out on the strings
            out.append(fill(t, parts))
        elif any(n[0] == "0" and len(n) > 1 for nums in idx for n in nums):  # "007" is a name, not an index
            out.extend(compress_paths(fill(t, nums) for nums in idx))
        else:
            out.extend(collapse(t, [tuple(map(int, n)) for n in idx]))
    return out


def compact_checkpoint_only(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keyed: dict[tuple, list[dict[str, Any]]] = {}
    for c in items:
        key = (split_indices(c["name"])[0], c["kind"], c["dtype"], tuple(c["shape"]), c["explained"])
        keyed.setdefault(key, []).append(c)
    out = []
    for group in keyed.values():
        first = {k: v for k, v in group[0].items() if k != "scales"}
        if len(group) > 1:
            names = compress_names(c["name"] for c in group)
            first["name"] = names[0] if len(names) == 1 else " | ".join(names)
            first["count"] = len(group)
        out.append(first)
    return out

"""Compact names: `layers.{0-60}.ffn.experts.{0-255}.w1.weight` for long lists of entries and names."""

from __future__ import annotations

import math
import re
from itertools import chain, repeat
from typing import Any, Iterable, Sequence

from archviz.format import ranges

from .templates import HOLE, sibling_template, split_name

_DIGITS = re.compile(r"\d+")


def _template(name: str) -> tuple[str, tuple[int, ...]]:
    """("layers.{}.ffn.experts.{}.w1.weight", (3, 17)) for "layers.3.ffn.experts.17.w1.weight". A numeral with a
    leading zero ("01", "007") stays in the template as it is: read as an int it would be written back as another
    name ("1", "7")."""
    parts = name.split(".")
    nums = []
    for i, p in enumerate(parts):
        if p.isdigit() and p.isascii() and (p[0] != "0" or len(p) == 1):
            nums.append(int(p))
            parts[i] = "{}"
    return (".".join(parts), tuple(nums)) if nums else (name, ())


def _fill(template: str, parts: Sequence[str]) -> str:
    pieces = template.split("{}")
    out = [pieces[0]]
    for p, rest in zip(parts, pieces[1:]):
        out.append(p)
        out.append(rest)
    return "".join(out)


def _collapse_indices(template: str, idx: list[tuple[int, ...]]) -> list[str]:
    if len(idx) == 1:
        return [_fill(template, [str(x) for x in idx[0]])]
    k = len(idx[0])
    uniq = [sorted({t[i] for t in idx}) for i in range(k)]
    if math.prod(len(u) for u in uniq) == len(set(idx)):
        return [_fill(template, [str(u[0]) if len(u) == 1 else "{" + ranges(u) + "}" for u in uniq])]
    # not a full product: split on the first index and try again
    groups: dict[int, list[tuple[int, ...]]] = {}
    for t in idx:
        groups.setdefault(t[0], []).append(t)
    out = []
    for first, sub in groups.items():
        t1 = template.replace("{}", str(first), 1)
        out.extend(_collapse_indices(t1, [s[1:] for s in sub]) if k > 1 else [t1])
    return out


def compress_names(names: Iterable[str]) -> list[str]:
    """Names that differ only in integer path components, written once with index ranges, in first-seen order."""
    return _compress_templates(_template(n) for n in names)


def _grouped(splits: Iterable[tuple[str, tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    """Template → its names' indices, in first-seen order."""
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for t, nums in splits:
        groups.setdefault(t, []).append(nums)
    return groups


def _compress_templates(templates: Iterable[tuple[str, tuple[int, ...]]]) -> list[str]:
    """``compress_names`` of names given as their ``_template``s."""
    out: list[str] = []
    for t, idx in _grouped(templates).items():
        out.extend(_collapse_indices(t, idx) if idx[0] else [t])
    return out


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
                tuple(e.checkpoint_shape or ()), e.model_dtype or None, e.checkpoint_dtype or None)

    split = split_name if split_names else _template
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
    compress = _compress_splits if split_names else _compress_templates
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
    cks = [_fill(t.replace(HOLE, "{}"), parts) for t in c_templates]
    if m_idx == c_idx:
        return [_fill(m_template.replace(HOLE, "{}"), parts)], cks
    return _compress_splits(zip(repeat(m_template), m_idx)), cks


def _product_parts(idx: list[tuple[str, ...]]) -> list[str] | None:
    """What ``_full_product`` fills a template with (an index, or its ranges in braces), or None."""
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
    """``_compress_templates`` of names given as their ``split_name``s."""
    out: list[str] = []
    for t, idx in _grouped(splits).items():
        if not idx[0]:
            out.append(t)
            continue
        template = t.replace(HOLE, "{}")
        full = _full_product(template, idx)
        out.extend(full if full is not None else _collapse_indices(template, [tuple(map(int, n)) for n in idx]))
    return out


def _full_product(template: str, idx: list[tuple[str, ...]]) -> list[str] | None:
    """``_collapse_indices(template, idx as ints)`` where the indices are a full product of canonical numerals
    (no leading zero), worked out on the strings; ``None`` otherwise."""
    parts = _product_parts(idx)
    return None if parts is None else [_fill(template, parts)]


def compact_checkpoint_only(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keyed: dict[tuple, list[dict[str, Any]]] = {}
    for c in items:
        key = (_template(c["name"])[0], c["kind"], c["dtype"], tuple(c["shape"]), c["explained"])
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

"""Compact names: `layers.{0-60}.ffn.experts.{0-255}.w1.weight` for long lists of entries and names."""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Sequence

from archviz.format import ranges

_DIGITS = re.compile(r"\d+")


def _template(name: str) -> tuple[str, tuple[int, ...]]:
    """("layers.{}.ffn.experts.{}.w1.weight", (3, 17)) for "layers.3.ffn.experts.17.w1.weight"."""
    parts = name.split(".")
    nums = []
    for i, p in enumerate(parts):
        if p.isdigit() and p.isascii():
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


def _compress_templates(templates: Iterable[tuple[str, tuple[int, ...]]]) -> list[str]:
    """``compress_names`` of names given as their ``_template``s."""
    groups: dict[str, list[tuple[int, ...]]] = {}
    for t, nums in templates:
        groups.setdefault(t, []).append(nums)
    out: list[str] = []
    for t, idx in groups.items():
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


def compact_entry_list(entries: Sequence[Any]) -> list[dict[str, Any]]:
    """``compact_entries([e.to_json() for e in entries])`` for ``Entry`` objects, writing the JSON of one entry per
    group only. Entries made from one verdict share their note's text: its digit-blind form is worked out once."""
    keyed: dict[tuple, list[tuple[Any, tuple[str, tuple[int, ...]], list]]] = {}
    blind: dict[str, str] = {}
    for e in entries:
        ck = e.checkpoint
        cts = [_template(c) for c in ck]
        mt = _template(e.model) if e.model is not None else (cts[0] if ck else _template(""))
        note = e.note
        if note:
            nk = blind.get(note)
            if nk is None:
                nk = blind[note] = _DIGITS.sub("#", note)
        else:
            nk = None
        key = (mt[0], cts[0][0] if ck else None, len(ck), e.verdict, e.kind, e.model_elements, e.checkpoint_elements,
               nk, tuple(e.model_shape or ()), tuple(e.checkpoint_shape or ()), e.model_dtype or None,
               e.checkpoint_dtype or None)
        group = keyed.get(key)
        if group is None:
            keyed[key] = [(e, mt, cts)]
        else:
            group.append((e, mt, cts))
    out = []
    for group in keyed.values():
        first = group[0][0].to_json()
        if len(group) == 1:
            out.append(first)
            continue
        if first["model"] is not None:
            models = _compress_templates(mt for _, mt, _ in group)
            first["model"] = models[0] if len(models) == 1 else " | ".join(models)
        first["checkpoint"] = _compress_templates(c for _, _, cts in group for c in cts)
        first["count"] = len(group)
        out.append(first)
    return out


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

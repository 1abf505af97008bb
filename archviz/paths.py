"""Lists of module paths written compactly (`layers.{0..42}.ffn`) for the search index, and expanded back."""

from __future__ import annotations

import math
from typing import Sequence

from . import format as fmt


def _compress_rows(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Rows of one skeleton (same length, digits only where they differ) -> patterns with {ranges} segments."""
    rows = list(dict.fromkeys(rows))
    if len(rows) == 1:
        return rows
    n = len(rows[0])
    varying = [i for i in range(n) if len({r[i] for r in rows}) > 1]
    sets = [sorted({int(r[i]) for r in rows}) for i in varying]
    if math.prod(len(s) for s in sets) == len(rows):  # a full cartesian product: one pattern
        segs = list(rows[0])
        for i, s in zip(varying, sets):
            segs[i] = "{" + fmt.ranges(s) + "}"
        return [tuple(segs)]
    i = varying[0]
    by_value: dict[int, list[tuple[str, ...]]] = {}
    for r in rows:
        by_value.setdefault(int(r[i]), []).append(r)
    merged: dict[tuple, list[int]] = {}
    for v in sorted(by_value):
        sub = _compress_rows([r[:i] + ("#",) + r[i + 1:] for r in by_value[v]])
        merged.setdefault(tuple(sub), []).append(v)
    out: list[tuple[str, ...]] = []
    for sub, values in merged.items():
        label = "{" + fmt.ranges(values) + "}" if len(values) > 1 else str(values[0])
        out.extend(p[:i] + (label,) + p[i + 1:] for p in sub)
    return out


def compress_paths(paths: Sequence[str]) -> list[str]:
    """Module paths -> as few patterns as exactly cover them: ['layers.0.w', 'layers.1.w'] -> ['layers.{0-1}.w']."""
    groups: dict[tuple, list[tuple[str, ...]]] = {}
    for p in paths:
        segs = tuple(p.split(".")) if p else ("",)
        skeleton = tuple("#" if s.isdigit() else s for s in segs)
        groups.setdefault(skeleton, []).append(segs)
    out: list[str] = []
    for rows in groups.values():
        out.extend(".".join(r) for r in _compress_rows(rows))
    return out


def expand_pattern(pattern: str) -> list[str]:
    """The inverse of compress_paths for one pattern."""
    out = [""]
    for i, seg in enumerate(pattern.split(".")):
        opts = [str(v) for v in fmt.parse_ranges(seg[1:-1])] if seg.startswith("{") else [seg]
        out = [(f"{o}.{s}" if i else s) for o in out for s in opts]
    return out

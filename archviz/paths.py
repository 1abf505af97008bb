"""Lists of names written compactly (`layers.{0..42}.ffn`), and expanded back: the one path compressor, for the
search index, the diff and the checkpoint reports (archviz.checkpoint.compact, which splits names its own faster
way and collapses their indices here).

A name is split at its integer path components; a numeral with a leading zero ("007") is a name of its own, never
an index (read as an int it would be written back as another name, "7")."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from . import format as fmt

HOLE = "\x00"  # where an index was in a template; no module path or tensor name has it


def split_indices(name: str) -> tuple[str, tuple[int, ...]]:
    """("layers.\\0.ffn.experts.\\0.w1", (3, 17)) for "layers.3.ffn.experts.17.w1": the canonical numerals (ASCII
    digits, no leading zero) become holes."""
    parts = name.split(".")
    nums = []
    for i, p in enumerate(parts):
        if p.isdigit() and p.isascii() and (p[0] != "0" or len(p) == 1):
            nums.append(int(p))
            parts[i] = HOLE
    return (".".join(parts), tuple(nums)) if nums else (name, ())


def fill(template: str, parts: Sequence[str]) -> str:
    """`template` with its holes filled by `parts` in order (`split_indices`'s inverse, given the numerals)."""
    if not parts:
        return template
    pieces = template.split(HOLE)
    out = [pieces[0]]
    for p, rest in zip(parts, pieces[1:]):
        out.append(p)
        out.append(rest)
    return "".join(out)


def _collapse_rows(rows: list[tuple[int, ...]]) -> list[tuple[str, ...]]:
    """Index tuples of one template -> as few tuples of parts (an index, or {ranges}) as exactly cover them."""
    rows = list(dict.fromkeys(rows))
    if len(rows) == 1:
        return [tuple(map(str, rows[0]))]
    n = len(rows[0])
    varying = [i for i in range(n) if len({r[i] for r in rows}) > 1]
    sets = {i: sorted({r[i] for r in rows}) for i in varying}
    if math.prod(len(s) for s in sets.values()) == len(rows):  # a full cartesian product: one pattern
        return [tuple("{" + fmt.ranges(sets[i]) + "}" if i in sets else str(rows[0][i]) for i in range(n))]
    i = varying[0]  # not a product: split on the first varying index, and merge the values that read alike
    by_value: dict[int, list[tuple[int, ...]]] = {}
    for r in rows:
        by_value.setdefault(r[i], []).append(r[:i] + r[i + 1:])
    merged: dict[tuple, list[int]] = {}
    for v in sorted(by_value):
        merged.setdefault(tuple(_collapse_rows(by_value[v])), []).append(v)
    out: list[tuple[str, ...]] = []
    for sub, values in merged.items():
        label = "{" + fmt.ranges(values) + "}" if len(values) > 1 else str(values[0])
        out.extend(p[:i] + (label,) + p[i:] for p in sub)
    return out


def collapse(template: str, idx: Sequence[tuple[int, ...]]) -> list[str]:
    """The names `template` (holes: HOLE) stands for with the index tuples `idx`, as few patterns as exactly cover
    them: ("layers.\\0.w", [(0,), (1,), (2,), (5,)]) -> ["layers.{0-2,5}.w"]."""
    if not idx or not idx[0]:
        return [template]
    return [fill(template, parts) for parts in _collapse_rows(list(idx))]


def grouped(splits: Iterable[tuple[str, tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    """Template -> its names' indices, in first-seen order."""
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for t, nums in splits:
        groups.setdefault(t, []).append(nums)
    return groups


def compress_templates(splits: Iterable[tuple[str, tuple[int, ...]]]) -> list[str]:
    """`compress_paths` of names given as their `split_indices`, in first-seen order of their templates."""
    return [p for t, idx in grouped(splits).items() for p in collapse(t, idx)]


def compress_paths(paths: Iterable[str]) -> list[str]:
    """Names -> as few patterns as exactly cover them: ['layers.0.w', 'layers.1.w'] -> ['layers.{0-1}.w']."""
    return compress_templates(split_indices(p) for p in paths)


def expand_pattern(pattern: str) -> list[str]:
    """The inverse of compress_paths for one pattern."""
    out = [""]
    for i, seg in enumerate(pattern.split(".")):
        opts = [str(v) for v in fmt.parse_ranges(seg[1:-1])] if seg.startswith("{") else [seg]
        out = [(f"{o}.{s}" if i else s) for o in out for s in opts]
    return out


NAMES_PER_ENTRY = 1 << 16  # a pattern list standing for more names than this names none (bounded work)


def bounded_names(patterns: str) -> list[str]:
    """The names a compact list's entry stands for (its patterns expanded, `|` between them); none for an entry
    standing for more than `NAMES_PER_ENTRY` names, or whose ranges do not read (a records file is untrusted)."""
    parts = patterns.split(" | ")
    if sum(pattern_count(p) for p in parts) > NAMES_PER_ENTRY:
        return []
    try:
        return [n for p in parts for n in expand_pattern(p)]
    except ValueError:  # a range that does not read: that entry names nothing
        return []


def pattern_count(pattern: str) -> int:
    """How many names `pattern` stands for, counted without listing them (a records file is untrusted: a range
    `{0-99999999999}` must cost nothing); a huge number for a range that cannot be read."""
    n = 1
    for seg in pattern.split("."):
        if seg.startswith("{") and seg.endswith("}"):
            n *= _range_size(seg[1:-1].split(","))
    return n


def _range_size(parts: list[str]) -> int:
    total = 0
    for k, part in enumerate(parts):
        a, _, b = part.strip().partition("-")
        if part.strip() in ("…", "...") and 2 <= k < len(parts) - 1 and parts[k - 1].isdigit() \
                and parts[k - 2].isdigit() and parts[k + 1].isdigit():
            step = int(parts[k - 1]) - int(parts[k - 2])
            total += (int(parts[k + 1]) - int(parts[k - 1])) // step if step > 0 else NAMES_PER_ENTRY + 1
        elif a.isdigit() and (not b or b.isdigit()) and len(a) < 12 and len(b) < 12:
            total += (int(b) - int(a) + 1) if b else 1
        else:
            return NAMES_PER_ENTRY + 1
    return max(total, 1)

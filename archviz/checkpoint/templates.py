"""Digit-blind name templates: a tensor name split at its integer path components, each name split once.

``split_name("layers.3.ffn.experts.17.w1.weight")`` is ``("layers.\\0.ffn.experts.\\0.w1.weight", ("3", "17"))``.
A comparison splits the same 90,000 checkpoint names for choosing a ruleset, for renaming, for its scales' renames
and for the compact tensor list: the splits are memoised per name (the memo is bounded, and ``compare`` clears it
when it is done).
"""

from __future__ import annotations

__all__ = ["HOLE", "split_name", "clear"]

HOLE = "\x00"  # where an index was; no rename pattern or name has it

_MEMO: dict[str, tuple[str, tuple[str, ...]]] = {}
_MAX = 1 << 19


def split_name(name: str) -> tuple[str, tuple[str, ...]]:
    """(the name with each all-ASCII-digit dotted component replaced by :data:`HOLE`, those components)."""
    got = _MEMO.get(name)
    if got is not None:
        return got
    parts = name.split(".")
    nums = []
    for i, p in enumerate(parts):
        if p.isdigit() and p.isascii():
            nums.append(p)
            parts[i] = HOLE
    got = (".".join(parts), tuple(nums)) if nums else (name, ())
    if len(_MEMO) >= _MAX:
        _MEMO.clear()
    _MEMO[name] = got
    return got


def clear() -> None:
    """Forget the memoised splits."""
    _MEMO.clear()

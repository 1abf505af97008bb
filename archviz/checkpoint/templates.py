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
_HEADS: dict[str, tuple[str, tuple[str, ...]]] = {}  # module paths, split
_SHARED: dict[str, str] = {}  # one copy of each skeleton and index text (90,000 names have a few hundred)
_MAX = 1 << 19


def split_name(name: str, keep: bool = True) -> tuple[str, tuple[str, ...]]:
    """(the name with each all-ASCII-digit dotted component replaced by :data:`HOLE`, those components).
    ``keep=False``: a name that will not be asked for again (not memoised; its module's path still is)."""
    got = _MEMO.get(name)
    if got is not None:
        return got
    head, dot, last = name.rpartition(".")
    if dot:  # a module's tensors share its path: split the path once
        h = _HEADS.get(head)
        if h is None:
            if len(_HEADS) >= _MAX:
                clear()
            h = _HEADS[head] = _split(head)
        sk, nums = h
        if last.isdigit() and last.isascii():
            nums = nums + (_SHARED.setdefault(last, last),)
            last = HOLE
        if not nums:
            return name, ()
        skeleton = sk + "." + last
        got = (_SHARED.setdefault(skeleton, skeleton), nums)
    else:
        got = _split(name)
        if not got[1]:
            return name, ()
    if keep:
        if len(_MEMO) >= _MAX:
            clear()
        _MEMO[name] = got
    return got


def _split(name: str) -> tuple[str, tuple[str, ...]]:
    parts = name.split(".")
    nums = []
    shared = _SHARED
    for i, p in enumerate(parts):
        if p.isdigit() and p.isascii():
            nums.append(shared.setdefault(p, p))
            parts[i] = HOLE
    if not nums:
        return name, ()
    skeleton = ".".join(parts)
    return shared.setdefault(skeleton, skeleton), tuple(nums)


def clear() -> None:
    """Forget the memoised splits."""
    _MEMO.clear()
    _HEADS.clear()
    _SHARED.clear()

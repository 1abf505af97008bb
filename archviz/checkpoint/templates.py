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
_WALK, _LONG = 4, 256


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
            h = _head(head)
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


def _head(path: str) -> tuple[str, tuple[str, ...]]:
    """``_split(path)``, built from its parent's split (memoised, as are the ancestors walked to reach one that is):
    the experts of a layer share the layer's split. The walk up stops after :data:`_WALK` levels, and a path longer
    than :data:`_LONG` characters is split as it is, so the memo holds a few copies of a name at most."""
    chain = []  # (path, its last component), from the path up to an ancestor already split
    p = path
    base: tuple[str, tuple[str, ...]] | None = None
    while True:
        up, dot, last = p.rpartition(".")
        chain.append((p, last))
        if not dot:
            break
        base = _HEADS.get(up)
        if base is not None:
            break
        if len(chain) >= _WALK or len(path) > _LONG:
            got = _HEADS[path] = _split(path)
            return got
        p = up
    shared = _SHARED
    for p, last in reversed(chain):
        digit = last.isdigit() and last.isascii()
        if base is None:  # the first component
            got = (HOLE, (shared.setdefault(last, last),)) if digit else (p, ())
        else:
            sk, nums = base
            if digit:
                skeleton = sk + "." + HOLE
                got = (shared.setdefault(skeleton, skeleton), nums + (shared.setdefault(last, last),))
            elif nums:
                skeleton = sk + "." + last
                got = (shared.setdefault(skeleton, skeleton), nums)
            else:
                got = (p, ())
        base = _HEADS[p] = got
    return base  # type: ignore[return-value]


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

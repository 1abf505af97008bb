"""Digit-blind name templates: a tensor name split at its integer path components.

``split_name("layers.3.ffn.experts.17.w1.weight")`` is ``("layers.\\0.ffn.experts.\\0.w1.weight", ("3", "17"))``:
what ``rules.renamer`` renames once per template. (Memoising the splits per name or per module path, to share them
with the compact tensor lists, was measured: a dict insert per name costs what a second split saves.)
"""

from __future__ import annotations

__all__ = ["HOLE", "split_name"]

HOLE = "\x00"  # where an index was; no rename pattern or name has it


def split_name(name: str) -> tuple[str, tuple[str, ...]]:
    """(the name with each all-ASCII-digit dotted component replaced by :data:`HOLE`, those components)."""
    parts = name.split(".")
    nums = []
    for i, p in enumerate(parts):
        if p.isdigit() and p.isascii():
            nums.append(p)
            parts[i] = HOLE
    return (".".join(parts), tuple(nums)) if nums else (name, ())

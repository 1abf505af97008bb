"""Digit-blind name templates: a tensor name split at its integer path components.

``split_name("layers.3.ffn.experts.17.w1.weight")`` is ``("layers.\\0.ffn.experts.\\0.w1.weight", ("3", "17"))``:
what ``rules.renamer`` renames once per template. (Memoising the splits per name or per module path, to share them
with the compact tensor lists, was measured: a dict insert per name costs what a second split saves.)
"""

from __future__ import annotations

from archviz.paths import HOLE, fill  # where an index was (no rename pattern or name has it); split_name's inverse

__all__ = ["HOLE", "fill", "sibling_template", "split_name"]


def split_name(name: str) -> tuple[str, tuple[str, ...]]:
    """(the name with each all-ASCII-digit dotted component replaced by :data:`HOLE`, those components)."""
    parts = name.split(".")
    nums = []
    for i, p in enumerate(parts):
        if p.isdigit() and p.isascii():
            nums.append(p)
            parts[i] = HOLE
    return (".".join(parts), tuple(nums)) if nums else (name, ())


def sibling_template(name: str, template: str, sibling: str) -> str | None:
    """``split_name(sibling)[0]`` when ``sibling`` is ``name`` (split to ``template``) but for the last component
    and neither last component is an index (``…w1.weight`` / ``…w1.weight_scale_inv``): its indices are then
    ``name``'s. None otherwise."""
    head, dot, last = name.rpartition(".")
    if not dot or (last.isdigit() and last.isascii()):
        return None
    s_last = sibling[len(head) + 1:]
    if not (sibling.startswith(head) and sibling.startswith(".", len(head)) and s_last and "." not in s_last
            and not (s_last.isdigit() and s_last.isascii())):
        return None
    return template[: len(template) - len(last)] + s_last

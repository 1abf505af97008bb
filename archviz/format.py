"""Number and shape formatting shared by every renderer (pure functions, no torch)."""

from __future__ import annotations

from typing import Iterable


def count(n: int | None) -> str:
    """41943040 -> '41,943,040'; None -> '—'."""
    return "—" if n is None else f"{n:,}"


def human(n: int | None) -> str:
    """671026419200 -> '671.0B'."""
    if n is None:
        return "—"
    for unit, div in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(n) >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def nbytes(n: int) -> str:
    for unit, div in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n} B"


def shape(dims: Iterable[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def hidden_children(n: int) -> str:
    """The line a tree shows for children cut by its depth: "… 1 child", "… 3 children"."""
    return f"… {n} child" if n == 1 else f"… {n:,} children"

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


def ranges(values: Iterable[int]) -> str:
    """Sorted distinct ints, compactly: [0, 1, 2, 4] -> '0-2,4'; [3, 5, 7, ..., 41] -> '3,5,…,41' (a run of five or
    more with one step above 1: every other layer of an interleaved model). :func:`parse_ranges` reads it back."""
    vs = sorted(set(values))
    out: list[str] = []
    i, n = 0, len(vs)
    while i < n:
        j = i
        while j + 1 < n and vs[j + 1] == vs[j] + 1:
            j += 1
        if j > i:
            out.append(f"{vs[i]}-{vs[j]}")
            i = j + 1
            continue
        if i + 1 < n:
            step = vs[i + 1] - vs[i]
            j = i + 1
            while j + 1 < n and vs[j + 1] - vs[j] == step:
                j += 1
            if j - i >= 4:
                out.append(f"{vs[i]},{vs[i + 1]},…,{vs[j]}")
                i = j + 1
                continue
        out.append(str(vs[i]))
        i += 1
    return ",".join(out)


def ranges_text(values: Iterable[int]) -> str:
    """:func:`ranges` for prose: [0, 1, 2, 5] -> '0–2, 5'; every other layer -> '3, 5, …, 41'."""
    return ranges(values).replace("-", "–").replace(",", ", ")


def parse_ranges(text: str) -> list[int]:
    """The inverse of :func:`ranges`: '0-2,4' -> [0, 1, 2, 4]; '3,5,…,11' -> [3, 5, 7, 9, 11] (the step is set by
    the two numbers before the ellipsis). ValueError on anything else."""
    out: list[int] = []
    parts = text.split(",")
    k = 0
    while k < len(parts):
        part = parts[k].strip()
        if part in ("…", "..."):
            if len(out) < 2 or k < 2 or "-" in parts[k - 1] or "-" in parts[k - 2] or k + 1 >= len(parts):
                raise ValueError(f"an ellipsis needs two numbers before it and one after: {text!r}")
            step, end = out[-1] - out[-2], int(parts[k + 1])
            if step <= 0 or (end - out[-1]) % step or end <= out[-1]:
                raise ValueError(f"{end} does not continue {out[-2]}, {out[-1]}: {text!r}")
            out.extend(range(out[-1] + step, end + 1, step))
            k += 2
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
        k += 1
    return out

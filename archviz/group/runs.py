"""Runs and repeating patterns: a list's items as runs of one kind, and the longest tandem repeat of runs found
first, then recursively left and right ("2 groups of 6 layers")."""

from __future__ import annotations


def rle(kinds: list[int]) -> list[tuple[int, int, int]]:
    """(kind, start, count) runs."""
    out: list[tuple[int, int, int]] = []
    for i, k in enumerate(kinds):
        if out and out[-1][0] == k:
            kk, s, c = out[-1]
            out[-1] = (kk, s, c + 1)
        else:
            out.append((k, i, 1))
    return out


_MAX_PATTERN_TOKENS = 1024  # longer sequences of runs are left as runs: the search is quadratic in them


def decompose(tokens: list[tuple[int, int, int]], lo: int, hi: int) -> list[tuple]:
    """Segments of tokens[lo:hi]: ("run", token) or ("repeat", unit_segments, repeats, unit_items, first_item).

    The tandem repeat covering the most items is taken first (ties: the shortest unit, then a unit that starts with
    its smallest run, e.g. the one KV-source layer before the reusing ones, then the leftmost); the parts left and
    right of it are decomposed the same way. Token equality is (kind, count)."""
    n = hi - lo
    best = None
    if 4 <= n <= _MAX_PATTERN_TOKENS:
        keys = [(t[0], t[2]) for t in tokens[lo:hi]]
        prefix = [0]
        for _, c in keys:
            prefix.append(prefix[-1] + c)
        for p in range(2, n // 2 + 1):
            # run[i]: how many consecutive j >= i have keys[j] == keys[j + p]
            m = n - p
            run = [0] * (m + 1)
            for i in range(m - 1, -1, -1):
                run[i] = run[i + 1] + 1 if keys[i] == keys[i + p] else 0
            for s in range(0, m):
                if run[s] < p:
                    continue
                r = 1 + run[s] // p
                key = (-(r * (prefix[s + p] - prefix[s])), p, keys[s][1], s)
                if best is None or key < best[0]:
                    best = (key, s, p, r)
    if best is None:
        return [("run", t) for t in tokens[lo:hi]]
    _, s, p, r = best
    s += lo
    unit = decompose(tokens, s, s + p)
    unit_items = sum(t[2] for t in tokens[s:s + p])
    return (decompose(tokens, lo, s) + [("repeat", unit, r, unit_items, tokens[s][1], p)] +
            decompose(tokens, s + r * p, hi))

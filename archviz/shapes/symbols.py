"""Symbolic dims: B and T chosen to collide with no width of the model, and a shape's dims named B, T, B·T or R."""

from __future__ import annotations

import math

from ..records import ModelRecord
from .policy import ROUTED

_PRIMES_B = (7, 5, 11, 3, 13, 17)


# Small first; the larger ones are there for MoE models, whose routed count R = ceil(B·T·k/E) must clear the small
# ints the model's widths and config take (see choose_dims).
_PRIMES_T = (13, 11, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109,
             113, 127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181, 191, 193, 197, 199, 211, 223, 227, 229,
             233, 239, 241, 251)


def _taken(record: ModelRecord) -> set[int]:
    taken: set[int] = set()
    seen: set[int] = set()  # the walk shares one tuple of tensor records between repeated blocks: read each once
    for m in record.modules:
        if id(m.tensors) in seen:
            continue
        seen.add(id(m.tensors))
        for t in m.tensors:
            taken.update(int(d) for d in t.shape)
    for _, v in record.source.config:
        if isinstance(v, int) and not isinstance(v, bool):
            taken.add(v)
        elif isinstance(v, list):
            taken.update(x for x in v if isinstance(x, int) and not isinstance(x, bool))
    return taken


def choose_dims(record: ModelRecord, batch: int | None, seq: int | None,
                avoid: tuple[int, int] | None = None, routed: bool = True,
                differ: tuple[int, int] | None = None) -> tuple[int, int, bool]:
    """(B, T, clean): values that collide with no width of the model (tensor dims, config ints, routed token counts)
    when possible (`clean`), within the model's max_batch_size / max_seq_len; `avoid` excludes a pair already used.
    `routed=False` keeps T small rather than R apart (the probe, whose real pass costs tokens). `differ` (B, T)
    asks for another B and another T than those where the limits allow (the second pass, for names by evidence)."""
    taken = _taken(record)
    config = dict(record.source.config)
    max_b = config.get("max_batch_size") if isinstance(config.get("max_batch_size"), int) else None
    max_t = config.get("max_seq_len") if isinstance(config.get("max_seq_len"), int) else None
    moe = [(m.top_k or 1, m.experts or 1) for m in record.summary.moe]

    def r_not_b_t(b: int, t: int) -> bool:  # R = ceil(B·T·k/E) is none of B, T, B·T
        return all(math.ceil(b * t * k / e) not in (b, t, b * t) for k, e in moe)

    def ok(b: int, t: int) -> bool:
        return b != t and b not in taken and t not in taken and b * t not in taken and r_not_b_t(b, t)

    def routed_apart(b: int, t: int) -> bool:
        # R of at least 2 and equal to no width: with 256 experts and few tokens R is 1, and every size-1 dim (a
        # keepdim, an unsqueeze) would read as R.
        return all((r := math.ceil(b * t * k / e)) >= 2 and r not in taken for k, e in moe)

    def but_b(b: int, t: int) -> bool:  # every B the model allows is a width too: keep T, B·T and R apart
        return b != t and t not in taken and b * t not in taken and r_not_b_t(b, t) and routed_apart(b, t)

    if batch and seq:
        return batch, seq, ok(batch, seq)
    bs = [batch] if batch else [b for b in _PRIMES_B if not max_b or b <= max_b] + (
        list(range(max_b, 1, -1)) if max_b else [])
    ts = [seq] if seq else [t for t in _PRIMES_T if not max_t or t <= max_t]
    if differ is not None:
        bs = [b for b in bs if b != differ[0]] or bs
        ts = [t for t in ts if t != differ[1]] or ts
    bs = bs or [1]
    tiers = (((lambda b, t: ok(b, t) and routed_apart(b, t)), True), (ok, True), (but_b, False)) if routed else \
        ((ok, True),)
    for good, clean in tiers:
        for b in bs:
            for t in ts:
                if (b, t) != avoid and good(b, t):
                    return b, t, clean
    for b in bs:
        for t in ts:
            if (b, t) != avoid and b != t:
                return b, t, False
    return bs[0], ts[0], False


def name_dims(shape: tuple[int, ...], B: int, T: int, routed: set[int],
              used: frozenset[str] | set[str] = frozenset({"B", "T"}),
              named: dict[int, str] | None = None) -> tuple[int | str, ...]:
    """`shape` with the dims of size B, T, B·T, a dim the user named (`named`: size -> name) or a routed count
    named; only the symbols in `used` (those the pass's inputs were actually sized by) name anything: with every
    input given in ints, a 7x7 map stays 7."""
    out: list[int | str] = []
    b, t = "B" in used, "T" in used
    for d in shape:
        d = int(d)
        if named and d in named:
            out.append(named[d])
        elif b and t and d == B * T:
            out.append("B·T")
        elif b and d == B:
            out.append("B")
        elif t and d == T:
            out.append("T")
        elif d in routed:
            out.append(ROUTED)
        else:
            out.append(d)
    return tuple(out)

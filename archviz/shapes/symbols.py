"""Symbolic dims: B and T chosen to collide with no width of the model, and a shape's dims named B, T, B·T or R;
T a multiple of the model's compression ratios, windows and chunk sizes, above them, so every dim derived from T
(T/4, T/128, T+W) is positive at the pass's size (`trace_multiple`), and such a dim named by the expression that
holds at both passes' sizes (`derived`)."""

from __future__ import annotations

import math
import re
from typing import Any

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


# Config fields T is cut by: compression ratios, windows, chunks, attention block sizes (not nanoGPT's block_size,
# which is the longest T, nor a quantization block)
_DIVIDES_T = re.compile(r"(ratio|window|chunk|compress_rate|(attn|attention|kv|q|compress|sparse|index)_block_size)",
                        re.I)
_NOT_DIVIDING = re.compile(r"(rope|scaling|theta|quant|expert|head|max_|pattern|layer|freq|num_)", re.I)
MAX_MULTIPLE = 4096  # a multiple of more than this is not asked for (the pass would run at T above it)


def cuts(record: ModelRecord) -> tuple[int, ...]:
    """The config's compression ratios, windows and chunk sizes (in lists and dicts too, as transformers' DeepSeek-V4
    config has `compress_rates` {kind: ratio}; 0 and 1 left out), ascending."""
    sizes: set[int] = set()
    for k, v in record.source.config:
        if not _DIVIDES_T.search(k) or _NOT_DIVIDING.search(k):
            continue
        for x in (v if isinstance(v, (list, tuple)) else list(v.values()) if isinstance(v, dict) else [v]):
            if isinstance(x, int) and not isinstance(x, bool) and x > 1:
                sizes.add(x)
    return tuple(sorted(sizes))


def _stride(m: Any) -> int:
    """The stride a module cuts a time axis by: a 1-D convolution's (not a transposed one's, which grows it) or a
    torch 1-D pooling's; 1 for anything else."""
    attrs = dict(m.attributes)
    stride = attrs.get("stride")
    stride = stride[0] if isinstance(stride, (list, tuple)) and len(stride) == 1 else stride
    if not isinstance(stride, int) or isinstance(stride, bool) or stride < 2:
        return 1
    kernel = attrs.get("kernel_size")
    if isinstance(kernel, (list, tuple)) and len(kernel) == 1 and attrs.get("transposed") is False:
        return stride
    pooled = m.class_name.endswith("Pool1d") and m.class_module.startswith("torch.nn")
    return stride if pooled else 1


def strided_cuts(record: ModelRecord) -> tuple[int, ...]:
    """The running products of the strides of the model's strided 1-D convolutions and poolings, in the order the
    code made them: how much its front end has cut a waveform's or spectrogram's time axis after each (an audio
    codec's 2, 8, 40, 320 samples a frame), whatever its config calls the ratios; () where none is strided."""
    out, total = [], 1
    for m in record.modules:
        stride = _stride(m)
        if stride > 1:
            total *= stride
            out.append(total)
    return tuple(out)


def trace_multiple(record: ModelRecord) -> tuple[int, int]:
    """(m, floor): T should be a multiple of m above floor -- the least common multiple of the config's `cuts`
    and the model's `strided_cuts` (the axis after every strided layer is then T over their product, exactly, and
    at least 2, where one frame would read as a constant) and the largest of them; (1, 0) where there is none."""
    sizes = (*cuts(record), *strided_cuts(record))
    m = 1
    for x in sizes:
        m = math.lcm(m, x)
    if m > MAX_MULTIPLE:
        return 1, 0
    # above the smallest T too where the model's strides set m (a pool of 2 then a reshape pairing frames: T/4
    # of a T of 4 would read as a constant 1)
    return m, max(*sizes, _PRIMES_T[0] if strided_cuts(record) else 0, 0)


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
    if not seq and routed:  # the meta passes: every dim cut from T positive, and exact (T/4, not floor)
        mult, floor = trace_multiple(record)
        if mult > 1:
            ts = [t for t in range(mult * (floor // mult + 1), mult * (floor // mult + 1) + 48 * mult, mult)
                  if not max_t or t <= max_t] or ts
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


def derived(d: int, o: int, first: tuple[int, int], second: tuple[int, int], cuts: tuple[int, ...] = (),
            strided: tuple[int, ...] = ()) -> str:
    """A dim of size `d` at (B, T) = `first` that is `o` at `second`: the expression of B and T that gives both
    (T/4, 4·T, B·32, B·T/4, T+128, ceil(T/64), T+T/4, T/4+128, T+T/4+1, with `cuts` the config's ratios and
    windows tried for the last four), else T/8+4 for `strided` the model's `strided_cuts` (a strided layer's padded
    input), or, where none does, its size with the sizes named ("96 at B = 7, T = 384")."""
    (b1, t1), (b2, t2) = first, second
    forms: list[tuple[str, Any]] = []
    if d and t1 % d == 0 and t1 // d > 1:
        forms.append((f"T/{t1 // d}", lambda b, t, r=t1 // d: t / r))
    if d % t1 == 0 and d // t1 > 1:
        forms.append((f"{d // t1}·T", lambda b, t, c=d // t1: c * t))
    if d % b1 == 0 and d // b1 > 1:
        forms.append((f"B·{d // b1}", lambda b, t, c=d // b1: c * b))
    if d and (b1 * t1) % d == 0 and b1 * t1 // d > 1:
        forms.append((f"B·T/{b1 * t1 // d}", lambda b, t, r=b1 * t1 // d: b * t / r))
    if d % (b1 * t1) == 0 and d // (b1 * t1) > 1:
        forms.append((f"{d // (b1 * t1)}·B·T", lambda b, t, c=d // (b1 * t1): c * b * t))
    if d != t1:
        c = d - t1
        forms.append((f"T{'+' if c > 0 else '-'}{abs(c)}", lambda b, t, c=c: t + c))
    for r in sorted(set(cuts) | {2 ** k for k in range(1, 13)}):
        if r > 1:
            forms.append((f"ceil(T/{r})", lambda b, t, r=r: -(-t // r)))
            forms.append((f"T/{r}", lambda b, t, r=r: t // r))  # floor: a pooling or reshape at an odd T
            forms.append((f"T+T/{r}", lambda b, t, r=r: t + t / r))
            c, c2 = d - t1 // r, d - t1 - t1 // r
            if c and r in cuts:  # two unknowns fit any line through two points: only the config's own ratios
                forms.append((f"T/{r}{'+' if c > 0 else '-'}{abs(c)}", lambda b, t, r=r, c=c: t // r + c))
            if c2 and r in cuts:
                forms.append((f"T+T/{r}{'+' if c2 > 0 else '-'}{abs(c2)}", lambda b, t, r=r, c=c2: t + t // r + c))
    for r in strided:  # last: any line through two points fits, and the forms above are the code's plainer ones
        c = d - t1 // r
        if c:
            forms.append((f"T/{r}{'+' if c > 0 else '-'}{abs(c)}", lambda b, t, r=r, c=c: t // r + c))
    for text, f in forms:
        if f(b1, t1) == d and f(b2, t2) == o:
            return text
    return f"{d} at B = {b1}, T = {t1}"


_EXPRESSION = re.compile(r"^[BT0-9+\-·/() ceil]+$")


def evaluate(dim: int | str, B: int, T: int) -> int | None:
    """A dim's size at (B, T): an int as it is; B, T, B·T and an expression of `derived` (T/4, ceil(T/64), B·32,
    T+128) computed, with / as the code's // at sizes that do not divide; None for any other symbol (R, a user's
    dim, "96 at B = 7, T = 384")."""
    if isinstance(dim, int):
        return dim
    if not _EXPRESSION.match(dim) or " at " in dim:
        return None
    text = re.sub(r"ceil\(T/(\d+)\)", r"(-(-T#\1))", dim.replace("·", "*")).replace("/", "//").replace("#", "//")
    if "ceil" in text:
        return None
    try:
        return int(eval(text, {"__builtins__": {}}, {"B": B, "T": T}))  # noqa: S307 - digits, B, T, + - * // ( )
    except (SyntaxError, ZeroDivisionError, NameError, TypeError):
        return None

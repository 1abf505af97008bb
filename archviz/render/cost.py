"""Terminal tables of `archviz cost` (rich): pure functions of cost reports (archviz.cost.report), no torch.

Every text that comes from the model (paths, kinds, notes) is shown with its control characters escaped: a model's
code or config may hold any bytes, and a terminal would act on an escape sequence."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from .text import Labelled

from .. import format as fmt
from ..cost.report import kv_dtype_text, weights_dtype_text
from ..files.sanitize import printable
from .fit import NUMBER, PATH, TEXT, Column, FitTable
from ..errors import option


def safe(text: Any) -> str:
    """`text` with control and format characters escaped (\\x1b, \\u202e), so that a terminal shows them."""
    return printable(text)


def flops(n: float | None) -> str:
    """FLOPs in SI units: 9.46e12 -> '9.46 TFLOP'."""
    if n is None:
        return "—"
    for unit, div in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("KFLOP", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n:.0f} FLOP"


def nbytes(n: float | None) -> str:
    if n is None:
        return "—"
    if n and n < 1024 and n != int(n):
        return f"{n:.2f} B"
    return fmt.nbytes(int(round(n)))


def tokens(n: int) -> str:
    """1048576 -> '1M' (binary multiples as context takes them), else with separators."""
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n:,}"


def _split(p: Any) -> str:
    if not p.flops:
        return "—"
    return f"attention {p.attention / p.flops:.0%} · MLP {p.mlp / p.flops:.0%} · other {p.other / p.flops:.0%}"


def a_unit(unit: str) -> str:
    """'a token', 'an image', 'an audio window'."""
    return f"{'an' if unit[:1] in 'aeiou' else 'a'} {unit}"


def cost_tables(r: Any) -> Group:
    """One model: totals, per layer kind and module, KV cache per kind, memory, and what could not be counted."""
    parts: list[Any] = []
    title = f"{r.name} · cost at B={r.batch}, " + (f"prefill T={r.seq:,}, context L={tokens(r.context)}"
                                                   if r.unit == "token" else
                                                   f"one pass over {r.inputs} (per {r.unit})")
    head = FitTable(Column("what", NUMBER, style="bold"), Column("value", NUMBER, justify="right"),
                    Column("", style="dim"),
                    title=Text(safe(title)), show_header=False)
    p, d = r.prefill, r.decode
    if r.config_said:
        head.add_row("config", "", safe(r.config_said))
    head.add_row("prefill FLOPs", fmt.count(p.flops), f"{flops(p.flops)} · {flops(p.per_token)} {a_unit(r.unit)}")
    head.add_row("  split", "", _split(p))
    if p.attended_flops is not None and p.attended_flops != p.flops:
        head.add_row("  attended", fmt.count(p.attended_flops), "over the positions the masks keep")
    if d is not None:
        head.add_row(f"decode FLOPs at L={tokens(r.context)}", fmt.count(d.flops),
                     f"{flops(d.flops)} for {r.batch} new token{'s' if r.batch > 1 else ''}")
        head.add_row("  split", "", _split(d))
        if d.attended_flops is not None and d.attended_flops != d.flops:
            head.add_row("  attended", fmt.count(d.attended_flops), "over the positions the masks keep")
        if r.reprojection is not None:
            head.add_row("  cache read as latents ≥", fmt.count(r.decode_absorbed),
                         f"{flops(r.decode_absorbed)}: the weights absorbed, not re-run over the cache (note below)")
    kv = r.kv
    dt = kv_dtype_text(r, option("kv-dtype"))
    if kv.source is None:
        head.add_row("KV cache", "—", "no cache found (reference models: buffers; transformers: DynamicCache)")
    else:
        head.add_row("KV cache per token", nbytes(kv.per_token), safe(dt))
        head.add_row(f"KV cache at B={r.batch}, L={tokens(r.context)}", nbytes(kv.at_context),
                     f"of which {nbytes(kv.fixed)} fixed (windows, states)" if kv.fixed else "")
    m = r.memory
    head.add_row("weights", nbytes(m.weights), safe(weights_dtype_text(r, nbytes)))
    head.add_row("activation peak", nbytes(m.activation_peak), f"one prefill chunk of {r.seq:,} tokens"
                 if r.unit == "token" else f"one pass of {r.batch} {r.unit}{'s' if r.batch > 1 else ''}")
    head.add_row("serving memory", nbytes(m.serving), "weights + KV + activation peak")
    tr = dict(m.training)
    head.add_row("training memory", nbytes(tr.get("total")), "weights + gradients + 12 B/param of Adam state")
    parts.append(head)

    t = FitTable(Column("module", PATH), Column("kind", style="dim", drop=1), Column("×", NUMBER, justify="right"),
                 Column("prefill FLOPs", NUMBER, justify="right"),
                 Column("decode FLOPs", NUMBER, justify="right", drop=2), title="per layer kind and module")
    dec = {x.path: x.flops for x in d.modules} if d is not None else {}
    for x in p.modules:
        indent = "  " if any(x.path.startswith(y.path + ".") for y in p.modules) else ""
        t.add_row(Text(safe(indent + x.path)), Text(safe(x.kind)), str(x.count), fmt.count(x.flops),
                  fmt.count(dec.get(x.path)) if d is not None else "—")
    parts.append(t)

    if kv.by_kind:
        k = FitTable(Column("layer kind"), Column("layers", NUMBER, justify="right"),
                     Column("per token", NUMBER, justify="right"),
                     Column(f"at B={r.batch}, L={tokens(r.context)}", NUMBER, justify="right"),
                     title=Text(safe(f"KV cache ({kv.source})")))
        for e in kv.by_kind:
            k.add_row(Text(safe(e.kind)), str(e.layers), nbytes(e.per_token), nbytes(e.at_context))
        parts.append(k)
        held = {}
        for e in kv.entries:
            held.setdefault((e.name.rsplit(".", 1)[-1], e.dtype, e.what), 0)
            held[(e.name.rsplit(".", 1)[-1], e.dtype, e.what)] += 1
        parts.append(Labelled("holds: ", "; ".join(f"{n} ({dt}, {w}) × {c}" for (n, dt, w), c in held.items()),
                              "dim"))
    for line in unknown_lines(("prefill", p), ("decode", d)):
        parts.append(Text(safe(line), style="yellow"))
    for pc in (p, d):
        if pc is None:
            continue
        for note in pc.notes:
            parts.append(Labelled(f"note ({'decode' if pc.start else 'prefill'}): ", note, "dim"))
    if r.reprojection is not None:
        parts.append(Labelled("note: ", reprojection_note(r).removeprefix("note: "), "yellow"))
    for note in r.notes:
        parts.append(Labelled("note: ", note, "dim"))
    parts.append(Labelled("training: ", tr.get("formula", ""), "dim"))
    return Group(*parts)


def unknown_lines(*passes: tuple[str, Any]) -> list[str]:
    """One line per reason for unknown FLOPs (a kernel with no formula, met in every layer), over the (name, pass)
    pairs: the calls it was met in, the modules (the first and last when many) and the passes."""
    reasons: dict[str, tuple[dict[str, None], dict[str, None], int]] = {}
    for name, pc in passes:
        if pc is None:
            continue
        calls = dict(getattr(pc, "unknown_calls", ()) or ())
        for path, whys in pc.unknown:
            for why in whys:
                paths, kinds, _ = reasons.setdefault(why, ({}, {}, 0))
                paths[path or "(model)"] = None
                kinds[name] = None
        for why, n in calls.items():
            if why in reasons:
                paths, kinds, total = reasons[why]
                reasons[why] = (paths, kinds, total + n)
    out = []
    for why, (paths, kinds, n) in reasons.items():
        names = list(paths)
        where = ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]} … {names[-1]}"
        said = f"{n:,} call{'s' if n != 1 else ''} in " if n else ""
        out.append(f"FLOPs unknown ({' and '.join(kinds)}): {why} — {said}{len(names)} module"
                   f"{'s' if len(names) != 1 else ''} ({where})")
    return out


def reprojection_note(r: Any) -> str:
    """What the code's decode step does that a form reading the cache as latents does not, with both figures."""
    x, d = r.reprojection, r.decode
    where = ", ".join(x.paths[:2]) + (f" and {len(x.paths) - 2} more" if len(x.paths) > 2 else "")
    return (f"note: this code's decode step runs {where} over all {x.positions:,} positions (the cache and the new "
            f"token) again: {flops(x.flops)}, {x.flops / d.flops:.0%} of its {flops(d.flops)}; it expands the cache's "
            "latents every step. A form that absorbs those weights into the query and the output (as MLA's inference "
            f"code does) runs them for the new token alone: a step of at least {flops(r.decode_absorbed)} (its dot "
            "products over the latents are wider than the code's per-head ones, and not counted here).")


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "—"
    if not a:
        return "—" if not b else "∞"
    return f"{b / a:.3g}×"


def compare_table(a: Any, b: Any) -> FitTable:
    """Two models side by side, with B/A."""
    t = FitTable(Column(""), Column(safe(a.name), NUMBER, justify="right"), Column(safe(b.name), NUMBER, justify="right"),
                 Column("B / A", NUMBER, justify="right", drop=1),
                 title=Text(safe(f"cost at B={a.batch}, prefill T={a.seq:,}, context L={tokens(a.context)}")))
    rows = [
        ("prefill FLOPs", a.prefill.flops, b.prefill.flops, flops),
        ("prefill FLOPs a token", a.prefill.per_token, b.prefill.per_token, flops),
        ("decode FLOPs", a.decode.flops if a.decode else None, b.decode.flops if b.decode else None, flops),
        ("  attention", a.decode.attention if a.decode else None, b.decode.attention if b.decode else None, flops),
        ("KV cache per token", a.kv.per_token, b.kv.per_token, nbytes),
        (f"KV cache at L={tokens(a.context)}", a.kv.at_context, b.kv.at_context, nbytes),
        ("weights", a.memory.weights, b.memory.weights, nbytes),
        ("activation peak", a.memory.activation_peak, b.memory.activation_peak, nbytes),
        ("serving memory", a.memory.serving, b.memory.serving, nbytes),
        ("training memory", dict(a.memory.training).get("total"), dict(b.memory.training).get("total"), nbytes),
    ]
    for label, x, y, f in rows:
        t.add_row(label, f(x), f(y), _ratio(x, y))
    return t


def seconds(t: float | None) -> str:
    """A time in s, ms or µs, 3 significant digits."""
    if t is None:
        return "—"
    if t == float("inf"):
        return "∞"
    for unit, div in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if t >= div or unit == "ns":
            return f"{t / div:.3g} {unit}"
    return f"{t:.3g} s"


def rate(x: float | None) -> str:
    return "—" if x is None else f"{x:,.3g}" if x < 1000 else f"{x:,.0f}"


def bounds_table(bounds: list[Any]) -> Group:
    """`archviz cost` with hardware: per device, the decode step's and prefill's lower bounds on time, each term, which
    binds, tokens per second, and whether the model fits (bounds: archviz.cost.bounds.HardwareBound)."""
    b0 = bounds[0]
    title = (f"lower bounds at B={b0.batch}, context L={tokens(b0.context)}, prefill T={b0.seq:,} "
             f"on {b0.gpus} GPU{'s' if b0.gpus > 1 else ''}")
    t = FitTable(Column(""), *(Column(safe(b.hardware.key), TEXT, justify="right", drop=len(bounds) - i if i else 0)
                               for i, b in enumerate(bounds)), title=Text(safe(title)))  # the last device goes first
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, f: Any) -> None:
        rows.append((label, [f(b) for b in bounds]))

    row("peak used", lambda b: f"{b.compute_dtype} {flops(b.peak)}/s" if b.peak else "none published")
    row("memory bandwidth", lambda b: f"{b.hardware.bandwidth / 1e12:.3g} TB/s")
    d = [b for b in bounds if b.decode is not None]
    if d:
        row("decode: weights read", lambda b: nbytes(b.decode.weights) if b.decode else "—")
        if b0.decode_weights is not None and b0.decode_weights.experts:
            row("  of which routed experts", lambda b: nbytes(b.decode_weights.experts_read) if b.decode else "—")
        row(f"  KV cache read at L={tokens(b0.context)}", lambda b: nbytes(b.decode.kv) if b.decode else "—")
        row("  FLOPs", lambda b: f"{flops(b.decode.flops)} {b.decode.flops_kind}" if b.decode else "—")
        for label, i in (("  memory term", "t_memory"), ("  compute term", "t_compute"),
                         ("  interconnect term", "t_interconnect")):
            row(label, lambda b, i=i: seconds(getattr(b.decode, i)) if b.decode else "—")
        row("decode step ≥", lambda b: seconds(b.decode.time) if b.decode else "—")
        row("  binds", lambda b: b.decode.binds if b.decode else "—")
        row("tokens/s a sequence ≤", lambda b: rate(b.tokens_per_s_sequence))
        row(f"tokens/s in all (B={b0.batch}) ≤", lambda b: rate(b.tokens_per_s))
    row(f"prefill of {b0.batch}×{b0.seq:,} ≥", lambda b: seconds(b.prefill.time))
    row("  binds", lambda b: b.prefill.binds)
    row("serving memory", lambda b: nbytes(b.fit.serving))
    row(f"fits in {b0.gpus} GPU{'s' if b0.gpus > 1 else ''}", lambda b: (
        f"yes ({nbytes(b.fit.capacity)})" if b.fit.fits else f"no ({nbytes(b.fit.capacity)})"))
    row("fewest GPUs that hold it", lambda b: str(b.fit.min_gpus))
    for label, values in rows:
        t.add_row(label, *values)
    parts: list[Any] = [t]
    dw = b0.decode_weights
    if dw is not None and dw.experts:
        e = dw.experts[0]
        more = f" (and {len(dw.experts) - 1} more collections alike)" if len(dw.experts) > 1 else ""
        parts.append(Text(safe(
            f"routed experts: a collection of E = {e.experts} with top-{e.top_k} reads the experts B = {dw.tokens} "
            f"tokens touch, E·(1 − (1 − k/E)^B) = {e.touched:.4g} expected under uniform routing ({e.path}{more})"),
            style="dim"))
    if dw is not None and dw.embedding_bytes:
        parts.append(Text(safe(f"input embedding {dw.embedding_path}: {dw.tokens} row{'s' if dw.tokens > 1 else ''} read, "
                               f"{nbytes(dw.embedding_read)} of {nbytes(dw.embedding_bytes)}"), style="dim"))
    if b0.decode is not None:
        for c in b0.decode.comm:
            parts.append(Text(safe(f"{c.what} per decode step: {c.count} collectives, {nbytes(c.bytes)} a GPU sends: "
                                   f"{c.formula}"), style="dim"))
    kinds = {b.decode.flops_kind for b in bounds if b.decode is not None} | {b.prefill.flops_kind for b in bounds}
    parts.append(Text(safe(
        "a bound: the step cannot be faster than its largest term (bytes / memory bandwidth, FLOPs / dense peak at "
        "the weights' dtype, bytes sent / interconnect), latencies and overheads left out; FLOPs "
        + " and ".join(sorted(kinds))
        + ("" if kinds == {"attended"} else " (the code's, masked positions included)")), style="dim"))
    for b in bounds:
        for note in b.notes:
            parts.append(Labelled("note: ", note, "dim"))
        parts.append(Text(safe(f"{b.hardware.key}: {b.hardware.name} · {b.hardware.source}"), style="dim"))
    return Group(*parts)

"""Terminal tables of `archviz cost` (rich): pure functions of cost reports (archviz.cost.report), no torch.

Every text that comes from the model (paths, kinds, notes) is shown with its control characters escaped: a model's
code or config may hold any bytes, and a terminal would act on an escape sequence."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .. import format as fmt
from ..sanitize import printable


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
    """1048576 -> '1M' (binary multiples as --context takes them), else with separators."""
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n:,}"


def _split(p: Any) -> str:
    if not p.flops:
        return "—"
    return f"attention {p.attention / p.flops:.0%} · MLP {p.mlp / p.flops:.0%} · other {p.other / p.flops:.0%}"


def cost_tables(r: Any) -> Group:
    """One model: totals, per layer kind and module, KV cache per kind, memory, and what could not be counted."""
    parts: list[Any] = []
    title = f"{r.name} · cost at B={r.batch}, prefill T={r.seq:,}, context L={tokens(r.context)}"
    head = Table(title=Text(safe(title)), show_header=False, title_justify="left")
    head.add_column("what", style="bold")
    head.add_column("value", justify="right")
    head.add_column("", style="dim")
    p, d = r.prefill, r.decode
    head.add_row("prefill FLOPs", fmt.count(p.flops), f"{flops(p.flops)} · {flops(p.per_token)} a token")
    head.add_row("  split", "", _split(p))
    if d is not None:
        head.add_row(f"decode FLOPs at L={tokens(r.context)}", fmt.count(d.flops),
                     f"{flops(d.flops)} for {r.batch} new token{'s' if r.batch > 1 else ''}")
        head.add_row("  split", "", _split(d))
    kv = r.kv
    dt = f"in {kv.asked} (--kv-dtype)" if kv.asked else ("in " + ", ".join(kv.dtypes) if kv.dtypes else "")
    if kv.source is None:
        head.add_row("KV cache", "—", "no cache found (reference models: buffers; transformers: DynamicCache)")
    else:
        head.add_row("KV cache per token", nbytes(kv.per_token), safe(dt))
        head.add_row(f"KV cache at B={r.batch}, L={tokens(r.context)}", nbytes(kv.at_context),
                     f"of which {nbytes(kv.fixed)} fixed (windows, states)" if kv.fixed else "")
    m = r.memory
    head.add_row("weights", nbytes(m.weights), safe(" · ".join(f"{k} {nbytes(v)}" for k, v in m.weights_by_dtype)))
    head.add_row("activation peak", nbytes(m.activation_peak), f"one prefill chunk of {r.seq:,} tokens")
    head.add_row("serving memory", nbytes(m.serving), "weights + KV + activation peak")
    tr = dict(m.training)
    head.add_row("training memory", nbytes(tr.get("total")), "weights + gradients + 12 B/param of Adam state")
    parts.append(head)

    t = Table(title="per layer kind and module", title_justify="left")
    t.add_column("module")
    t.add_column("kind", style="dim")
    t.add_column("×", justify="right")
    t.add_column("prefill FLOPs", justify="right")
    t.add_column("decode FLOPs", justify="right")
    dec = {x.path: x.flops for x in d.modules} if d is not None else {}
    for x in p.modules:
        indent = "  " if any(x.path.startswith(y.path + ".") for y in p.modules) else ""
        t.add_row(Text(safe(indent + x.path)), Text(safe(x.kind)), str(x.count), fmt.count(x.flops),
                  fmt.count(dec.get(x.path)) if d is not None else "—")
    parts.append(t)

    if kv.by_kind:
        k = Table(title=Text(safe(f"KV cache ({kv.source})")), title_justify="left")
        k.add_column("layer kind")
        k.add_column("layers", justify="right")
        k.add_column("per token", justify="right")
        k.add_column(f"at B={r.batch}, L={tokens(r.context)}", justify="right")
        for e in kv.by_kind:
            k.add_row(Text(safe(e.kind)), str(e.layers), nbytes(e.per_token), nbytes(e.at_context))
        parts.append(k)
        held = {}
        for e in kv.entries:
            held.setdefault((e.name.rsplit(".", 1)[-1], e.dtype, e.what), 0)
            held[(e.name.rsplit(".", 1)[-1], e.dtype, e.what)] += 1
        parts.append(Text(safe("holds: " + "; ".join(f"{n} ({dt}, {w}) × {c}" for (n, dt, w), c in held.items())),
                          style="dim"))
    for pc in (p, d):
        if pc is None:
            continue
        for path, why in pc.unknown:
            parts.append(Text(safe(f"FLOPs unknown in {path or '(model)'} ({'decode' if pc.start else 'prefill'}): "
                                   f"{'; '.join(why)}"), style="yellow"))
        for note in pc.notes:
            parts.append(Text(safe(f"note ({'decode' if pc.start else 'prefill'}): {note}"), style="dim"))
    for note in r.notes:
        parts.append(Text(safe(f"note: {note}"), style="dim"))
    parts.append(Text(safe(f"training: {tr.get('formula', '')}"), style="dim"))
    return Group(*parts)


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "—"
    if not a:
        return "—" if not b else "∞"
    return f"{b / a:.3g}×"


def compare_table(a: Any, b: Any) -> Table:
    """Two models side by side, with B/A."""
    t = Table(title=Text(safe(f"cost at B={a.batch}, prefill T={a.seq:,}, context L={tokens(a.context)}")),
              title_justify="left")
    t.add_column("")
    t.add_column(Text(safe(a.name)), justify="right")
    t.add_column(Text(safe(b.name)), justify="right")
    t.add_column("B / A", justify="right")
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

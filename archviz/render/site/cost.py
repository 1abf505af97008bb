"""The site's cost figures, from the records' cost extra (`archviz build` with cost, or records of `archviz cost -o`):
the overview's section (decode FLOPs per token and KV-cache bytes against context length as inline SVG,
with a table of the same values; prefill at (B, T), the attention/MLP split, weights, KV and serving memory as
`archviz cost` prints them) and each node page's FLOPs per call × its multiplicity. Pure: no torch; the charts'
geometry is computed here and drawn by templates/svg.html."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from ... import format as fmt
from ...cost.bounds import site_devices, tokens_per_s_curve
from ...cost.curve import STANDARD, CurvePoint, curve_points
from ...cost.per_node import CostIndex
from ...cost.report import cost_report, kv_dtype_text, weights_dtype_text
from ..cost import a_unit, flops as flops_text, nbytes as bytes_text, rate as rate_text, reprojection_note, \
    tokens as tokens_text
from .nodes import Node, instances, mult_text

# the chart's box (viewBox units) and its plot area
W, H = 480, 280
X0, X1, Y0, Y1 = 84, 456, 16, 228


def _absorbed(r: Any) -> list[tuple[str, str, str, str, str]]:
    """The overview's row of the decode step with the cache read as latents, where the code re-projects it."""
    if r.reprojection is None:
        return []
    return [("  cache read as latents ≥", "the re-projected weights absorbed", fmt.count(r.decode_absorbed),
             flops_text(r.decode_absorbed), "cost-decode-absorbed")]


class SiteCost:
    """One model's cost figures for its pages; `enabled` is False for records without the cost extra."""

    def __init__(self, record: Any):
        self.record = record
        self.index = CostIndex(record)
        self.enabled = self.index.prefill is not None

    # --- node pages

    def node(self, n: Node) -> dict[str, Any] | None:
        """Prefill and decode FLOPs per call of the node's subtree, × the node's multiplicity."""
        if not self.enabled or n.virtual:
            return None
        count = instances(n)
        d = self.index.node(n.representative, n.paths, count)
        if d is None:
            return None
        mult = mult_text(n.multiplicity)
        rows = []
        for key, label in (("prefill", f"prefill at B = {d['B']}, T = {d['T']:,}"),
                           ("decode", f"decode of one token at L = {tokens_text(d['context'] or 0)}")):
            x = d.get(key)
            if x is None:
                continue
            row: dict[str, Any] = {"key": key, "label": label, "known": not x["unknown"], "called": x["called"],
                                   "per_call": fmt.count(x["per_call"]) if x["per_call"] is not None else None,
                                   "per_call_human": flops_text(x["per_call"]), "mult": mult,
                                   "times": fmt.count(x["times"]) if x["times"] is not None else None,
                                   "calls": x["calls"], "over_pass": fmt.count(x["over_pass"]),
                                   "differs": x["times"] is not None and x["times"] != x["over_pass"],
                                   "unknown": [f"{p or '(model)'}: {'; '.join(w)}" for p, w in x["unknown"][:4]],
                                   "unknown_more": max(0, len(x["unknown"]) - 4)}
            rows.append(row)
        return {"rows": rows}

    # --- the overview

    def overview(self) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        r = cost_report(self.record)
        c = self.record.extra("cost")
        extra: Sequence[int] = ()
        if not c.get("curve") and c.get("decode"):  # one decode step: the cache is still drawn up to its L
            top = c["decode"]["start"]
            extra = [L for L in STANDARD if L <= top]
        points = curve_points(c, extra)
        B = r.batch
        flop_points = [(p.context, p.decode_flops / B) for p in points if p.decode_flops is not None]
        kv_points = [(p.context, p.kv_bytes) for p in points if p.kv_bytes is not None]
        charts = []
        if flop_points:
            charts.append(chart("cost-flops", flop_points, "decode FLOPs per token", flops_text,
                                f"Decode FLOPs per new token against context length L (B = {B})", si("FLOP")))
        if kv_points:
            charts.append(chart("cost-kv", kv_points, f"KV cache at B = {B}", bytes_text,
                                f"KV-cache bytes at B = {B} against context length L", si("B")))
        devices, gpus = site_devices(c)
        speeds = {}
        for hw in devices:
            tps = dict(tokens_per_s_curve(self.record, hw, gpus, [
                (pt.context, pt.attended if pt.attended is not None else pt.decode_flops, pt.kv_bytes)
                for pt in points]))
            speeds[hw.key] = tps
            if tps:
                on = f"{gpus} × {hw.name}" if gpus > 1 else hw.name
                charts.append(chart(f"cost-tps-{hw.key}", sorted(tps.items()), "tokens/s ≤", rate_text,
                                    f"Decode tokens per second at B = {B} against context length L on {on}: an "
                                    "upper bound (memory, compute and interconnect bounds)", si("tok/s")))
        p, d, m = r.prefill, r.decode, r.memory
        per_token = r.unit == "token"  # else a pass over an image, a latent, an audio window: no positions
        facts = [("prefill FLOPs", f"at B = {B}, T = {r.seq:,}" if per_token else f"one pass over {r.inputs}",
                  fmt.count(p.flops), f"{flops_text(p.flops)} · {flops_text(p.per_token)} {a_unit(r.unit)}",
                  "cost-prefill"),
                 ("  split", "", "", split(p), "cost-prefill-split")]
        if d is not None:
            facts += [("decode FLOPs", f"B = {B} new token{'s' if B > 1 else ''} at L = {tokens_text(r.context)}",
                       fmt.count(d.flops), flops_text(d.flops), "cost-decode"),
                      ("  split", "", "", split(d), "cost-decode-split"), *_absorbed(r)]
        kv = r.kv
        if kv.source is not None:
            facts += [("KV cache per token", kv_dtype_text(r), bytes_text(kv.per_token),
                       f"{kv.per_token:,.0f} bytes" if kv.per_token == int(kv.per_token) else "", "cost-kv-token"),
                      ("KV cache", f"at B = {B}, L = {tokens_text(r.context)}", bytes_text(kv.at_context),
                       f"of which {bytes_text(kv.fixed)} fixed (windows, states)" if kv.fixed else "",
                       "cost-kv-context")]
        else:
            facts.append(("KV cache", "", "—", "no cache found (reference models: buffers; transformers: "
                          "DynamicCache)", "cost-kv-context"))
        tr = dict(m.training)
        facts += [("weights", "", bytes_text(m.weights),
                   weights_dtype_text(r, bytes_text), "cost-weights"),
                  ("activation peak", "", bytes_text(m.activation_peak), _peak_text(r, B), "cost-activations"),
                  ("serving memory", "", bytes_text(m.serving), "weights + KV + activation peak", "cost-serving"),
                  ("training memory", "", bytes_text(tr.get("total")), str(tr.get("formula", "")), "cost-training")]
        unknown = []
        for pc, name in ((p, "prefill"), (d, "decode")):
            for path, why in (pc.unknown if pc is not None else ()):
                unknown.append(f"{path or '(model)'} ({name}): {'; '.join(why)}")
        notes = [*r.notes, *(f"prefill: {n}" for n in p.notes), *(f"decode: {n}" for n in (d.notes if d else ())),
                 *(reprojection_note(r)[len("note: "):] for _ in _absorbed(r))]
        table = [{"L": pt.context, "label": tokens_text(pt.context),
                  "flops": pt.decode_flops, "per_token": None if pt.decode_flops is None else pt.decode_flops / B,
                  "per_token_text": "—" if pt.decode_flops is None else flops_text(pt.decode_flops / B),
                  "attention": "—" if pt.attention is None or not pt.decode_flops else
                  f"{pt.attention / pt.decode_flops:.0%}",
                  "kv": pt.kv_bytes, "kv_text": bytes_text(pt.kv_bytes),
                  "tps": [rate_text(speeds[hw.key][pt.context]) if pt.context in speeds[hw.key] else "—"
                          for hw in devices],
                  "unknown": len(pt.unknown)} for pt in points]
        return {"facts": facts, "charts": charts, "table": table, "devices": [hw.key for hw in devices],
                "gpus": gpus, "device_sources": [f"{hw.key}: {hw.name} · {hw.source}" for hw in devices], "unknown": unknown[:20],
                "unknown_more": max(0, len(unknown) - 20), "notes": notes, "batch": B,
                "measured": sum(1 for pt in points if pt.decode_flops is not None),
                "by_kind": [{"kind": k.kind, "layers": k.layers, "prefill": flops_text(k.flops),
                             "decode": flops_text(next((x.flops for x in (d.by_kind if d else ()) if x.kind == k.kind),
                                                       None))} for k in p.by_kind if k.flops]}


def split(p: Any) -> str:
    if not p.flops:
        return "—"
    return f"attention {p.attention / p.flops:.0%} · MLP {p.mlp / p.flops:.0%} · other {p.other / p.flops:.0%}"


def _log_range(values: Sequence[float]) -> tuple[float, float]:
    lo = math.log10(min(values))
    hi = math.log10(max(values))
    lo, hi = math.floor(lo), math.ceil(hi)
    if hi - lo < 1:
        lo, hi = lo - 1, hi + 1 if hi == lo else hi
    return lo, hi


def si(suffix: str) -> Callable[[float], str]:
    """Decade ticks in decimal SI units: 1e9 -> '1 G' + suffix."""
    def text(v: float) -> str:
        for name, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
            if v >= div:
                return f"{v / div:g} {name}{suffix}"
        return f"{v:g} {suffix}"
    return text


def chart(cid: str, points: Sequence[tuple[int, float]], y_label: str, unit: Callable[[float], str],
          description: str, tick: Callable[[float], str]) -> dict[str, Any]:
    """The geometry of a chart of `points` (L, value) on log-log axes, ticks at every L and every decade, for the
    `chart` macro (templates/svg.html) to draw as inline SVG; its `aria-label` says what it shows and the table beside
    it gives every value."""
    pts = [(L, v) for L, v in points if L > 0 and v and v > 0]
    xs = [math.log2(L) for L, _ in pts] or [0.0]
    xlo, xhi = min(xs), max(xs)
    if xhi == xlo:
        xlo, xhi = xlo - 1, xhi + 1
    ylo, yhi = _log_range([v for _, v in pts] or [1.0])

    def x(L: float) -> float:
        return round(X0 + (math.log2(L) - xlo) / (xhi - xlo) * (X1 - X0), 1)

    def y(v: float) -> float:
        return round(Y1 - (math.log10(v) - ylo) / (yhi - ylo) * (Y1 - Y0), 1)

    step = 1 if yhi - ylo <= 6 else 2
    ygrid = []
    for e in range(int(ylo), int(yhi) + 1, step):
        yy = y(10.0 ** e)
        ygrid.append({"y": yy, "tx": X0 - 6, "ty": yy + 4, "text": tick(10.0 ** e)})
    xgrid = []
    last = {16: -1e9, 30: -1e9}  # the right end of the last label on each row
    for L, _ in pts:
        xx = x(L)
        # a label that would touch the one before it goes a row lower (128K and 160K sit close)
        half = 3.5 * len(tokens_text(L)) + 3
        row = 16 if xx - half > last[16] else 30
        last[row] = xx + half
        xgrid.append({"x": xx, "ty": Y1 + row, "text": tokens_text(L)})
    return {"id": cid, "label": description, "w": W, "h": H,
            "frame": {"x": X0, "y": Y0, "w": X1 - X0, "h": Y1 - Y0, "right": X1, "bottom": Y1},
            "ygrid": ygrid, "xgrid": xgrid, "xaxis": {"x": (X0 + X1) // 2, "y": H - 4},
            "yaxis": {"x": 12, "y": (Y0 + Y1) // 2, "text": y_label},
            "line": " ".join(f"{x(L)},{y(v)}" for L, v in pts) if len(pts) > 1 else "",
            "points": [{"x": x(L), "y": y(v), "L": L, "v": f"{v:.17g}", "title": f"L = {tokens_text(L)}: {unit(v)}"}
                       for L, v in pts]}



def _peak_text(r: Any, B: int) -> str:
    """What the activation peak is of: a prefill chunk of T tokens, or one pass of B images, latents, windows."""
    return f"one prefill chunk of {r.seq:,} tokens" if r.unit == "token" else \
        f"one pass of {B} {r.unit}{'s' if B > 1 else ''}"

__all__ = ["SiteCost", "chart", "CurvePoint"]

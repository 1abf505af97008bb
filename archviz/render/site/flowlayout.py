"""A dataflow picture laid out at build time as inline SVG (no script: it shows with JavaScript off): one box per
row in forward order, so no two boxes overlap; an edge to the row below is a short arrow, an edge that skips rows
(a residual, an input read again) runs in a lane of its own to the right of the boxes. Module boxes are links to
their node pages; a function box (a run of ops inside one call of a Python function) links to what it expands to;
ops are smaller pills. A chain of layout ops folded into an edge labels the edge. Text is in the monospace face, so
its width is known here."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from ..flowfold import Item

CHAR = 7.3  # px per character of 12px monospace (DejaVu Sans Mono: 7.22)
PAD = 10  # px of box padding each side
GAP = 18  # px between rows
LANE = 12  # px between lanes
TALL, SHORT = 40, 24  # box heights: two lines (modules), one line (ops, inputs, output)


_STYLE = """svg.dataflow{font:12px var(--mono,monospace);display:block}
svg.dataflow .box rect{fill:var(--card,#fff);stroke:var(--dim,#6a6f76);stroke-width:1}
svg.dataflow .call rect,svg.dataflow .fold rect{stroke:var(--accent,#2158b6);stroke-width:1.4}
svg.dataflow .fn rect{fill:var(--card,#fff);stroke:var(--accent,#2158b6);stroke-width:1;stroke-dasharray:2 2}
svg.dataflow text.v{font-size:10px;fill:var(--dim,#6a6f76)}
svg.dataflow .fold rect{stroke-dasharray:5 3}
svg.dataflow .op rect{fill:var(--code-bg,#f6f6f3)}
svg.dataflow .in rect,svg.dataflow .out rect{fill:var(--mark,#fff3bf);stroke:var(--mark-edge,#f0b400)}
svg.dataflow text{fill:var(--fg,#1d1f21)}
svg.dataflow text.t{font-weight:700}
svg.dataflow a:hover rect,svg.dataflow a:focus rect{stroke-width:2.6}
svg.dataflow .e{fill:none;stroke:var(--dim,#6a6f76);stroke-width:1.2}
svg.dataflow .m{fill:var(--dim,#6a6f76)}"""


SMALL = 6.1  # px per character of the 10px edge labels


def layout(items: list[Item]) -> dict[str, Any]:
    """Boxes [{x, y, w, h}] per item, edge paths and edge labels; every box on its own row."""
    widths = [max(60, round(max(len(t) for t in it.lines()) * CHAR + 2 * PAD)) for it in items]
    maxw = max(widths, default=60)
    cx = 8 + maxw / 2
    boxes = []
    y = 8
    for it, w in zip(items, widths):
        h = TALL if len(it.lines()) > 1 else SHORT
        boxes.append({"x": round(cx - w / 2, 1), "y": y, "w": w, "h": h})
        y += h + GAP
    height = y - GAP + 8
    # An edge that skips rows leaves its source to the right, into the source's lane: one vertical line from the
    # source down to its last such consumer, a stub into each. Lanes are reused once their source's line has ended.
    reach: dict[int, int] = {}
    for c, it in enumerate(items):
        for p in it.inputs:
            if p < c - 1:
                reach[p] = max(reach.get(p, 0), c)
    lane_end: list[int] = []
    lane_of: dict[int, int] = {}
    for p in sorted(reach):
        lane = next((i for i, end in enumerate(lane_end) if end < p), None)
        if lane is None:
            lane = len(lane_end)
            lane_end.append(0)
        lane_end[lane] = reach[p]
        lane_of[p] = lane
    right = 8 + maxw + 14
    entering: dict[int, int] = {}
    edges = []
    labels = []  # (x, y, text): the layout ops on an edge to the next row, beside its arrow
    for p, lane in lane_of.items():
        bp = boxes[p]
        edges.append(f"M{bp['x'] + bp['w']:g} {bp['y'] + bp['h'] / 2:g}H{right + LANE * lane:g}")
    for c, it in enumerate(items):
        for p in it.inputs:
            if p >= c:
                continue
            bp, bc = boxes[p], boxes[c]
            if p == c - 1:
                edges.append(f"M{cx:g} {bp['y'] + bp['h']}V{bc['y'] - 2}")
                if p in it.via:
                    labels.append((cx + 6, bp["y"] + bp["h"] + GAP / 2 + 4, it.via[p]))
                continue
            lx = right + LANE * lane_of[p]
            k = entering.get(c, 0)
            entering[c] = k + 1
            y1 = bp["y"] + bp["h"] / 2
            y2 = bc["y"] + bc["h"] / 2 - 6 + 4 * (k % 4)
            edges.append(f"M{lx:g} {y1:g}V{y2:g}H{bc['x'] + bc['w'] + 2:g}")
    width = right + LANE * max(0, len(lane_end) - 1) + 10 if lane_end else 8 + maxw + 8
    width = max([width, *(x + len(t) * SMALL + 8 for x, _, t in labels)])
    return {"boxes": boxes, "edges": edges, "labels": labels, "width": round(width), "height": height}


def render_svg(items: list[Item], label: str, ident: str = "") -> Markup:
    """The picture; `ident` names a nested one (the ops inside a function box: class dataflow-ops, its own marker
    id). In the main picture a box that links nowhere else links to its entry in the list of steps below it."""
    geo = layout(items)
    cls = "dataflow-ops" if ident else "dataflow"
    arrow_id = f"flow-arrow-{ident}" if ident else "flow-arrow"
    out = [f'<svg class="{cls}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {geo["width"]} {geo["height"]}" '
           f'width="{geo["width"]}" height="{geo["height"]}" role="group" aria-label="{escape(label)}">',
           f"<style>{_STYLE.replace('svg.dataflow', f'svg.{cls}')}</style>",
           f'<defs><marker id="{arrow_id}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path class="m" d="M0 0L8 4L0 8z"/></marker></defs>']
    for d in geo["edges"]:
        arrow = "" if d.count("H") == 1 and "V" not in d else f' marker-end="url(#{arrow_id})"'  # a lane's start
        out.append(f'<path class="e" d="{d}"{arrow}/>')
    for x, y, t in geo["labels"]:
        out.append(f'<text class="v" x="{x:g}" y="{y:g}">{escape(t)}</text>')
    for n, (it, b) in enumerate(zip(items, geo["boxes"])):
        lines = it.lines()
        rx = 12 if it.kind == "op" else 4
        text = []
        for i, t in enumerate(lines):
            ty = b["y"] + (15 if len(lines) > 1 else 16) + 17 * i
            bold = ' class="t"' if i == 0 and len(lines) > 1 else ""
            text.append(f'<text x="{b["x"] + PAD:g}" y="{ty}"{bold}>{escape(t)}</text>')
        body = f'<rect x="{b["x"]:g}" y="{b["y"]}" width="{b["w"]}" height="{b["h"]}" rx="{rx}"/>' + "".join(text)
        name = escape(" · ".join(lines))
        href = it.href or (None if ident else f"#flow-step-{n + 1}")
        if href:
            out.append(f'<a class="box {it.kind}" href="{escape(href)}" data-path="{escape(it.path)}">'
                       f'<title>{name}</title>{body}</a>')  # named by its <title>, which holds the visible text
        else:
            data = f' data-path="{escape(it.path)}"' if it.path else ""
            out.append(f'<g class="box {it.kind}"{data}><title>{name}</title>{body}</g>')
    out.append("</svg>")
    return Markup("".join(out))

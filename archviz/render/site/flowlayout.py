"""A dataflow picture laid out at build time for inline SVG (no script: it shows with JavaScript off; drawn by the
`flow` macro of templates/svg.html): one box per row in forward order, so no two boxes overlap; an edge to the row below is a short arrow, an edge that skips rows
(a residual, an input read again) runs in a lane of its own to the right of the boxes. Module boxes are links to
their node pages; a function box (a run of ops inside one call of a Python function) links to what it expands to;
ops are smaller pills. A chain of layout ops folded into an edge labels the edge. Text is in the monospace face, so
its width is known here."""

from __future__ import annotations

from typing import Any

from ..flowfold import Item

CHAR = 7.3  # px per character of 12px monospace (DejaVu Sans Mono: 7.22)
PAD = 10  # px of box padding each side
GAP = 18  # px between rows
LANE = 12  # px between lanes
TALL, SHORT = 40, 24  # box heights: two lines (modules), one line (ops, inputs, output)


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


def picture(items: list[Item], label: str, ident: str = "") -> dict[str, Any]:
    """The picture for the `flow` macro (templates/svg.html) to draw; `ident` names a nested one (the ops inside a
    function box: class dataflow-ops, its own marker id). In the main picture a box that links nowhere else links to
    its entry in the list of steps below it."""
    geo = layout(items)
    boxes = []
    for n, (it, b) in enumerate(zip(items, geo["boxes"])):
        lines = it.lines()
        texts = [{"x": f"{b['x'] + PAD:g}", "y": b["y"] + (15 if len(lines) > 1 else 16) + 17 * i,
                  "bold": i == 0 and len(lines) > 1, "text": t} for i, t in enumerate(lines)]
        boxes.append({"kind": it.kind, "href": it.href or (None if ident else f"#flow-step-{n + 1}"),
                      "path": it.path, "name": " · ".join(lines), "x": f"{b['x']:g}", "y": b["y"], "w": b["w"],
                      "h": b["h"], "rx": 12 if it.kind == "op" else 4, "texts": texts})
    return {"cls": "dataflow-ops" if ident else "dataflow", "arrow": f"flow-arrow-{ident}" if ident else "flow-arrow",
            "label": label, "width": geo["width"], "height": geo["height"],
            # a lane's start (one horizontal stroke) has no arrowhead
            "edges": [{"d": d, "arrow": not (d.count("H") == 1 and "V" not in d)} for d in geo["edges"]],
            "labels": [{"x": f"{x:g}", "y": f"{y:g}", "text": t} for x, y, t in geo["labels"]], "boxes": boxes}

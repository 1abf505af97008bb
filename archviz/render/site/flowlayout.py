"""A dataflow picture laid out at build time for inline SVG (no script: it shows with JavaScript off; drawn by the
`flow` macro of templates/svg.html). Boxes stand in rows in forward order, read left to right and top to bottom: a
box joins the row before it when it reads nothing of that row or only its last box and the row stays narrow enough
(the forward's inputs side by side, a chain of calls read left to right, a branch that starts afresh beside the end of
the one before), so no two boxes overlap and a layer or attention block fits on one screen. An edge to the next row is a short arrow (bent where the boxes stand apart); an
edge that skips rows (a residual, an input read again) runs in a lane of its own to the right of the boxes. Module
boxes are links to their node pages; a function box (a run of ops inside one call of a Python function) links to
what it expands to; ops are smaller pills. A chain of layout ops folded into an edge labels the edge. Text is in the
monospace face, so its width is known here."""

from __future__ import annotations

from typing import Any

from ..flowfold import Item

CHAR = 7.3  # px per character of 12px monospace (DejaVu Sans Mono: 7.22)
PAD = 10  # px of box padding each side
GAP = 16  # px between rows
LABEL = 10  # px more above a row whose incoming edge has a label
SIDE = 16  # px between the boxes of a row (an arrow where one reads the other)
ROW = 780  # px: the widest a row of several boxes grows (with the lanes, the picture stays inside a 1000 px column)
LANE = 18  # px between lanes (12 crowded the right edge where several values run down at once)
TALL, SHORT = 36, 22  # box heights: two lines (modules), one line (ops, inputs, output)
BASE = {TALL: (14, 29), SHORT: (15,)}  # each line's baseline below the box's top
SMALL = 6.1  # px per character of the 10px edge labels


def _rows(items: list[Item], widths: list[int]) -> list[list[int]]:
    """Items in rows, forward order kept: an item joins the last row when the row stays within ROW px, it is of the
    row's side (inputs only beside inputs) and it reads nothing of that row, or only the row's last box, through an
    edge without a label (a chain read left to right: q_a_proj → q_a_norm → q_b_proj)."""
    rows: list[list[int]] = []
    for c, it in enumerate(items):
        last = rows[-1] if rows else None
        if last is not None and (items[last[0]].kind == "in") == (it.kind == "in") and \
                set(it.inputs) & set(last) <= {last[-1]} - set(it.via) and \
                sum(widths[i] + SIDE for i in last) + widths[c] <= ROW:
            last.append(c)
        else:
            rows.append([c])
    return rows


def layout(items: list[Item]) -> dict[str, Any]:
    """Boxes [{x, y, w, h}] per item, edges [(path, arrowhead)] and edge labels [(x, y, text)]."""
    widths = [max(60, round(max(len(t) for t in it.lines()) * CHAR + 2 * PAD)) for it in items]
    rows = _rows(items, widths)
    spans = [sum(widths[i] for i in r) + SIDE * (len(r) - 1) for r in rows]
    maxw = max(spans, default=60)
    cx = 8 + maxw / 2
    row_of = {i: r for r, row in enumerate(rows) for i in row}
    # the gap above a row that an edge label is written in is taller: its lines run above the label
    labelled = {row_of[c] for c, it in enumerate(items) for p in it.via if row_of.get(p) == row_of[c] - 1}
    boxes: list[dict[str, Any]] = [{} for _ in items]
    tops = []  # (top, bottom) of each row
    y = 8
    for r, (row, span) in enumerate(zip(rows, spans)):
        if r:
            y += GAP + (LABEL if r in labelled else 0)
        h = max(TALL if len(items[i].lines()) > 1 else SHORT for i in row)
        x = cx - span / 2
        for i in row:
            hi = TALL if len(items[i].lines()) > 1 else SHORT
            boxes[i] = {"x": round(x, 1), "y": y + (h - hi) // 2, "w": widths[i], "h": hi}
            x += widths[i] + SIDE
        tops.append((y, y + h))
        y += h
    height = y + 8
    lane_of, lanes = _lanes(items, row_of)
    right = 8 + maxw + 20
    edges, labels = _edges(items, boxes, rows, tops, lane_of, right)
    width = right + LANE * max(0, lanes - 1) + 10 if lanes else 8 + maxw + 8
    width = max([width, *(x + len(t) * SMALL + 8 for x, _, t in labels)])
    return {"boxes": boxes, "edges": edges, "labels": labels, "width": round(width), "height": height}


def _lanes(items: list[Item], row_of: dict[int, int]) -> tuple[dict[int, int], int]:
    """The lane of each source with an edge that skips rows, and how many lanes: one vertical line from the source
    down to its last such consumer; a lane is reused once its source's line has ended."""
    reach: dict[int, int] = {}
    for c, it in enumerate(items):
        for p in it.inputs:
            if row_of[p] < row_of[c] - 1:
                reach[p] = max(reach.get(p, 0), row_of[c])
    lane_end: list[int] = []
    lane_of: dict[int, int] = {}
    for p in sorted(reach):
        lane = next((i for i, end in enumerate(lane_end) if end < row_of[p]), None)
        if lane is None:
            lane = len(lane_end)
            lane_end.append(0)
        lane_end[lane] = reach[p]
        lane_of[p] = lane
    return lane_of, len(lane_end)


def _edges(items: list[Item], boxes: list[dict[str, Any]], rows: list[list[int]], tops: list[tuple[int, int]],
           lane_of: dict[int, int], right: float) -> tuple[list[tuple[str, bool]], list[tuple[float, float, str]]]:
    """Edge paths (with or without an arrowhead) and the edge labels (x, y, text): the layout ops on an edge to the
    next row, beside its arrow. An edge along a row is an arrow between the boxes; to the next row, an arrow down
    (bent in the gap between the rows); one that skips rows leaves its source into the source's lane, right of every
    box (from the source's right side when it ends its row, else from below it), and a stub from the lane enters each
    consumer (from the right where the consumer ends its row, else along the gap above it into its top)."""
    row_of = {i: r for r, row in enumerate(rows) for i in row}
    last_of_row = {row[-1] for row in rows}

    def mid(i: int) -> float:
        return boxes[i]["x"] + boxes[i]["w"] / 2

    entering: dict[int, int] = {}
    edges: list[tuple[str, bool]] = []
    labels: list[tuple[float, float, str]] = []
    exit_y: dict[int, float] = {}
    for k, (p, lane) in enumerate(lane_of.items()):
        bp = boxes[p]
        if p in last_of_row:
            exit_y[p] = bp["y"] + bp["h"] / 2
            edges.append((f"M{bp['x'] + bp['w']:g} {exit_y[p]:g}H{right + LANE * lane:g}", False))
        else:
            exit_y[p] = tops[row_of[p]][1] + 3 + 4 * (k % 3)
            edges.append((f"M{mid(p):g} {bp['y'] + bp['h']}V{exit_y[p]:g}H{right + LANE * lane:g}", False))
    for c, it in enumerate(items):
        bc = boxes[c]
        for p in it.inputs:
            if p >= c:
                continue
            bp = boxes[p]
            if row_of[p] == row_of[c]:  # the box before it in its row
                edges.append((f"M{bp['x'] + bp['w']:g} {bp['y'] + bp['h'] / 2:g}H{bc['x'] - 2:g}", True))
                continue
            if row_of[p] == row_of[c] - 1:
                x0, x1, top = mid(p), mid(c), bc["y"] - 2
                if abs(x0 - x1) < 1:
                    edges.append((f"M{x1:g} {bp['y'] + bp['h']}V{top}", True))
                else:  # bent in the gap between the rows
                    edges.append((f"M{x0:g} {bp['y'] + bp['h']}V{tops[row_of[p]][1] + 5}H{x1:g}V{top}", True))
                if p in it.via:
                    labels.append((x1 + 6, tops[row_of[c]][0] - 4, it.via[p]))
                continue
            lx = right + LANE * lane_of[p]
            k = entering.get(c, 0)
            entering[c] = k + 1
            if c in last_of_row:  # into its right side
                y2 = bc["y"] + bc["h"] / 2 - 6 + 4 * (k % 4)
                edges.append((f"M{lx:g} {exit_y[p]:g}V{y2:g}H{bc['x'] + bc['w'] + 2:g}", True))
            else:  # into its top, along the gap above its row
                y2 = tops[row_of[c] - 1][1] + 9  # below the bends (+5) and between the exits (+3, +7, +11)
                edges.append((f"M{lx:g} {exit_y[p]:g}V{y2:g}H{mid(c) - 6 - 4 * (k % 3):g}V{bc['y'] - 2}", True))
    return edges, labels


def picture(items: list[Item], label: str, ident: str = "") -> dict[str, Any]:
    """The picture for the `flow` macro (templates/svg.html) to draw; `ident` names a nested one (the ops inside a
    function box: class dataflow-ops, its own marker id). In the main picture a box that links nowhere else links to
    its entry in the list of steps below it."""
    geo = layout(items)
    boxes = []
    for n, (it, b) in enumerate(zip(items, geo["boxes"])):
        lines = it.lines()
        texts = [{"x": f"{b['x'] + PAD:g}", "y": b["y"] + BASE[b["h"]][i], "bold": i == 0 and len(lines) > 1,
                  "text": t} for i, t in enumerate(lines)]
        boxes.append({"kind": it.kind, "href": it.href or (None if ident else f"#flow-step-{n + 1}"),
                      "path": it.path, "name": " · ".join(lines), "x": f"{b['x']:g}", "y": b["y"], "w": b["w"],
                      "h": b["h"], "rx": 12 if it.kind == "op" else 4, "texts": texts})
    return {"cls": "dataflow-ops" if ident else "dataflow", "arrow": f"flow-arrow-{ident}" if ident else "flow-arrow",
            "label": label, "width": geo["width"], "height": geo["height"],
            "edges": [{"d": d, "arrow": arrow} for d, arrow in geo["edges"]],  # a lane's start has no arrowhead
            "labels": [{"x": f"{x:g}", "y": f"{y:g}", "text": t} for x, y, t in geo["labels"]], "boxes": boxes}

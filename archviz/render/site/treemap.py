"""The overview's treemap: a squarified layout of the node tree by parameters, as SVG-ready rectangles."""

from __future__ import annotations

import hashlib
import math
from typing import Any, Mapping, Sequence

from ... import format as fmt
from .nodes import Node


def _worst(row: list[float], side: float) -> float:
    s = sum(row)
    if s <= 0 or side <= 0:
        return math.inf
    return max(max(side * side * r / (s * s), (s * s) / (side * side * r)) for r in row if r > 0)


def squarify(values: Sequence[float], x: float, y: float, w: float,
             h: float) -> list[tuple[float, float, float, float]]:
    """Rectangles for values (sorted descending by the caller) filling (x, y, w, h), in the values' order."""
    total = sum(values)
    if total <= 0 or w <= 0 or h <= 0:
        return [(x, y, 0.0, 0.0) for _ in values]
    scale = w * h / total
    areas = [v * scale for v in values]
    out: list[tuple[float, float, float, float]] = []
    i = 0
    while i < len(areas):
        side = min(w, h)
        row = [areas[i]]
        j = i + 1
        while j < len(areas) and _worst(row + [areas[j]], side) <= _worst(row, side):
            row.append(areas[j])
            j += 1
        s = sum(row)
        if w >= h:  # a column on the left
            cw = s / h if h else 0
            yy = y
            for a in row:
                rh = a / cw if cw else 0
                out.append((x, yy, cw, rh))
                yy += rh
            x += cw
            w -= cw
        else:  # a row on top
            rh = s / w if w else 0
            xx = x
            for a in row:
                rw = a / rh if rh else 0
                out.append((xx, y, rw, rh))
                xx += rw
            y += rh
            h -= rh
        i = j
    return out


def _hue(key: str) -> int:
    return int(hashlib.sha1(key.encode()).hexdigest()[:6], 16) % 360


def treemap(nodes: Mapping[str, Node], root: str, width: float = 960, height: float = 540,
            max_depth: int = 6) -> list[dict[str, Any]]:
    """Nested rectangles of parameter totals (a node's own tensors make an 'own' cell beside its children)."""
    rects: list[dict[str, Any]] = []

    def items(nid: str) -> list[tuple[int, str, bool]]:
        n = nodes[nid]
        kids = [(nodes[c].total, c, False) for c in n.children if nodes[c].total > 0]
        rest = n.total - sum(k[0] for k in kids)
        if rest > 0 and kids:
            kids.append((rest, nid, True))
        kids.sort(key=lambda t: (-t[0], t[1], t[2]))
        return kids

    def lay(nid: str, x: float, y: float, w: float, h: float, depth: int) -> None:
        kids = items(nid)
        boxes = squarify([k[0] for k in kids], x, y, w, h)
        for (value, cid, own), (bx, by, bw, bh) in zip(kids, boxes):
            c = nodes[cid]
            hh = _hue(c.class_name or c.title)
            label = (f"{c.title} (own tensors)" if own else c.title)
            rects.append({"x": f"{bx:.2f}", "y": f"{by:.2f}", "w": f"{bw:.2f}", "h": f"{bh:.2f}", "depth": depth,
                          "hue": hh, "node": cid, "title": label, "total": value,
                          "tip": f"{label} · {c.class_name} · {fmt.count(value)} parameters",
                          "label": label if bw > 60 and bh > 16 else "", "lx": f"{bx + 4:.2f}",
                          "ly": f"{by + 13:.2f}", "own": own})
            pad = 18.0
            branching = len(nodes[cid].children) > 1
            if not own and depth + branching < max_depth and nodes[cid].children and bw > 40 and bh > 40:
                lay(cid, bx + 2, by + pad, bw - 4, bh - pad - 2, depth + branching)

    lay(root, 0, 0, width, height, 0)
    return rects

"""The dataflow picture's layout (archviz/render/site/flowlayout.py) on hand-made items: the forward's inputs stand
side by side, a chain of boxes each reading the one before reads left to right in one row, an edge with layout ops
written on it starts a new row, no row of several boxes is wider than ROW, and no two boxes overlap."""

from __future__ import annotations

from archviz.render.flowfold import Item
from archviz.render.site.flowlayout import ROW, layout


def _rows(geo: dict) -> list[list[int]]:
    """Item indices grouped by the row their box stands in (boxes of a row share their middle)."""
    rows: dict[float, list[int]] = {}
    for i, b in enumerate(geo["boxes"]):
        rows.setdefault(b["y"] + b["h"] / 2, []).append(i)
    return [rows[k] for k in sorted(rows)]


def _apart(geo: dict) -> None:
    bs = geo["boxes"]
    for i, a in enumerate(bs):
        for b in bs[i + 1:]:
            assert a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"] or \
                a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"], (a, b)


def test_inputs_side_by_side_and_a_chain_in_one_row():
    items = [Item("in", "x", "[B, T, 8]"), Item("in", "mask", "[B, T]"),
             Item("call", "norm", "LayerNorm", inputs=[0]), Item("call", "attn", "Attn", inputs=[2, 1]),
             Item("op", "add", "", inputs=[3, 0], shape="[B, T, 8]"), Item("out", "output", "[B, T, 8]", inputs=[4])]
    geo = layout(items)
    assert _rows(geo) == [[0, 1], [2, 3, 4, 5]]
    _apart(geo)
    boxes = geo["boxes"]
    assert [b["x"] for b in boxes[2:]] == sorted(b["x"] for b in boxes[2:])  # read left to right
    # norm → attn → add → output: arrows along the row, each from a box's right side to the next one's left side
    for a, b in ((2, 3), (3, 4), (4, 5)):
        mid = boxes[a]["y"] + boxes[a]["h"] / 2
        assert (f"M{boxes[a]['x'] + boxes[a]['w']:g} {mid:g}H{boxes[b]['x'] - 2:g}", True) in geo["edges"]
    # x → norm, the residual x → add and mask → attn come down from the row above, bent in the gap into the box's top
    def mid(i: int) -> float:
        return boxes[i]["x"] + boxes[i]["w"] / 2

    bottom = max(boxes[i]["y"] + boxes[i]["h"] for i in (0, 1))
    bent = {(a, b): f"M{mid(a):g} {boxes[a]['y'] + boxes[a]['h']}V{bottom + 5}H{mid(b):g}V{boxes[b]['y'] - 2}"
            for a, b in ((0, 2), (0, 4), (1, 3))}
    assert {p for p, _ in geo["edges"]} == {p for p, _ in geo["edges"] if "H" in p and "V" not in p} | set(bent.values())
    assert geo["height"] < 2 * 36 + 16 + 8 + 8 + 1  # two rows: one of inputs, one of two-line boxes


def test_an_edge_with_layout_ops_starts_a_row_and_carries_its_label():
    items = [Item("in", "x", "[B, T, 8]"), Item("call", "proj", "Linear", inputs=[0]),
             Item("call", "norm", "RMSNorm", inputs=[1], via={1: "view → [B, 2, T, 4]"})]
    geo = layout(items)
    assert _rows(geo) == [[0], [1], [2]]
    assert [t for _, _, t in geo["labels"]] == ["view → [B, 2, T, 4]"]
    x, y, _ = geo["labels"][0]
    assert geo["boxes"][1]["y"] + geo["boxes"][1]["h"] < y < geo["boxes"][2]["y"]  # in the gap above its box


def test_rows_stay_within_their_width():
    items = [Item("in", "x", "[B, T, 8]")] + [Item("op", f"op{i}", "", inputs=[i], shape="[B, T, 8]" * 4)
                                              for i in range(12)]
    geo = layout(items)
    rows = _rows(geo)
    assert len(rows) > 2 and sum(len(r) for r in rows) == 13
    for r in rows:
        bs = [geo["boxes"][i] for i in r]
        assert len(r) == 1 or bs[-1]["x"] + bs[-1]["w"] - bs[0]["x"] <= ROW
    _apart(geo)

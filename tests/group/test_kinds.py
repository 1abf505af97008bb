"""A buffer tensor shared by every layer is counted once (an alias after the first), yet all layers are one kind."""

import archviz
from archviz.group import group
from helpers import TESTS


def test_layers_sharing_a_cached_buffer_are_one_kind(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS / "data" / "factories"))
    record = group(archviz.load("shared_buffer:build"))
    kinds = record.extra("grouping")["layers"]["kinds"]
    assert [k["layers"] for k in kinds] == [[0, 1, 2, 3, 4, 5]]
    # The buffer itself is counted once: 8 elements, in layer 0; the others hold an alias.
    assert record.summary.buffer_elements == 8
    assert [t.kind for t in record.module("layers.3").tensors] == ["alias"]
    # 6 layers × (8·8 weight + 8 bias)
    assert record.summary.parameters == 6 * (8 * 8 + 8)

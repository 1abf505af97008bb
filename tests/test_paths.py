"""The one path compressor (archviz.paths), as the explorer's search index, the diff and the checkpoint reports use
it: exact (every pattern expands back to the names it stands for, no other), and a numeral with a leading zero is a
name of its own, never an index."""

from __future__ import annotations

import itertools

import pytest

from archviz.checkpoint.compact import compress_names
from archviz.paths import compress_paths, expand_pattern

CASES = [
    ["a.007", "a.008"],
    ["a.007", "a.7", "a.8"],
    ["layers.00.w", "layers.01.w", "layers.1.w"],
    [f"layers.{i}.experts.{e}.w" for i in range(3) for e in (range(4) if i != 1 else range(2))],
    ["a.0.b.1", "a.0.b.2", "a.1.b.1", "x", ""],
]


@pytest.mark.parametrize("names", CASES)
def test_patterns_expand_back_to_exactly_the_names(names: list[str]) -> None:
    for compress in (compress_paths, compress_names):
        expanded = list(itertools.chain.from_iterable(expand_pattern(p) for p in compress(names)))
        assert sorted(expanded) == sorted(names), compress


def test_a_leading_zero_is_a_name() -> None:
    assert compress_paths(["a.007", "a.008"]) == ["a.007", "a.008"]
    assert compress_paths(["a.7", "a.8", "a.007"]) == ["a.{7-8}", "a.007"]


def test_values_that_read_alike_are_merged() -> None:
    """Layers 0 and 2 hold four experts, layer 1 two: two patterns, not three."""
    names = CASES[3]
    assert compress_paths(names) == ["layers.{0,2}.experts.{0-3}.w", "layers.1.experts.{0-1}.w"]
    assert compress_names(names) == compress_paths(names)

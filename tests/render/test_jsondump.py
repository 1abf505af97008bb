"""`archviz.render.jsondump.dumps_indented` writes what `json.dumps(obj, indent=n, ensure_ascii=False)` writes, except
that a non-finite float is written null: `--json` is strict JSON always (issue 46)."""

from __future__ import annotations

import enum
import json
import math
import random
from collections import OrderedDict

import pytest

from archviz.render.jsondump import dumps_indented


def _finite(obj):
    """`obj` with every non-finite float value (not key) made None, as json sees the containers."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _std(obj, indent=1):
    return json.dumps(_finite(obj), indent=indent, ensure_ascii=False)


class Name(str):
    pass


class Count(int):
    pass


class Colour(enum.IntEnum):
    RED = 1


SHARED_ROW = {"verdict": "match", "model": 12, "checkpoint": 12}
SHARED_LIST = ["a", 1, None]

CASES = [
    None, True, False, 0, -7, 10**30, 1.5, -0.0, 1e300, float("nan"), float("inf"), float("-inf"), "", "x",
    "é\u202e\x01\"\\/\n", [], {}, (), [[]], [{}], {"a": []}, {"a": {}},
    {"modules": {"a": SHARED_ROW, "b": SHARED_ROW, "c": {"inner": SHARED_ROW}}},  # one object at two levels
    [SHARED_LIST, [SHARED_LIST], {"k": SHARED_LIST}],
    {1: "int key", 2.5: "float key", True: "t", False: "f", None: "n", "s": 1},
    (1, (2, 3), [4, (5,)]),
    {Name("sub"): Name("str subclass"), "n": Count(3), "e": Colour.RED},
    OrderedDict([("z", 1), ("a", 2)]),
    {"deep": [[[[{"x": [1, 2, {"y": None}]}]]]]},
]


@pytest.mark.parametrize("obj", CASES, ids=range(len(CASES)))
@pytest.mark.parametrize("indent", [1, 2, 4])
def test_same_text_as_json_dumps(obj, indent) -> None:
    assert dumps_indented(obj, indent) == _std(obj, indent)


def test_random_documents() -> None:
    rng = random.Random(22)
    leaves = [None, True, False, 0, 3, -12345678901234, 0.1, 2.5e-8, "", "layers.{0-60}", "ü€", "\u2028"]

    def make(depth: int):
        r = rng.random()
        if depth > 4 or r < 0.4:
            return rng.choice(leaves)
        if r < 0.7:
            return [make(depth + 1) for _ in range(rng.randrange(0, 5))]
        return {rng.choice(["a", "b", "verdict", "model", "ñ"]) + str(rng.randrange(9)): make(depth + 1)
                for _ in range(rng.randrange(0, 5))}

    for _ in range(300):
        doc = make(0)
        assert dumps_indented(doc) == _std(doc)


def test_what_json_refuses_it_refuses_alike() -> None:
    with pytest.raises(TypeError):
        dumps_indented({"a": {1, 2}})
    with pytest.raises(TypeError):
        dumps_indented({(1, 2): "tuple key"})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        dumps_indented({"loop": loop})


def test_non_finite_floats_are_null_and_the_text_is_strict_json() -> None:
    def refuse(name):
        raise ValueError(name)

    text = dumps_indented({"bandwidth": float("inf"), "x": [float("nan"), -float("inf"), 1e308]})
    assert json.loads(text, parse_constant=refuse) == {"bandwidth": None, "x": [None, None, 1e308]}

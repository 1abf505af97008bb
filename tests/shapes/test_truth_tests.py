"""Every truth test on a meta tensor answered by the policy and noted where it was made (issue 29): a model that
asserts, branches, loops and reads values from its tensors in each way Python and torch allow traces on meta, the
branches it takes decide its output's width, and each test is noted with its own line."""

from __future__ import annotations

import json
import pathlib
import re

import archviz
from archviz.shapes import trace_shapes
from archviz.shapes.policy import LOOP_LIMIT
from archviz.walk import walk

FIX = pathlib.Path(__file__).parent.parent / "fixtures" / "truthtests"
SOURCE = (FIX / "model.py").read_text().splitlines()
MARKS = {m.group(1): i for i, line in enumerate(SOURCE, 1) if (m := re.search(r"# truth: (\w+)", line))}


def test_every_truth_test_is_answered_and_noted_at_its_line():
    cfg = json.loads((FIX / "config.json").read_text())
    built = archviz.build(str(FIX / "model.py"), config=str(FIX / "config.json"))
    record = trace_shapes(built, walk(built))
    top = next(m for m in record.modules if m.path == "")
    # assert, if, equal and `and` hold: three concatenations of width dim; `not (a == 0).all()` is false because
    # the test it negates holds; bool() holds: one column cut
    assert top.calls[0].outputs[0] == ("B", "T", 4 * cfg["dim"] - 1)
    notes = top.assumptions
    assert set(MARKS) == {"assert", "if", "equal", "and", "not", "bool", "while", "item", "int", "float", "tolist"}
    for name, line in MARKS.items():
        assert any(n.endswith(f"(model.py:{line})") for n in notes), (name, line, notes)
    assert f"torch.equal of two tensors of one shape: assumed equal (model.py:{MARKS['equal']})" in notes
    assert (f"a boolean test on a tensor asked over {LOOP_LIMIT} times at one place in one call: assumed false "
            f"from then on (a loop on it ends) (model.py:{MARKS['while']})") in notes
    assert f"tolist() of a tensor with no known values: each assumed 0.0 (model.py:{MARKS['tolist']})" in notes

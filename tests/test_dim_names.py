"""Widths are named by the expression that built the module, read here from the fixture's own source."""
import json
import pathlib
import re

import archviz

FIX = pathlib.Path(__file__).parent / "fixtures" / "dsv41like"


def test_output_projection_widths_are_named_from_its_constructor():
    cfg = json.loads((FIX / "config.json").read_text())
    source = (FIX / "model.py").read_text()
    m = re.search(r"self\.wo_b = \w+\((?:self|args)\.(\w+) \* (?:self|args)\.(\w+), (?:self|args)\.(\w+)\)", source)
    assert m, "the fixture builds wo_b as Linear(self.<groups> * args.<rank>, self.<dim>)"
    record = archviz.load(str(FIX / "model.py"), config=str(FIX / "config.json"))
    dims = dict(record.module("layers.3.attn.wo_b").dims)
    assert dims == {cfg["o_groups"] * cfg["o_lora_rank"]: f"{m.group(1)} × {m.group(2)}", cfg["dim"]: m.group(3)}

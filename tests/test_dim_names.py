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


def test_widths_without_a_constructor_name_take_the_config_field_everywhere():
    """Fused experts get their widths from no constructor argument: --json and the terminal card name them by the
    config field they equal, as the site does (hidden_size for the model width, num_experts_per_tok for top-k)."""
    import os
    import subprocess
    import sys

    import transformers

    cfg = transformers.AutoConfig.for_model("qwen3_moe")
    path = "model.layers.0.mlp.experts"
    run = [sys.executable, "-m", "archviz.cli", "inspect", "hf:qwen3_moe", "--set", "num_hidden_layers=1", path]
    env = {**os.environ, "COLUMNS": "200"}
    p = subprocess.run(run + ["--json"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    names = json.loads(p.stdout)["dim_names"]
    assert names[str(cfg.hidden_size)] == "hidden_size" and names[str(cfg.num_experts_per_tok)] == "num_experts_per_tok"
    p = subprocess.run(run, capture_output=True, text=True, env=env)
    assert f"[B·T, {cfg.hidden_size} hidden_size]" in p.stdout, p.stdout

"""A config JSON whose keys are the model's own constructor arguments (no config class: `TwoTower(embed_dim,
image_resolution, ...)`), in the style of the two-tower image-text releases (tests/fixtures/firstcmds/twotower.py):
the class those keys fit is the model, with no class named; and a text tower that adds its whole position table
takes tokens of that one length, as a real CPU run of the same fixture does."""

from __future__ import annotations

import importlib.util
import json

import torch

from helpers import FIXTURES

import archviz

TWO = FIXTURES / "firstcmds" / "twotower.py"
CFG = FIXTURES / "firstcmds" / "twotower.json"


def _linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _stack(width: int, layers: int) -> int:
    block = 2 * 2 * width + (3 * width * width + 3 * width) + _linear(width, width) \
        + _linear(width, 4 * width) + _linear(4 * width, width)  # two LayerNorms, MultiheadAttention, the MLP
    return layers * block


def test_the_class_whose_arguments_the_config_names_is_the_model_and_its_fixed_context():
    c = json.loads(CFG.read_text())
    vw, p, res = c["vision_width"], c["vision_patch_size"], c["image_resolution"]
    tw = c["transformer_width"]
    visual = 3 * vw * p * p + vw + ((res // p) ** 2 + 1) * vw + _stack(vw, c["vision_layers"]) + 2 * vw \
        + vw * c["embed_dim"]
    text = _stack(tw, c["transformer_layers"]) + c["vocab_size"] * tw + c["context_length"] * tw + 2 * tw \
        + tw * c["embed_dim"]
    record = archviz.load(str(TWO), config=str(CFG), shapes=True)
    assert record.summary.parameters == visual + text + 1  # + logit_scale
    assert record.source.model_class.endswith(".TwoTower")
    # the tokens: as long as the position table the text tower adds whole
    info = record.extra("shapes")
    assert info["T"] == c["context_length"]
    assert any(n.startswith(f"T = {c['context_length']}:") and "positional_embedding" in n for n in info["notes"])
    spec = importlib.util.spec_from_file_location("firstcmds_twotower", TWO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.TwoTower(**c).eval()
    seen: dict[str, tuple] = {}
    model.ln_final.register_forward_hook(lambda m, a, out: seen.__setitem__("ln_final", tuple(out.shape)))
    B = 2
    with torch.no_grad():
        out = model(torch.zeros(B, 3, res, res), torch.zeros(B, c["context_length"], dtype=torch.long))
    index = record.index()
    real_ln = tuple("B" if i == 0 else d for i, d in enumerate(seen["ln_final"]))
    assert tuple(index["ln_final"].calls[0].outputs[0]) == tuple("T" if d == c["context_length"] else d
                                                                  for d in real_ln)
    assert tuple(index[""].calls[0].outputs[0]) == ("B", "B") and out.shape == (B, B)


def test_with_no_config_the_error_names_the_model_and_what_it_needs():
    """No class builds from its defaults: the one that makes weights and that no other class makes is named, with
    the arguments it requires, and the helpers beside it by name only."""
    import inspect

    from archviz.errors import SourceError

    spec = importlib.util.spec_from_file_location("firstcmds_twotower_sig", TWO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    needs = [p.name for p in list(inspect.signature(mod.TwoTower.__init__).parameters.values())[1:]
             if p.default is p.empty]
    try:
        archviz.build(str(TWO))
    except SourceError as e:
        said, hint = str(e), e.hint
    else:
        raise AssertionError("built with no config")
    assert "the model looks like TwoTower(embed_dim: int, " in said
    assert f"(no other class of the file makes it), which needs {', '.join(needs)} (others there: " in said
    assert "ImageTower" in said and "ImageTower(" not in said and f"{needs[0]}=VALUE" in hint


def test_a_fixed_context_is_costed_per_pass_with_no_decode():
    from archviz.cost.measure import measure
    from archviz.cost.options import CostOptions
    from archviz.cost.report import cost_report
    from archviz.sources.options import BuildOptions

    c = json.loads(CFG.read_text())
    r = cost_report(measure(str(TWO), BuildOptions(config=str(CFG)), CostOptions(seq=5)))
    res = c["image_resolution"]
    assert (r.unit, r.inputs, r.decode) == ("image", f"[1, 3, {res}, {res}], [1, {c['context_length']}]", None)

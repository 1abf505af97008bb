"""A YAML training config in the target/params convention (latent-diffusion codebases): the node whose `target` is
a class of the model file gives its keyword arguments, a merge key included (tests/fixtures/firstcmds/ldmstyle).
YAML is read as untrusted data: no tag builds an object, an alias bomb is refused before it is expanded, and
without PyYAML the line says how to install it. Counts derived here from the YAML's own numbers."""

from __future__ import annotations

import sys

import pytest

from helpers import FIXTURES

import archviz
from archviz.errors import SourceError

LDM = FIXTURES / "firstcmds" / "ldmstyle"
UNET = LDM / "tinyldm" / "modules" / "unet.py"
YAML = LDM / "configs" / "tiny.yaml"


def _conv(i: int, o: int, k: int) -> int:
    return i * o * k * k + o


def _linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def test_the_node_naming_the_files_class_gives_its_arguments():
    import yaml

    p = yaml.safe_load(YAML.read_text())["model"]["params"]["unet_config"]["params"]
    mc, ctx, emb = p["model_channels"], p["context_dim"], 4 * p["model_channels"]
    total = _linear(mc, emb) + _linear(emb, emb) + _conv(p["in_channels"], mc, 3)
    ch = mc
    for i, mult in enumerate(p["channel_mult"]):
        o = mc * mult
        total += _conv(ch, o, 3) + _linear(emb, o) + _conv(o, o, 3) + (_conv(ch, o, 1) if ch != o else 0)
        total += _linear(o, o, False) + 2 * _linear(ctx, o, False) + _linear(o, o)
        total += _conv(o, o, 3) if i < len(p["channel_mult"]) - 1 else 0
        ch = o
    total += _conv(ch, p["out_channels"], 3)
    built = archviz.build(str(UNET), config=str(YAML))
    assert sum(t.numel() for t in built.model.parameters()) == total
    assert type(built.model).__name__ == "TinyUNet" and built.model.out.out_channels == p["out_channels"]
    assert any("model.params.unet_config names tinyldm.modules.unet.TinyUNet" in n for n in built.notes)


def test_yaml_is_read_as_data(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"{k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcde", "bcdef")))
    with pytest.raises(SourceError, match="more than 200,000 values"):
        archviz.build(str(UNET), config=str(bomb))
    tagged = tmp_path / "tagged.yaml"
    tagged.write_text("model: !!python/object/apply:os.getcwd []\n")
    with pytest.raises(SourceError, match="not a readable YAML config"):
        archviz.build(str(UNET), config=str(tagged))
    monkeypatch.setitem(sys.modules, "yaml", None)  # PyYAML not installed
    with pytest.raises(SourceError) as e:
        archviz.build(str(UNET), config=str(YAML))
    assert "needs PyYAML" in str(e.value) and "pip install pyyaml" in e.value.hint


def test_a_conditioning_sized_by_its_config_and_costed_per_denoising_step():
    """`forward(x, timesteps=None, context=None)`: `context` is [B, T, context_dim] from the YAML's params, the pass is
    a denoising step over the latent its image_size and in_channels give; FLOPs as FlopCounterMode counts a real CPU
    run of the same model at the same sizes."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from archviz.cost.measure import measure
    from archviz.cost.options import CostOptions
    from archviz.cost.report import cost_report
    from archviz.sources.options import BuildOptions

    import yaml

    p = yaml.safe_load(YAML.read_text())["model"]["params"]["unet_config"]["params"]
    T = 16
    r = cost_report(measure(str(UNET), BuildOptions(config=str(YAML)), CostOptions(seq=T)))
    size = p["image_size"]
    assert (r.unit, r.inputs) == ("denoising step", f"[1, {p['in_channels']}, {size}, {size}], [1], "
                                                    f"[1, {T}, {p['context_dim']}]")
    model = archviz.build(str(UNET), config=str(YAML), device="cpu").model.eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(1, p["in_channels"], size, size), torch.zeros(1), torch.zeros(1, T, p["context_dim"]))
    assert r.prefill.flops == counter.get_total_flops()

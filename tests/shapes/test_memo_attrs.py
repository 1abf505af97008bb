"""The block memo answers a layer from another only where both forwards take the same path, whatever leads them
(issue 42, item 8): an attribute set from the layer's number in `__init__` (`self.use_lora = layer_id > 0`), an enum
on a child module (sliding or full attention), an attribute that only the model reads to pick the layer's mask, a
config list indexed by the layer number, a hook on one layer's sub-module. An
attribute that differs on every layer but that no forward reads (`init_scale`) does not part them. Expected figures:
FLOPs by formula from the fixtures' configs, and a FlopCounterMode run of the same fixture on the CPU."""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib.util
import json
import math

import pytest
import torch

from helpers import TESTS

ATTRS = TESTS / "fixtures" / "layerattrs"
MASKS = TESTS / "fixtures" / "layermasks"
CFG = json.loads((ATTRS / "config.json").read_text())
MASK_CFG = json.loads((MASKS / "config.json").read_text())
T = 16


def _load(folder, name):
    spec = importlib.util.spec_from_file_location(name, folder / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _attrs_flops() -> int:
    """Prefill FLOPs of the layerattrs fixture: 2 per multiply-add of every product."""
    d, h, r, W, V, n = (CFG[k] for k in ("dim", "hidden", "lora_rank", "window", "vocab_size", "n_layers"))
    sliding = [i for i in range(n) if i % 2 == 0]  # AttnKind.SLIDING: scores within chunks of W positions
    per_layer = 2 * T * (4 * d * d + 2 * d * h)  # wq wk wv wo, up down
    attention = sum(2 * 2 * T * (W if i in sliding else T) * d for i in range(n))  # q·k and p·v, all heads
    lora = (n - 1) * 2 * T * 2 * d * r  # every layer but layer 0 (use_lora = layer_id > 0)
    return n * per_layer + attention + lora + 2 * T * d * V


def _cost(archviz_cli, folder, *more):
    p = archviz_cli("cost", folder / "model.py", "-c", folder / "config.json", "--seq", T, "--json", *more)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["prefill"]


@pytest.mark.parametrize("more", [(), ("--set", "note_init=true"), ("--every-block",)])
def test_prefill_flops_by_formula(archviz_cli, more):
    assert _cost(archviz_cli, ATTRS, *more)["flops"] == _attrs_flops()


def test_flops_as_a_cpu_run_counts_them(archviz_cli):
    """The same fixture run for real on the CPU under torch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    mod = _load(ATTRS, "layerattrs_model")
    model = mod.Transformer(mod.ModelArgs(**CFG))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, T, dtype=torch.long))
    assert counter.get_total_flops() == _attrs_flops()


def _runs(overrides) -> str:
    from archviz.pipeline import records_for
    from archviz.pipeline.options import PassOptions
    from archviz.sources import BuildOptions

    record = records_for(str(ATTRS / "model.py"), BuildOptions(config=str(ATTRS / "config.json"),
                                                                overrides=overrides), PassOptions(shapes=True, seq=T))
    return " ".join(record.extra("shapes")["notes"])


def test_one_run_per_distinct_path_unread_attributes_aside():
    # paths: layer 0 (sliding, no LoRA), layer 1 (full, LoRA), layer 2 (sliding, LoRA); 3, 4, 5 as 1, 2, 1 --
    # init_scale, different on every layer, is read by no forward; twice, each pass with its own memo
    for _ in range(2):
        notes = _runs((("note_init", True),))
        assert f"{CFG['n_layers'] - 3} calls of repeated blocks" in notes, notes


def test_a_mask_picked_by_an_attribute_only_the_model_reads(archviz_cli):
    d, V, n, W = (MASK_CFG[k] for k in ("dim", "vocab_size", "n_layers", "window"))
    causal = T * (T + 1) // 2  # positions each mask keeps, of T·T
    band = sum(min(i + 1, W) for i in range(T))
    scores = 2 * 2 * T * T * d  # q·k and p·v, as written
    written = n * (2 * T * 3 * d * d + scores) + 2 * T * d * V
    attended = n * 2 * T * 3 * d * d + 2 * T * d * V + sum(
        scores * (band if i % 2 else causal) // (T * T) for i in range(n))
    for more in ((), ("--every-block",)):
        prefill = _cost(archviz_cli, MASKS, *more)
        assert (prefill["flops"], prefill["attended_flops"]) == (written, attended)


class _Kind(enum.Enum):
    A = 1
    B = 2


@dataclasses.dataclass
class _Spec:
    window: int | None
    kinds: tuple


def test_same_compares_what_a_forward_can_read():
    from archviz.shapes.attrreads import same

    def make(scale):
        return lambda x: x * scale

    assert same(_Kind.A, _Kind.A) and not same(_Kind.A, _Kind.B)
    assert same(_Spec(4, ("a", 1)), _Spec(4, ("a", 1))) and not same(_Spec(4, ("a",)), _Spec(None, ("a",)))
    assert same(make(2.0), make(2.0)) and not same(make(2.0), make(3.0))
    assert same(functools.partial(max, 1), functools.partial(max, 1))
    assert not same(functools.partial(max, 1), functools.partial(max, 2))
    assert same(math.nan, math.nan) and not same(1, 1.0) and not same(True, 1)
    assert same(torch.ones(3), torch.ones(3)) and not same(torch.ones(3), torch.zeros(3))
    assert not same([1, 2], [1, 2, 3]) and same({"a": [1]}, {"a": [1]})


def test_a_config_list_indexed_by_the_layer_number(archviz_cli):
    """`self.args.windows[self.layer_id]`: the number is read by C code (no decision noted), so each number is run
    as its own path; the FLOPs are those of each layer's own window."""
    folder = TESTS / "fixtures" / "layerindex"
    cfg = json.loads((folder / "config.json").read_text())
    d, V = cfg["dim"], cfg["vocab_size"]
    attention = sum(2 * 2 * T * (w or T) * d for w in cfg["windows"])
    expected = len(cfg["windows"]) * 2 * T * 3 * d * d + attention + 2 * T * d * V
    assert _cost(archviz_cli, folder)["flops"] == expected


def test_a_hook_on_one_layers_sub_module():
    """A forward hook registered on one layer's sub-module runs inside that layer's forward: the layer is not
    answered from another without it. The hook adds one product of hidden × hidden per token."""
    import archviz
    from archviz.cost.measure import _pass
    from archviz.walk import walk

    built = archviz.build(str(ATTRS / "model.py"), config=str(ATTRS / "config.json"))
    h = CFG["hidden"]
    built.model.layers[3].up.register_forward_hook(lambda m, i, o: o + o @ o.new_empty(h, h))
    record = walk(built)
    for memo in (True, False):
        flops = sum(e[1] for e in _pass(built, record, batch=1, seq=T, memo=memo)[1].events)
        assert flops == _attrs_flops() + 2 * T * h * h, memo


def test_a_module_read_whole_leaves_torchs_own_and_the_tracked_numbers():
    from archviz.shapes.attrreads import WHOLE, held
    from archviz.shapes.layerpaths import Log, track

    m = torch.nn.Linear(2, 3)
    m.layer_id, m.window = track(3, "n", Log()), 4
    assert held(m, WHOLE) == {"in_features": 2, "out_features": 3, "window": 4}

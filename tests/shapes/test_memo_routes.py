"""The block memo sees per-layer reads by every route (issue 42, item 8): `vars(self)[...]`, `self.__dict__[...]`,
`getattr(self, f"scale_{i}", None)` of an attribute only some layers hold, a class default some layers override, a
module-level list indexed by `self.layer_id`, a module-level dict keyed by `id(self)`, a module-level object each
layer reads and sets for the next. In the fixture the layers of
`extra_layers` do one more product (dim × dim per token, twice on the getattr route where the scale is applied
that way), layer 0 never: answered from layer 0 they would be counted low. Expected FLOPs by formula from the
fixture's config, and a FlopCounterMode run of the same fixture on the CPU."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from helpers import TESTS

FOLDER = TESTS / "fixtures" / "layerroutes"
CFG = json.loads((FOLDER / "config.json").read_text())
T = 16
ROUTES = ("vars", "dict", "getattr", "classattr", "global", "id", "turns")


def _formula(route: str = "vars") -> int:
    """2 FLOPs per multiply-add: up and down on every layer, `extra` on the extra layers, the head."""
    d, h, V, n, extra = (CFG[k] for k in ("dim", "hidden", "vocab_size", "n_layers", "extra_layers"))
    n_extra = n // 2 if route == "turns" else len(extra)  # turns: the odd layers
    return n * 2 * T * 2 * d * h + n_extra * 2 * T * d * d + 2 * T * d * V


def _flops(route: str) -> tuple[int, int, list[str]]:
    """(memoised FLOPs, every block run's FLOPs, the memoised pass's notes) of the fixture on `route`."""
    import archviz
    from archviz.cost.measure import _pass
    from archviz.walk import walk

    built = archviz.build(str(FOLDER / "model.py"), config=str(FOLDER / "config.json"), overrides={"route": route})
    record = walk(built)
    (traced, memoised), every = (_pass(built, record, batch=1, seq=T, memo=memo)[:2] for memo in (True, False))
    flops = [sum(e[1] for e in counted.events) for counted in (memoised, every[1])]
    return flops[0], flops[1], traced.extra("shapes")["notes"]


@pytest.mark.parametrize("route", ROUTES)
def test_memo_equals_every_block_and_the_formula(route):
    memoised, every, notes = _flops(route)
    assert memoised == every == _formula(route)
    if route == "turns":  # layers 2.. answered from 0 and 1, the slot set as each would have set it
        assert f"{CFG['n_layers'] - 2} calls of repeated blocks" in " ".join(notes), notes


@pytest.mark.parametrize("route", ["getattr", "global", "turns"])
def test_flops_as_a_cpu_run_counts_them(route):
    from torch.utils.flop_counter import FlopCounterMode

    mod = _module(FOLDER / "model.py", "layerroutes_model")
    model = mod.Transformer(mod.ModelArgs(**{**CFG, "route": route}))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, T, dtype=torch.long))
    assert counter.get_total_flops() == _formula(route)


def test_a_block_keyed_by_id_is_run_every_time_and_says_why():
    notes = " ".join(_flops("id")[2])
    assert f"{CFG['n_layers']} repeated blocks run every time" in notes, notes
    assert "id() in IdKeyedBlock._extra, model.py:" in notes, notes


_CODE = """import torch

COUNT = [0]
TABLE = {"a": 1}


def helper(x):
    COUNT[0] += 1
    return x


class Counting(torch.nn.Module):
    def forward(self, x):
        return helper(torch.add(x, TABLE["a"]))


class Plain(torch.nn.Module):
    def forward(self, x):
        return torch.add(x, TABLE["a"])
"""


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_what_code_reads_outside_its_modules(tmp_path):
    """codereads: written state and id() make a class opaque; torch.add and reading a module-level table do not;
    a module-level list the code subscripts is `indexed`; a helper function of the same file is followed."""
    from archviz.shapes.codereads import code_reads

    mod = _module(FOLDER / "model.py", "layerroutes_model")
    assert code_reads([mod.IdKeyedBlock]).opaque.startswith("id() in IdKeyedBlock._extra")
    assert code_reads([mod.VarsBlock, mod.Block]).opaque is None
    found = code_reads([mod.GlobalListBlock])
    assert found.opaque is None and any(v is mod.EXTRA for v in found.indexed)
    (tmp_path / "counting.py").write_text(_CODE)
    mod = _module(tmp_path / "counting.py", "counting_model")
    assert code_reads([mod.Counting]).opaque.startswith("`COUNT[0]` written in helper, counting.py:8")
    assert code_reads([mod.Plain]).opaque is None

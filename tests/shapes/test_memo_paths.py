"""The block memo answers a layer from another only where both forwards take the same path (issue 42, item 8): the
fixture's layers are alike in structure, but layer 0 skips its LoRA (`if self.layer_id == 0:`) and every third layer
adds an MLP (`if layer_idx % 3 == 2:`, its number passed as an argument). Expected figures: the FLOPs by formula from
the config, the modules called from hooks on a real CPU run of the same fixture."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from helpers import TESTS

FIX = TESTS / "data" / "layerbranch"
CFG = json.loads((FIX / "config.json").read_text())
T = 8


def _real_called() -> set[str]:
    spec = importlib.util.spec_from_file_location("layerbranch_model", FIX / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.Transformer(mod.ModelArgs(**CFG))
    called: set[str] = set()
    for name, m in model.named_modules():
        m.register_forward_hook(lambda *_, name=name: called.add(name))
    with torch.no_grad():
        model(torch.zeros(1, T, dtype=torch.long))
    return called


@pytest.fixture(scope="module")
def memo_record():
    from archviz.pipeline import records_for
    from archviz.pipeline.options import PassOptions
    from archviz.sources import BuildOptions

    return records_for(str(FIX / "model.py"), BuildOptions(config=str(FIX / "config.json")),
                       PassOptions(shapes=True, seq=T))


def test_modules_called_as_on_a_real_run(memo_record):
    real = _real_called()
    assert "layers.1.attn.lora_a" in real and "layers.0.attn.lora_a" not in real  # the fixture does branch
    assert {m.path for m in memo_record.modules if m.called and m.path} == real - {""}


def test_one_run_per_distinct_path(memo_record):
    # paths: layer 0 (no LoRA), layers 1, 4 (LoRA), layers 2, 5 (LoRA and the extra MLP), 3 and 6 as 1 and 4
    notes = " ".join(memo_record.extra("shapes")["notes"])
    assert f"{CFG['n_layers'] - 3} calls of repeated blocks" in notes, notes


def test_prefill_flops_by_formula(archviz_cli):
    d, h, r, V, n = CFG["dim"], CFG["hidden"], CFG["lora_rank"], CFG["vocab_size"], CFG["n_layers"]
    lora_layers = n - 1
    extra_layers = sum(1 for i in range(n) if i % 3 == 2)
    weights = n * (d * d + 2 * d * h) + lora_layers * 2 * d * r + extra_layers * d * d + d * V
    p = archviz_cli("cost", FIX / "model.py", "-c", FIX / "config.json", "--seq", T, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["prefill"]["flops"] == 2 * T * weights


def test_decisions_replay_on_other_numbers():
    """What a forward decides from a layer number replays on another's: membership in a list, arithmetic then a
    comparison, truth; a value the code reads whole (a hash, a float made from it) holds only for that value."""
    from archviz.shapes.layerpaths import Log, holds, track

    def decisions(number: int, use) -> tuple:
        log = Log()
        log.running = 1
        use(track(number, "n", log))
        return tuple(log.decisions)

    lora_layers = [0, 3]
    member = decisions(5, lambda n: n in lora_layers)
    assert [holds(member, lambda _: v) for v in range(7)] == [v not in lora_layers for v in range(7)]
    parity = decisions(2, lambda n: bool(n % 3 == 2) and not n)
    assert [holds(parity, lambda _: v) for v in range(6)] == [False, False, True, False, False, True]
    whole = decisions(4, lambda n: ({4: "a"}[n], 1 / (n + 1)))
    assert [holds(whole, lambda _: v) for v in range(6)] == [v == 4 for v in range(6)]

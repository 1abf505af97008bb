"""Decode cost of a recurrent model whose forward takes an un-annotated step object (`inference_params=None`) that
only its generate makes, in a sibling module (tests/fixtures/statecache, issue 42 item 7): the object is found by
data flow (made there, passed into the model's call by position), made as generate makes it with the offset generate
advances set to the context, and the step counted equals torch's FlopCounterMode on a real CPU run of the same step;
its state is of fixed size, so the step's FLOPs do not grow with the context. The same model behind a forward that
returns its state and takes it back (`logits, memory = model(tokens, memory)` in a generate loop) gets the same
step: a fill given none, then one token given what it returned."""

from __future__ import annotations

import json
import sys

import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers import TESTS

FIX = TESTS / "fixtures" / "statecache"


def _cost(cli, context: int, file: str = "model.py") -> dict:
    p = cli("cost", FIX / file, "-c", FIX / "config.json", "--seq", 4, "--context", context, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _real_step_flops(context: int) -> int:
    sys.path.insert(0, str(FIX.parent))
    try:
        from statecache.generation import StepParams
        from statecache.model import RecurrentConfig, RecurrentLM
    finally:
        sys.path.remove(str(FIX.parent))
    torch.manual_seed(0)
    model = RecurrentLM(RecurrentConfig(**json.loads((FIX / "config.json").read_text()))).eval()
    params = StepParams(max_seqlen=context + 1, max_batch_size=1)
    ids = torch.randint(0, 64, (1, context))
    with torch.no_grad():
        model(ids, params)
        params.seqlen_offset = context
        with FlopCounterMode(display=False) as fc:
            model(ids[:, -1:], params)
    return fc.get_total_flops()


def test_a_step_object_made_by_generate_is_found_by_data_flow_and_counted(archviz_cli):
    short, long = _cost(archviz_cli, 6), _cost(archviz_cli, 40)
    real = _real_step_flops(6)
    assert real > 0 and _real_step_flops(40) == real  # fixed-size state: the real step does not grow either
    assert short["decode"]["flops"] == real
    assert long["decode"]["flops"] == real
    assert any("StepParams" in n and ".seqlen_offset = 6" in n for n in short["notes"]), short["notes"]
    # its allocate_inference_cache was called when built (as for a model that keeps what it makes), but the step ran
    # with the object generate makes: no note says the figures came from what that call made
    assert not any("allocate_inference_cache" in n for n in short["notes"]), short["notes"]
    c = json.loads((FIX / "config.json").read_text())
    assert short["kv"]["at_context"] == c["n_layer"] * c["expand"] * c["d_model"] * (c["d_conv"] + c["d_state"]) * 4
    assert short["kv"]["per_token"] == 0


def test_a_state_the_forward_returns_and_generate_feeds_back_is_fed_back(archviz_cli):
    out = _cost(archviz_cli, 6, "fedback.py")
    assert out["decode"]["flops"] == _real_step_flops(6)
    assert any("memory (returned by it and fed back" in n for n in out["notes"]), out["notes"]
    c = json.loads((FIX / "config.json").read_text())
    d_inner = c["expand"] * c["d_model"]
    assert out["kv"]["at_context"] == c["n_layer"] * d_inner * (c["d_conv"] + c["d_state"]) * 4  # float32 states


def test_a_forward_with_nothing_to_feed_back_reads_no_project_file(monkeypatch):
    """`nn.Sequential.forward(input)` takes no argument that defaults to None, so no loop can feed one back: its
    project (torch itself, 400 of whose files took ~4 CPU-s to parse at each decode step) is not read. A forward
    that has one is still searched (the fixture above)."""
    from archviz.cost import cache_object

    read: list[str] = []
    monkeypatch.setattr(cache_object, "_project_files", lambda cls: read.append(cls.__name__) or [])
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 16))
    assert cache_object.fed_back_argument(model) is None and read == []

    class Stateful(torch.nn.Module):
        def forward(self, tokens, memory=None):
            return tokens, memory

    assert cache_object.fed_back_argument(Stateful()) is None and read == ["Stateful"]

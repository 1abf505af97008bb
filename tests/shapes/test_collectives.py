"""torch.distributed collectives called with no process group (issue 29): a reference model that broadcasts,
all-reduces, gathers and reduce-scatters unconditionally traces on meta at world size 1 and as any rank of
`--world-size N`, each collective noted where the code made it; at world size 1 its shapes are those of a real run
on the CPU in a real one-process gloo group."""

from __future__ import annotations

import datetime
import json
import pathlib

import pytest
import torch
import torch.distributed as dist

import archviz
from archviz.probe import real as probe_real
from archviz.shapes import trace_shapes
from archviz.sources import BuildOptions
from archviz.sources.dispatch import build
from archviz.walk import walk

FIX = pathlib.Path(__file__).parent.parent / "fixtures" / "collectives"
MODEL, CONFIG = str(FIX / "model.py"), str(FIX / "config.json")
SOURCE = (FIX / "model.py").read_text().splitlines()


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SOURCE, 1) if text in line)


def _concrete(dims: tuple, B: int, T: int) -> tuple:
    return tuple({"B": B, "T": T}.get(d, d) if isinstance(d, str) else d for d in dims)


@pytest.mark.parametrize("world,rank", [(1, 0), (2, 1), (4, 3)])
def test_unconditional_collectives_answered_per_rank(world, rank):
    cfg = json.loads((FIX / "config.json").read_text())
    built = archviz.build(MODEL, config=CONFIG, world_size=world, rank=rank)
    record = trace_shapes(built, walk(built))
    info = record.extra("shapes")
    B, T = info["B"], info["T"]
    by = {m.path: m for m in record.modules}

    def out(path):
        return _concrete(by[path].calls[0].outputs[0], B, T)

    assert out("embed") == (B, T, cfg["dim"])  # the partial embedding all-reduced: full width
    assert out("layers.0.w1") == (B, T, cfg["inter_dim"] // world)  # column-parallel: this rank's share
    assert out("layers.0.w2") == (B, T, cfg["dim"])
    assert out("layers.0.indexer") == (B, T, cfg["index_topk"])
    assert out("head") == (B, cfg["vocab_size"] // world)
    assert out("") == (B, cfg["vocab_size"])  # the gathered logits: every rank's share
    indexer = " ".join(by["layers.0.indexer"].assumptions)
    where = f"model.py:{_line('dist.broadcast(agreed')}"
    assert f"dist.broadcast with no process group: answered as rank {rank} of {world}" in indexer and where in indexer
    assert f"model.py:{_line('assert torch.all(chosen == agreed)')}" in indexer  # the assert's truth test, noted
    top = " ".join(by[""].assumptions)
    for name in ("all_gather(parts", "all_gather_into_tensor(", "dist.barrier()"):
        assert f"model.py:{_line(name)}" in top
    assert f"dist.all_reduce with no process group: answered as rank {rank} of {world}" in \
        " ".join(by["embed"].assumptions)


def test_world_size_1_shapes_agree_with_a_real_gloo_run():
    """The same model run for real on the CPU in a one-process gloo group (in-memory store): every module's output
    shape equals the meta pass's at the pass's B and T."""
    built = archviz.build(MODEL, config=CONFIG)
    record = trace_shapes(built, walk(built))
    B, T = record.extra("shapes")["B"], record.extra("shapes")["T"]
    meta = {m.path: _concrete(m.calls[0].outputs[0], B, T) for m in record.modules if m.calls}

    real = build(MODEL, BuildOptions(config=CONFIG, device="cpu"))
    probe_real.init_random(real.model, real.config)
    shapes: dict[str, tuple] = {}

    def hook(path):
        def record(module, args, output):
            shapes.setdefault(path, tuple(output.shape))
        return record

    hooks = [m.register_forward_hook(hook(p)) for p, m in real.model.named_modules()]
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=30))
    try:
        with torch.no_grad():
            real.model(torch.randint(0, real.config["vocab_size"], (B, T)))
    finally:
        dist.destroy_process_group()
        for h in hooks:
            h.remove()
    assert shapes and shapes == meta

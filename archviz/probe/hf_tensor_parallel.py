"""One rank of a transformers model's tensor-parallel probe: transformers' own tensor-parallel loading
(`from_pretrained(..., tp_plan="auto")`, its model's `base_model_tp_plan`) on torch.distributed, gloo on CPU.

Rank 0 writes the model (built from its config, at the sizes given with overrides, random weights from the seed) with
`save_pretrained` to a folder every rank reads. Each rank loads it twice: whole (the single-process run) and with
the plan, so transformers cuts and places the rank's part of every tensor (DTensors); each tensor's local shape is
compared with what its plan entry gives (colwise: rows / N; rowwise: the weight's columns / N; embedding_rowwise:
rows / N), and every module's output with the single-process run's, as `archviz.probe.tensor_parallel` does.
transformers needs `accelerate` installed to load with a tp_plan."""

from __future__ import annotations

import re
import resource
import time
from typing import Any

import torch

from .tensor_parallel import Sharded, OutputCapture
from ..errors import option


def _plan_entry(path: str, plan: dict[str, str]) -> str | None:
    for pattern, style in plan.items():
        if re.fullmatch(re.escape(pattern).replace(r"\*", r"\d+"), path):
            return style
    return None


def planned_shape(name: str, full: tuple[int, ...], style: str | None, world_size: int) -> tuple[int, ...] | None:
    """A tensor's shape on one rank as its module's plan entry splits it; None for a style not checked here."""
    shape = list(full)
    leaf = name.rsplit(".", 1)[-1]
    if style is None or style in ("replicated", "replicate"):
        return tuple(shape)
    if style in ("colwise", "colwise_gather_output", "embedding_rowwise"):
        shape[0] //= world_size
    elif style == "rowwise":
        if leaf == "weight" and len(shape) == 2:
            shape[1] //= world_size
    else:
        return None
    return tuple(shape)


def hf_rank_probe(rank: int, world_size: int, spec: str, build_options: Any, options: Any, tolerance: float,
                  folder: str) -> dict[str, Any]:
    """One rank: the single-process run, the tp_plan load, shapes against the plan, outputs against the single run
    (`build_options`' overrides and remote-code trust, `options`' seed, batch and seq)."""
    import torch.distributed as dist

    from ..sources import BuildOptions
    from ..sources.dispatch import build

    start = time.perf_counter()
    seed = int(options.seed)
    meta = build(spec, BuildOptions(overrides=tuple(build_options.overrides),
                                    trust_remote_code=bool(build_options.trust_remote_code)))
    cls, config = type(meta.model), meta.model.config
    meta = None
    if rank == 0:
        torch.manual_seed(seed)
        cls(config).to(torch.float32).save_pretrained(folder)
    dist.barrier()
    B, T = int(options.batch or 2), int(options.seq or 7)
    vocab = int(getattr(config, "vocab_size", 2) or 2)
    ids = torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed + 1))

    single = cls.from_pretrained(folder, dtype=torch.float32).eval()
    checker = Sharded(rank, world_size, tolerance)
    checker.single = OutputCapture(single)
    with torch.no_grad():
        single(input_ids=ids, use_cache=False)
    checker.single.remove()
    full = {n: tuple(p.shape) for n, p in single.named_parameters()}
    single = None

    model = cls.from_pretrained(folder, dtype=torch.float32, tp_plan="auto").eval()
    plan = dict(getattr(model, "_tp_plan", None) or {})
    unchecked: list[str] = []
    for name, p in model.named_parameters():
        local = tuple((p.to_local() if hasattr(p, "to_local") else p).shape)
        style = _plan_entry(name.rsplit(".", 1)[0], plan)
        want = planned_shape(name, full.get(name, tuple(p.shape)), style, world_size)
        checker.tensors_checked += 1
        checker.shapes[name] = list(local)
        if want is None:
            unchecked.append(f"{name} ({style})")
        elif want != local:
            checker.tensor_problems.append(f"rank {rank}: {name}: plan {style!r} gives {list(want)}, the rank holds "
                                           f"{list(local)}")
    checker.sharded = OutputCapture(model)
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
    values, compared, final = checker.compare()
    ok = not values and not checker.tensor_problems and bool(final) and bool(plan)
    return {
        "rank": rank,
        "ok": ok,
        "modules_compared": 0,
        "modules_confirmed": 0,
        "shape_disagreements": [] if plan else [f"rank {rank}: {cls.__name__} has no tp_plan"],
        "tensors_checked": checker.tensors_checked,
        "tensor_disagreements": checker.tensor_problems,
        "tensor_shapes": checker.shapes,
        "tp_plan": plan,
        "not_checked_against_the_plan": unchecked,
        "weights_not_cut": [],
        "outputs_compared": compared,
        "largest_agreeing_error": checker.worst,
        "value_mismatches": [v.as_json() for v in values],
        "value_lines": [v.line() for v in values],
        "output": final,
        "B": B,
        "T": T,
        "reduced": {"method": "none", "reductions": []},
        "notes": [f"transformers' tp_plan loading: the model at the sizes given (cut it with {option('set')})"],
        "seconds": round(time.perf_counter() - start, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


__all__ = ["hf_rank_probe", "planned_shape"]

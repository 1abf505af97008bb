"""One forward of the model on meta under a tracer (the policy, stubs, imports and warnings in place), and the
pass's mode: eval (or training) set once for every pass and each module's own mode put back after the last."""

from __future__ import annotations

import contextlib
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

from ..errors import ShapeError
from ..records import ModelRecord
from ..sources import Built, stubs
from ..sources.cuda_queries import cuda_answered
from ..sources.meta import meta_methods_answered, warnings_noted
from .collectives import collectives_answered
from .flex import flex_on_meta
from .imports import ImportsInForward
from .inputs import cache_off
from .memo import BlockMemo
from .policy import DispatchPolicy, TolistPolicy
from .recurrent import recurrent_on_meta
from .tracer import Tracer


@contextlib.contextmanager
def pass_mode(model: torch.nn.Module, train: bool) -> Iterator[None]:
    """The model in training mode (`train`) or eval for the passes run inside; every module's own mode put back
    afterwards. A model already in that mode (a build is in eval) is left alone: `train()` and the mode's restore
    are a Module.__setattr__ per module, a second of a 60,000-module model's pass if done for nothing."""
    from ..walk.walker import preorder  # the modules as named_modules() lists them, without its recursive generators

    train = bool(train)
    modes = [(m, m.training) for _, m in preorder(model)]
    if any(mode is not train for _, mode in modes):
        model.train(train)
    try:
        yield
    finally:
        for m, mode in modes:
            if m.training is not mode:
                m.training = mode


@dataclass(frozen=True)
class ForwardRun:
    """How one forward runs under its tracer: with the block memo or not (`memo`), the notes its warnings go to,
    `progress` (calls done, total), an op `observer` (archviz.cost counts FLOPs with it), and `like`: the memo of an
    earlier pass over the same record, whose block kinds it reuses."""
    memo: bool
    notes: list[str]
    progress: Callable[[int, int], None] | None = None
    observer: Callable[..., None] | None = None
    like: BlockMemo | None = None


def run_forward(built: Built, record: ModelRecord, tracer: Tracer, inputs: tuple[tuple, dict],
                registry: stubs.StubRegistry, run: ForwardRun,
                steps: Sequence[Callable[[], tuple[tuple, dict]]] = ()) -> tuple[BlockMemo | None, BaseException | None]:
    """One forward of the model on meta under `tracer`, in the mode `pass_mode` set (then one more for each of
    `steps`, which returns its inputs, the memo emptied before it): (the block memo, the error the model raised or
    None). `inputs`: its (args, kwargs)."""
    args, kwargs = inputs
    memo, notes, progress, observer, like = run.memo, run.notes, run.progress, run.observer, run.like
    # Reference code runs under the default dtype its launcher sets (DeepSeek's generate.py: bfloat16).
    compute = getattr(torch, built.default_dtype) if built.default_dtype else None
    experts: BlockMemo | None = None
    previous = stubs.set_call_handler(tracer.stub_call)
    saved_dtype = torch.get_default_dtype()
    error: BaseException | None = None
    try:
        tracer.install()
        tracer.progress = progress
        experts = BlockMemo(tracer, record, like) if memo else None
        if compute is not None:
            torch.set_default_dtype(compute)

        def warned(text: str) -> None:
            notes.append(f"warning from {(tracer.stack[-1] if tracer.stack else '') or 'the model'}: {text}")

        with warnings_noted(warned), torch.no_grad(), torch.device("meta"), \
                DispatchPolicy(tracer.policy, observer), TolistPolicy(tracer.policy), meta_methods_answered(), \
                collectives_answered(built.world_size, built.rank, tracer.assume), \
                cuda_answered(lambda what, how: tracer.assume(f"{what}: {how}")), \
                cache_off(built.model) if built.kind == "hf" else nullcontext(), flex_on_meta(), \
                recurrent_on_meta(tracer.stub_call), \
                ImportsInForward(registry, built.roots if built.kind != "hf" else (),
                                 lambda name: tracer.assume(f"import {name} failed (not installed): stubbed")):
            built.model(*args, **kwargs)
            for step in steps:
                if experts is not None:
                    experts.memo.clear()
                more_args, more_kwargs = step()
                built.model(*more_args, **more_kwargs)
    except ShapeError:
        raise
    except Exception as e:  # noqa: BLE001
        error = e
    finally:
        if experts is not None:
            experts.remove()
        stubs.set_call_handler(previous)
        tracer.remove()
        torch.set_default_dtype(saved_dtype)
    return experts, error


__all__ = ["ForwardRun", "pass_mode", "run_forward"]

"""The pipeline's own small frozen objects: `PassOptions` (the meta forward pass) and `Feedback` (how a run shows
what it does). `BuildOptions` and `CostOptions` are their stages' own (archviz.sources, archviz.cost)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

from ..errors import ArchvizError, option


@dataclass(frozen=True)
class PassOptions:
    """The meta forward pass (archviz.shapes): whether it runs, and how."""

    shapes: bool = False  # run it: in/out shapes, call sites, each forward as it ran
    batch: int | None = None  # B (default: a value no width of the model equals)
    seq: int | None = None  # T
    inputs: tuple[str, ...] = ()  # input specs, beside or replacing the default token ids
    kernel_rules: str | None = None  # a .py file of @archviz.kernels.shape_rule declarations
    every_block: bool = False  # run every repeated block instead of answering identical ones from the first
    train: bool = False  # training mode instead of eval

    def flags(self) -> dict[str, Any]:
        """The pass's options by their option tokens (archviz.errors.option; `shapes` aside: whether the pass runs)."""
        return {option("batch"): self.batch, option("seq"): self.seq, option("kernel-rules"): self.kernel_rules,
                option("input"): list(self.inputs), option("every-block"): self.every_block,
                option("train"): self.train}


def given(flags: dict[str, Any]) -> list[str]:
    """The options (token -> value) that were given."""
    return [name for name, value in flags.items() if value not in (None, False, [], ())]


def refuse_pass_options(passes: PassOptions) -> None:
    """Options of the meta forward pass given to a run without it would be ignored: say so instead."""
    named = given(passes.flags())
    if named:
        raise ArchvizError(f"{', '.join(named)} {'applies' if len(named) == 1 else 'apply'} to the meta forward pass, "
                           "which this run skips",
                           hint=f"run the pass (walk {option('shapes')}; inspect and build run it unless "
                                f"{option('no-shapes')}), or drop "
                                f"{', '.join(named)}")


def _no_step(label: str) -> ContextManager[None]:
    return nullcontext()


def _no_progress(label: str) -> ContextManager[Callable[[int, int], None]]:
    return nullcontext(lambda done, total: None)


def _no_note(text: str) -> None:
    return None


@dataclass(frozen=True)
class Feedback:
    """How a run shows what it does: `step(label)` around a step with no count (the build), `progress(label)` around
    one that counts (yields callback(done, total)), `note(text)` for what the caller should know (a cache entry that
    could not be read), `warning(text)` for what a run did without (a site's model without shapes or cost). The
    default shows nothing; the CLI gives its spinner, progress bars and stderr."""

    step: Callable[[str], ContextManager[None]] = _no_step
    progress: Callable[[str], ContextManager[Callable[[int, int], None]]] = _no_progress
    note: Callable[[str], None] = _no_note
    warning: Callable[[str], None] = _no_note


QUIET = Feedback()

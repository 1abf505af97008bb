"""`CostOptions`: what `measure` counts at, the cost stage's input beside the `BuildOptions` of the build."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CostOptions:
    batch: int = 1  # sequences B (prefill, decode, KV cache)
    seq: int | None = None  # prefill tokens T (None: SEQ_DEFAULT, or the model's limit where shorter)
    context: int | None = None  # the decode step's context L (None: CONTEXT_DEFAULT, or the model's limit)
    contexts: tuple[int, ...] | str = ()  # more lengths a decode step runs at; "auto": the standard ones
    every_block: bool = False  # run every repeated block instead of answering identical ones from the first
    inputs: tuple[str, ...] = ()  # input specs for the prefill pass
    kernel_rules: str | None = None  # a .py file of shape rules (and FLOPs) loaded before the passes

"""A one-process torch.distributed group, for model code that insists on one while it is built.

Code written for a launcher (torchrun) asks the group it expects: fairscale's model-parallel layers assert "model
parallel group is not initialized", `dist.get_world_size()` raises "Default process group has not been initialized".
archviz answers such code as its launcher would at world size 1: a gloo group of one process over an in-memory store
(no rendezvous port, no file; gloo's own socket on the loopback interface only, processes/loopback), and, where fairscale is installed, its model-parallel groups of size 1. The group
stays for the rest of the process (the forward pass asks it again); the build notes it.
"""

from __future__ import annotations

import sys
from typing import Callable, TypeVar

from ..processes.loopback import on_loopback

T = TypeVar("T")

_ASKS = ("process group has not been initialized", "model parallel group is not initialized",
         "default process group", "init_process_group")


def needs_process_group(exc: BaseException) -> bool:
    """`exc` says the code wanted an initialized process group (and none was started by archviz yet)."""
    text = str(exc).lower()
    return any(a in text for a in _ASKS)


def start_process_group() -> str:
    """Start a one-process gloo group (and fairscale's model-parallel groups of one) if none is; return the note."""
    import torch.distributed as dist

    started = []
    if not dist.is_initialized():
        with on_loopback():  # gloo listens for its pairs even in a group of one: on loopback alone
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        started.append("a one-process gloo group (in-memory store, listening on loopback only)")
    fs = sys.modules.get("fairscale.nn.model_parallel.initialize")
    if fs is not None and not getattr(fs, "__archviz_stub__", False) and not fs.model_parallel_is_initialized():
        fs.initialize_model_parallel(1)
        started.append("fairscale's model-parallel groups of size 1")
    what = " and ".join(started) or "the process group it asked for"
    return f"the model asked for an initialized process group while built: archviz started {what}, as a launcher " \
           "would at world size 1"


def constructed(construct: Callable[[], T]) -> tuple[T, list[str]]:
    """`construct()`, and no note; where it fails asking for a process group, a group started and `construct()`
    once more, with the note that says so."""
    try:
        return construct(), []
    except Exception as e:  # noqa: BLE001 - the model's code raised: only a request for a group is answered here
        if not needs_process_group(e):
            raise
    note = start_process_group()
    return construct(), [note]


__all__ = ["constructed", "needs_process_group", "start_process_group"]

"""Functions the processes tests run as torch.distributed ranks (importable by name in each rank, through the
PYTHONPATH the test sets: the user's own environment, which archviz hands down)."""

from __future__ import annotations

import os
import time


def listening_sockets() -> list[str]:
    """Every listening TCP socket of this network namespace, as "address:port" (from /proc, in hex as there)."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        out += [f.split()[1] for f in lines if f.split()[3] == "0A"]  # state 0A: LISTEN
    return out


def listening(rank: int, world_size: int) -> list[str]:
    """A collective first (every rank's gloo pairs are up), then the sockets that listen."""
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == world_size
    return listening_sockets()


def spin(rank: int, world_size: int) -> None:
    """Never returns: writes its pid to $SPIN_PIDS/rank{rank} and sleeps."""
    with open(os.path.join(os.environ["SPIN_PIDS"], f"rank{rank}"), "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)

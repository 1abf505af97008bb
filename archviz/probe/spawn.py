"""N processes under torch.distributed, started and cleaned up here: each rank joins one process group (gloo on CPU,
nccl when every rank has a GPU) through a FileStore in a private temporary folder (no network port is opened for the
rendezvous; gloo's own pairs talk over the loopback interface), runs `fn(rank, world_size, *args)` and hands back
what it returns (pickled) or the error it raised. A rank that dies, raises, or outlives the timeout ends the run:
the others are killed and joined, so no process is left behind.

The ranks' stdout and stderr go to a log file per rank (the model's prints never reach archviz's stdout); the tail of
a failed rank's log comes back with its error. Each rank's TMPDIR is a folder inside the run's own, so what a rank
leaves there (its probe's work folder, when it was killed before removing it) goes with the run's folder."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

from ..errors import EXIT_USAGE, ArchvizError, option
from ..processes.environment import child_command, child_env
from ..processes.loopback import GLOO_IFNAME, loopback_interface
from ..processes.owner import check_count, die_with_parent, owned


@dataclasses.dataclass
class RankFailure:
    rank: int
    error: str  # "Type: message", or how the process ended
    exit_code: int  # the exit code archviz should end with: 2 for the rank's bad-input errors, else 1
    log: str  # the tail of the rank's stdout and stderr

    def line(self) -> str:
        return f"rank {self.rank}: {self.error}"


class RanksFailed(ArchvizError):
    """A rank raised, died or timed out; `failures` says which and why."""

    def __init__(self, failures: list[RankFailure], message: str, hint: str = "") -> None:
        code = max((f.exit_code for f in failures), default=1)
        super().__init__(message, hint=hint, exit_code=code)
        self.failures = failures


def backend_for(device: str, world_size: int) -> str:
    """gloo on CPU; nccl when the ranks run on CUDA and there is a GPU for every rank."""
    if device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < world_size:
            raise ArchvizError(f"{option('world-size')} {world_size} {option('device')} {device}: only "
                               f"{torch.cuda.device_count()} "
                               "GPUs here, one per rank is needed", hint=f"use {option('device')} cpu (gloo)",
                               exit_code=EXIT_USAGE)
        return "nccl"
    return "gloo"


def run_ranks(fn: Callable[..., Any], args: tuple, world_size: int, *, timeout: float, backend: str = "gloo",
              device: str = "cpu") -> list[Any]:
    """Run `fn(rank, world_size, *args)` in `world_size` spawned processes joined in one process group; return each
    rank's result, in rank order. Raises `RanksFailed` when a rank raises, dies or the run outlives `timeout`
    seconds; every process has ended by the time this returns or raises."""
    check_count(world_size, "ranks")
    with tempfile.TemporaryDirectory(prefix="archviz-ranks-", ignore_cleanup_errors=True) as tmp:
        with open(os.path.join(tmp, "job.pickle"), "wb") as f:
            pickle.dump((fn, args, world_size, backend, device, timeout), f)
        procs: list[Any] = []
        timed_out = False
        # the ranks' groups listen on the loopback interface alone, whatever the user's environment names
        env = child_env({GLOO_IFNAME: loopback_interface()})
        with owned() as children:
            for rank in range(world_size):
                # the rank's temporary files (its probe's work folder) inside this folder, removed with it whatever
                # becomes of the rank: a killed one never runs its own clean-up
                rank_tmp = os.path.join(tmp, f"rank{rank}.tmp")
                os.mkdir(rank_tmp, 0o700)
                # a fresh interpreter per rank (not multiprocessing's spawn, which re-imports the caller's __main__),
                # with archviz's import path (processes.environment: never the current folder first)
                procs.append(children.start(child_command(__name__, tmp, str(rank)), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            env=dict(env, TMPDIR=rank_tmp, TEMP=rank_tmp, TMP=rank_tmp)))
            deadline = time.monotonic() + timeout
            while any(p.poll() is None for p in procs):
                if any(p.poll() not in (None, 0) for p in procs):
                    break  # a rank failed: the others would wait for it in a collective
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(0.05)
            killed = {r for r, p in enumerate(procs) if p.poll() is None}
        # leaving `owned()` killed every rank still running (and anything a rank started) and waited for it
        results: list[Any] = []
        failures: list[RankFailure] = []
        logs = [_tail(os.path.join(tmp, f"rank{rank}.log")) for rank in range(world_size)]
        for rank, p in enumerate(procs):
            outcome = _read(os.path.join(tmp, f"rank{rank}.pickle"))
            log = logs[rank]
            if outcome is not None and outcome.get("ok") and p.returncode == 0:
                results.append(outcome["result"])
            elif outcome is not None and not outcome.get("ok"):
                failures.append(RankFailure(rank, outcome["error"], outcome.get("exit_code", 1), log))
            elif rank not in killed:
                how = f"signal {-p.returncode}" if p.returncode < 0 else f"exit code {p.returncode}"
                failures.append(RankFailure(rank, f"the process died ({how})", 1, log))
        if failures:
            # a rank that died first: the others' errors (a peer's connection closed) follow from it
            failures.sort(key=lambda f: (not f.error.startswith("the process died"), f.rank))
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            raise RanksFailed(failures, f"the run under torch.distributed failed: {failures[0].line()}{more}",
                              hint=f"every rank was stopped; {option('debug')} prints each failed rank's output")
        if timed_out:
            raise RanksFailed([RankFailure(r, "still running at the timeout", 1, logs[r]) for r in sorted(killed)],
                              f"the run under torch.distributed did not end within "
                              f"{timeout:g} s", hint=f"raise {option('timeout')}; every rank was stopped")
        return results


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None


def _tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _rank_main(tmp: str, rank: int) -> None:
    """One rank: its output to its log, the process group joined, `fn` run, its result or error pickled."""
    die_with_parent()
    log = os.open(os.path.join(tmp, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ[GLOO_IFNAME] = loopback_interface()  # gloo's pairs on the loopback interface only (processes/loopback)
    code = 0
    outcome: dict[str, Any]
    try:
        import datetime

        with open(os.path.join(tmp, "job.pickle"), "rb") as f:
            fn, args, world_size, backend, device, timeout = pickle.load(f)
        import faulthandler

        faulthandler.dump_traceback_later(max(timeout - 2.0, 1.0))  # where a rank waits, in its log, at the timeout

        # what torchrun sets: code that sizes its parallelism from the environment (transformers' tp_size) reads it
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                          LOCAL_WORLD_SIZE=str(world_size))
        import torch.distributed as dist

        if device.startswith("cuda"):
            import torch

            torch.cuda.set_device(rank)
        store = dist.FileStore(os.path.join(tmp, "store"), world_size)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout))
        try:
            outcome = {"ok": True, "result": fn(rank, world_size, *args)}
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - whatever the rank raised goes back to the parent
        code = 1
        text = e.line() if isinstance(e, ArchvizError) else f"{type(e).__name__}: {e}"
        outcome = {"ok": False, "error": text[:2000], "traceback": traceback.format_exc()[-8000:],
                   "exit_code": getattr(e, "exit_code", 1) if isinstance(e, ArchvizError) else 1}
        print(outcome["traceback"], file=sys.stderr)
    path = os.path.join(tmp, f"rank{rank}.pickle")
    with open(path + ".tmp", "wb") as f:
        pickle.dump(outcome, f)
    os.replace(path + ".tmp", path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _rank_main(sys.argv[1], int(sys.argv[2]))

__all__ = ["RankFailure", "RanksFailed", "backend_for", "run_ranks"]

"""One owner for every process archviz starts: each child leads a process group of its own, and whenever the
command ends (normally, on an error, on Ctrl-C, on SIGTERM or SIGHUP to archviz) every process in each child's
group is killed and waited for before archviz exits, so the temporary folders the callers made go with it.

- `owned()` is the block the children live in: `children.start(cmd)` starts one in a new session (its own process
  group, away from the terminal's: a Ctrl-C reaches archviz alone, and archviz ends them); processes a child forks
  (the gallery server's one per model) stay in that group and end with it. SIGTERM and SIGHUP to archviz inside the
  block raise `Signalled`, which the command line ends with 128 + the signal's number (143 for SIGTERM).
- `die_with_parent()`, called first thing in a child: where archviz itself is killed outright (SIGKILL, which no
  handler sees), the kernel ends the child too (Linux's parent-death signal).
- `MAX_CHILDREN`: archviz starts at most this many processes for one command; more is refused before any starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ..errors import EXIT_USAGE, ArchvizError

MAX_CHILDREN = 64
OWNER_ENV = "ARCHVIZ_OWNER_PID"
_ENDING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)


class Signalled(BaseException):
    """archviz got SIGTERM or SIGHUP while it owned children (a BaseException: no `except Exception` holds it up)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def line(self) -> str:
        return f"terminated by {signal.Signals(self.signum).name}; every process archviz started was ended"


def check_count(n: int, what: str) -> None:
    """Refuse `n` processes for `what` (e.g. "ranks") above `MAX_CHILDREN`, before any is started."""
    if n > MAX_CHILDREN:
        raise ArchvizError(f"{n:,} {what}: archviz starts at most {MAX_CHILDREN} processes for one command",
                           hint=f"ask for {MAX_CHILDREN} or fewer ({os.cpu_count() or 1} cores here)",
                           exit_code=EXIT_USAGE)


class Children:
    """The processes started in one `owned()` block."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[Any]] = []

    def start(self, cmd: Sequence[str], *, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[Any]:
        """`subprocess.Popen(cmd, ...)` as the leader of a new process group, owned by this block."""
        env = dict(os.environ if env is None else env)
        env[OWNER_ENV] = str(os.getpid())
        p = subprocess.Popen(list(cmd), env=env, start_new_session=True, close_fds=True, **popen)
        self._procs.append(p)
        return p

    def end(self) -> None:
        """Kill every process of every child's group (those still running, and what their leaders forked), then
        wait for each leader."""
        for p in self._procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self._procs:
            try:
                p.wait()
            except BaseException:  # noqa: BLE001 - a second signal while waiting: the kill is already sent
                pass


def _raise_signalled(signum: int, frame: Any) -> None:
    raise Signalled(signum)


@contextmanager
def owned() -> Iterator[Children]:
    """The block every child process of archviz lives in: see the module doc."""
    children = Children()
    saved: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _ENDING:
            old = signal.getsignal(sig)
            if old == signal.SIG_IGN or old is None:
                continue  # a SIGHUP ignored (nohup): archviz goes on, as the user asked
            saved[sig] = old
            signal.signal(sig, _raise_signalled)
    try:
        yield children
    finally:
        try:
            children.end()
        finally:
            for sig, old in saved.items():
                signal.signal(sig, old)


def die_with_parent(parent: int | None = None) -> None:
    """In a child: end when its parent (archviz, or `parent`) ends, even by SIGKILL (Linux; elsewhere a no-op).
    Where the parent is gone already, end now."""
    expected = parent if parent is not None else int(os.environ.get(OWNER_ENV) or 0)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if expected and os.getppid() != expected:
        os._exit(1)


__all__ = ["MAX_CHILDREN", "Children", "Signalled", "check_count", "die_with_parent", "owned"]

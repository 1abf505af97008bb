"""Deadlines for blocking network calls: each request, and the whole read, end in time whatever the server does.

An HTTP client's timeout is per socket operation: a server that sends one byte every two seconds never trips a
10-second read timeout, and a thread blocked in ``recv`` cannot be stopped from outside. So the calls run in daemon
worker threads, and the calling thread only waits — on a queue, with a timeout, which Ctrl-C interrupts at once —
and gives up when

- a request has run longer than ``per_request`` seconds (each worker says which request it is in),
- the whole read has run longer than ``overall`` seconds, or
- any call failed (the other calls are cancelled: no new request starts, running ones stop at their next chunk).

A worker left blocked in a socket is a daemon thread: it neither delays the caller nor keeps the process alive.

Pure library code: nothing here prints.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from archviz.errors import CheckpointError
from ..errors import option

__all__ = ["Cancelled", "Watch", "run_all"]

T = TypeVar("T")
_POLL_S = 0.25  # how often the waiting thread looks at the clocks (and so how late a deadline can be noticed)


class Cancelled(Exception):
    """Raised in a worker whose read was given up (another call failed, or a deadline passed)."""


class Watch:
    """Clocks shared by the waiting thread and the workers: the overall deadline, and the request each worker is
    in with its start time."""

    def __init__(self, per_request: float, overall: float, what: str = "reading the checkpoint") -> None:
        self.per_request = per_request
        self.overall = overall
        self.what = what
        self.started = time.monotonic()
        self.cancel = threading.Event()
        self._lock = threading.Lock()
        self._current: dict[int, tuple[str, float]] = {}

    def begin(self, where: str) -> None:
        """A worker starts a request about ``where``; raises :class:`Cancelled` if the read was given up."""
        if self.cancel.is_set():
            raise Cancelled(where)
        with self._lock:
            self._current[threading.get_ident()] = (where, time.monotonic())

    def end(self) -> None:
        with self._lock:
            self._current.pop(threading.get_ident(), None)

    def check(self) -> None:
        """In a worker, between chunks of an answer: :class:`Cancelled` once the read was given up, a
        :class:`CheckpointError` once this worker's own request ran past its deadline."""
        if self.cancel.is_set():
            raise Cancelled("cancelled")
        with self._lock:
            mine = self._current.get(threading.get_ident())
        if mine is not None and time.monotonic() - mine[1] > self.per_request:
            raise self._late_request(mine[0])
        if time.monotonic() - self.started > self.overall:
            raise self._late_overall()

    def overdue(self) -> CheckpointError | None:
        """The error to raise if a request or the whole read is past its deadline (in the waiting thread)."""
        now = time.monotonic()
        if now - self.started > self.overall:
            return self._late_overall()
        with self._lock:
            late = [w for w, t in self._current.values() if now - t > self.per_request]
        return self._late_request(min(late)) if late else None

    def _late_request(self, where: str) -> CheckpointError:
        return CheckpointError(f"{where}: no complete answer within {self.per_request:g} s",
                               hint=f"retry later, or raise {option('timeout')}; check HF_ENDPOINT and your network")

    def _late_overall(self) -> CheckpointError:
        return CheckpointError(f"{self.what}: not done within the overall deadline of {self.overall:g} s",
                               hint=f"retry later, or raise {option('timeout')}; check HF_ENDPOINT and your network")


def run_all(calls: Iterable[tuple[str, Callable[[], T]]], watch: Watch, *, workers: int,
            done: Callable[[str, T], None] | None = None) -> dict[str, T]:
    """Run ``calls`` (``(key, fn)``) on up to ``workers`` daemon threads; return ``{key: result}``.

    The first failure is raised here as soon as it happens (the rest are cancelled), as is a passed deadline
    (:meth:`Watch.overdue`) or a ``KeyboardInterrupt`` in this thread. ``done(key, result)`` runs here, in this
    thread, after each call."""
    todo = list(calls)
    results: dict[str, T] = {}
    if not todo:
        return results
    pending = iter(todo)
    take = threading.Lock()
    answers: queue.SimpleQueue[tuple[str, bool, Any]] = queue.SimpleQueue()

    def work() -> None:
        while not watch.cancel.is_set():
            with take:
                item = next(pending, None)
            if item is None:
                return
            key, fn = item
            try:
                answers.put((key, True, fn()))
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread, which raises it
                answers.put((key, False, e))
            finally:
                watch.end()

    for i in range(max(1, min(workers, len(todo)))):
        threading.Thread(target=work, name=f"archviz-fetch-{i}", daemon=True).start()
    try:
        while len(results) < len(todo):
            try:
                key, ok, value = answers.get(timeout=_POLL_S)
            except queue.Empty:
                late = watch.overdue()
                if late is not None:
                    raise late from None
                continue
            if not ok:
                if isinstance(value, Cancelled):  # only after the read was given up; say why
                    raise watch.overdue() or CheckpointError(f"{watch.what}: cancelled") from None
                raise value
            results[key] = value
            if done is not None:
                done(key, value)
    finally:
        if len(results) < len(todo):
            watch.cancel.set()
    return results

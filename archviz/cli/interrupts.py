"""Whose KeyboardInterrupt is it: the user's Ctrl-C (exit 130), or one the model's code raised itself (exit 2, one
line, like any other failure of the model's code)?

A command's first step installs `on_sigint` for SIGINT (where SIGINT is not ignored): it notes that a Ctrl-C came,
then raises KeyboardInterrupt as Python's own handler does. A KeyboardInterrupt that reaches the command with no
SIGINT noted was raised by code, not by the user.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

_received: list[bool] = []


def on_sigint(signum: int, frame: Any) -> None:
    _received.append(True)
    raise KeyboardInterrupt


def install() -> None:
    """Note every SIGINT from now on (in the main thread, where SIGINT has Python's default handler)."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_sigint)


def from_code() -> bool:
    """No SIGINT came since `install()`: a KeyboardInterrupt now was raised by code."""
    return not _received


__all__ = ["from_code", "install", "on_sigint"]

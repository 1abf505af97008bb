"""While the model's own code runs (its import, its build, its forward): it cannot end the process or write to stdout.

A factory or model.py is code, and archviz runs it by design; but a `check` in CI must never report 0 or 1 without a
verdict, and JSON output must stay JSON. So, inside `model_code()`:
- `sys.exit(n)` (a `SystemExit` out of the model's code) and `os._exit(n)` become one error line and exit 2;
- whatever the code prints, from Python or from C (file descriptor 1), goes to stderr.

And inside `importing(name)`, around the import of a model file or factory module: an exit (`sys.exit`, argparse
refusing the arguments of archviz's own command line) or a `KeyboardInterrupt` the code raised itself (not a Ctrl-C)
is one line, "the model code exited (status N) while importing model.py"; what the code printed before it (argparse's
usage lines) is held back, its last line kept for the hint. An import, or a build (`time_limit`), that never ends (a
loop, a wait on a server) ends after ARCHVIZ_MODEL_TIMEOUT seconds (default 300) with one line naming where it was.

Why in-process and not a child process: the records hold nothing a child could not send back, but the build's
live model is what the walk, the meta pass and the probe read, and a child would have to rebuild it for each. A model
that kills its own process by other means (a signal, a segfault) still ends archviz with that signal's status, which
is never 0 or 1.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import SourceError, one_line


class _ModelExit(BaseException):
    """os._exit called by the model's code (a BaseException: the model's own `except Exception` cannot eat it)."""

    def __init__(self, code: Any) -> None:
        super().__init__(code)
        self.code = code


def _refused_exit(code: Any = 0) -> None:
    raise _ModelExit(code)


@contextmanager
def model_code(what: str = "building the model") -> Iterator[None]:
    real_exit = os._exit
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    saved_fd = None
    try:
        saved_fd = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        saved_fd = None
    saved_stdout = sys.stdout
    sys.stdout = sys.stderr
    os._exit = _refused_exit
    try:
        yield
    except SystemExit as e:
        raise SourceError(f"the model's code called sys.exit({e.code!r}) while archviz was {what}",
                          hint="archviz runs the model's code in its own process: remove the exit from the path "
                               "that imports, builds or runs the model (guard it with if __name__ == '__main__')"
                          ) from None
    except _ModelExit as e:
        raise SourceError(f"the model's code called os._exit({e.code!r}) while archviz was {what}",
                          hint="remove the exit from the path that imports, builds or runs the model") from None
    finally:
        os._exit = real_exit
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        sys.stdout = saved_stdout
        if saved_fd is not None:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)


def _exit_status(code: Any) -> int:
    """The status `sys.exit(code)` ends a process with: None 0, an int itself, anything else (a message) 1."""
    return 0 if code is None else code if isinstance(code, int) else 1


MODEL_TIMEOUT_ENV = "ARCHVIZ_MODEL_TIMEOUT"
DEFAULT_MODEL_TIMEOUT = 300.0  # seconds a model's code may take to import, and again to build


class _Stuck(BaseException):
    """The code outlived its deadline (a BaseException: the model's own `except Exception` cannot eat it)."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


def _on_alarm(signum: int, frame: Any) -> None:
    import linecache

    where = "an unknown place"
    if frame is not None:
        code = frame.f_code
        text = linecache.getline(code.co_filename, frame.f_lineno).strip()
        where = f"{os.path.basename(code.co_filename)}:{frame.f_lineno} ({code.co_name})" + (
            f": {one_line(text)[:120]}" if text else "")
    raise _Stuck(where)


def _deadline() -> tuple[float, Any]:
    """(seconds, the SIGALRM handler to put back) for code run under a deadline; (seconds, None) where no timer can
    be set (another thread, no SIGALRM) or one is already running (the outer block's deadline holds)."""
    try:
        limit = float(os.environ.get(MODEL_TIMEOUT_ENV) or DEFAULT_MODEL_TIMEOUT)
    except ValueError:
        limit = DEFAULT_MODEL_TIMEOUT
    if not (limit > 0 and limit < 1e9) or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0]:
        return limit, None
    before = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    return limit, before


@contextmanager
def time_limit(what: str) -> Iterator[None]:
    """The model's code run in this block (its import, its constructor) ends after ARCHVIZ_MODEL_TIMEOUT seconds
    (default 300) with one line naming the file, line and function it was at: a loop or a wait that never ends
    hung the command with no limit."""
    limit, alarm = _deadline()
    try:
        yield
    except _Stuck as e:
        raise SourceError(f"{what} did not end within {limit:g} s: it was at {e.where}",
                          hint=f"archviz waits {MODEL_TIMEOUT_ENV} seconds (default {DEFAULT_MODEL_TIMEOUT:g}) for a "
                               "model's code to import and to build; set it higher where it is slow, not stuck"
                          ) from None
    finally:
        if alarm is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, alarm)


@contextmanager
def importing(name: str) -> Iterator[None]:
    """Run the import of the user's file or module `name` (model.py, pkg.mod) in this block: see the module doc."""
    held = io.StringIO()
    saved = sys.stdout, sys.stderr
    ctrl_c: list[bool] = []  # a real Ctrl-C came while the code ran (its KeyboardInterrupt is the user's)
    installed = False
    old_handler: Any = None
    if threading.current_thread() is threading.main_thread():
        old_handler = signal.getsignal(signal.SIGINT)

        def on_sigint(signum: int, frame: Any) -> None:
            if old_handler == signal.SIG_IGN:
                return
            ctrl_c.append(True)
            if callable(old_handler):
                old_handler(signum, frame)
            else:
                raise KeyboardInterrupt

        if old_handler is not None:  # None: a handler not set from Python, which could not be put back
            try:
                signal.signal(signal.SIGINT, on_sigint)
                installed = True
            except (ValueError, OSError):
                pass
    sys.stdout = sys.stderr = held
    try:
        with time_limit(f"importing {name}"):
            yield
    except SystemExit as e:
        printed = held.getvalue()
        held = io.StringIO()
        said = [ln.strip() for ln in printed.splitlines() if ln.strip()]
        if isinstance(e.code, str) and e.code.strip():
            said.append(e.code.strip())
        hint = "guard the exit (or the argparse call) with if __name__ == '__main__' so that importing runs none"
        if said:
            hint = f"it said: {one_line(said[-1])[:200]}; {hint}"
        raise SourceError(f"the model code exited (status {_exit_status(e.code)}) while importing {name}",
                          hint=hint) from None
    except KeyboardInterrupt:
        if ctrl_c or not installed:  # the user's Ctrl-C (or no telling): theirs, as it always was
            raise
        raise SourceError(f"the model code exited (KeyboardInterrupt, raised by the code, not a Ctrl-C) while "
                          f"importing {name}", hint="remove the raise from the path that imports the model") from None
    finally:
        sys.stdout, sys.stderr = saved
        if installed:
            signal.signal(signal.SIGINT, old_handler)
        rest = held.getvalue()
        if rest:
            try:
                sys.stderr.write(rest)
            except (OSError, ValueError):
                pass

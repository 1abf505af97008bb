"""While the model's own code runs (its import, its build, its forward): it cannot end the process or write to stdout.

A factory or model.py is code, and archviz runs it by design; but a `check` in CI must never report 0 or 1 without a
verdict, and `--json` must stay JSON. So, inside `model_code()`:
- `sys.exit(n)` (a `SystemExit` out of the model's code) and `os._exit(n)` become one error line and exit 2;
- whatever the code prints, from Python or from C (file descriptor 1), goes to stderr.

Why in-process and not a child process: the records hold nothing a child could not send back, but the build's
live model is what the walk, the meta pass and the probe read, and a child would have to rebuild it for each. A model
that kills its own process by other means (a signal, a segfault) still ends archviz with that signal's status, which
is never 0 or 1.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import SourceError


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

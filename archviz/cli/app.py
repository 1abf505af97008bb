"""The typer application: its help, `--version`, and `main`, the console script's entry point.

Commands register themselves on `app` when their module is imported (see `archviz.cli`'s `__init__`).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from .common import flag, out

app = typer.Typer(
    name="archviz",
    help="Model-architecture introspection and exact parameter accounting for PyTorch models, built on meta.\n\n"
         "SOURCE is hf:<model_type>, a config.json or Hugging Face model folder, a reference model.py (with "
         "--config), or package.module:callable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if not value:
        return
    import importlib.metadata

    from .. import __version__

    parts = []
    for pkg in ("torch", "transformers", "safetensors"):
        try:
            parts.append(f"{pkg} {importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{pkg} not installed")
    out.print(f"archviz {__version__} ({', '.join(parts)})", highlight=False)
    raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, flag("--version", help="print the versions of archviz, torch, "
                                                                  "transformers and safetensors, and exit",
                                                callback=_version, is_eager=True)] = False) -> None:
    pass  # the help text is the app's


def main() -> None:
    # transformers logs about kernels while the meta pass runs models ("`selective_scan_fn` is falling back to its
    # reference PyTorch implementation ..."), though nothing runs for real on meta: keep its log to errors, unless
    # the user set a level or asked for --debug.
    if "--debug" not in sys.argv[1:]:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        app()
    except SystemExit as e:
        code = e.code
    else:
        code = 0
    _exit(code)


def _exit(code: object) -> None:
    """End the process as `sys.exit(code)` would, without the interpreter's teardown.

    The command's work is done and its outputs are written (atomically, closed) by now; what remains of a normal exit
    is freeing every object one by one (the records of a 60,000-module model, torch's modules: 0.05 s to seconds).
    What matters of the exit still happens: the atexit handlers (temporary folders' finalizers, logging, coverage),
    then stdout and stderr are flushed. With another thread still running, or a flush that fails, the normal exit
    runs instead (it waits for non-daemon threads, and reports the broken pipe as Python does)."""
    import atexit
    import threading

    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    elif code is None:
        code = 0
    elif not isinstance(code, int):
        code = 1
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code % 256)

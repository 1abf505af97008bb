"""The typer application: its help, `--version`, and `main`, the console script's entry point.

Commands register themselves on `app` when their module is imported (see `archviz.cli`'s `__init__`).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from typer.core import TyperGroup

from . import interrupts
from .common import out
from .options import flag

class _Commands(TyperGroup):
    """archviz's commands, whose options that take one value may be given once: click keeps the last of two
    silently, and `diff a/model.py b/model.py --config a.json --config b.json` compared both sides under b.json."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        _refuse_repeats(self, ctx, args)
        return super().parse_args(ctx, args)


def _refuse_repeats(group: TyperGroup, ctx: typer.Context, args: list[str]) -> None:
    """A usage error (exit 2) for a single-valued option of the command in `args` given twice."""
    name = next((a for a in args if not a.startswith("-")), None)
    command = group.get_command(ctx, name) if name else None
    if command is None:
        return
    options = [p for p in command.params if p.param_type_name == "option"]
    single = {o: p for p in options if not p.multiple and not p.count and not p.is_flag
              for o in p.opts + p.secondary_opts}
    seen: dict[str, str] = {}
    rest = iter(args[args.index(name) + 1:])
    for arg in rest:
        if arg == "--":
            break
        opt = arg.split("=", 1)[0] if arg.startswith("--") else arg[:2] if arg[:1] == "-" else None
        param = single.get(opt or "")
        if param is None:
            continue
        if opt == arg:  # the value is the next argument
            next(rest, None)
        if param.name in seen:
            fix = " (for two models: --config-a A.json --config-b B.json)" if opt == "--config" and \
                any("--config-a" in p.opts for p in options) else ""
            named = max(param.opts, key=len)
            forms = f" (as {seen[param.name]} and {opt})" if {seen[param.name], opt} != {named} else ""
            raise _USAGE_ERROR(f"{named} is given twice{forms}: it takes one value{fix}", ctx)
        seen[param.name] = opt


app = typer.Typer(
    cls=_Commands,
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
def _root(ctx: typer.Context,
          version: Annotated[bool, flag("--version", help="print the versions of archviz, torch, "
                                                                  "transformers and safetensors, and exit",
                                                callback=_version, is_eager=True)] = False) -> None:
    """The project file (`[tool.archviz]` in pyproject.toml, or archviz.toml) as the commands' defaults: the one
    place options are resolved before a command parses its own (its flags override the file)."""
    interrupts.install()  # a Ctrl-C from now on is told apart from a KeyboardInterrupt the model's code raises
    from .common import handled
    from .project import default_map

    argv = sys.argv[1:]
    with handled("--debug" in argv, wants_json(argv)):
        ctx.default_map = {**default_map(ctx.command.commands), **(ctx.default_map or {})}  # type: ignore[attr-defined]


def main() -> None:
    # transformers logs about kernels while the meta pass runs models ("`selective_scan_fn` is falling back to its
    # reference PyTorch implementation ..."), though nothing runs for real on meta: keep its log to errors, unless
    # the user set a level or asked for --debug.
    if "--debug" not in sys.argv[1:]:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        code = _run()
    except SystemExit as e:
        code = e.code
    _exit(code)


def _run() -> object:
    """Run the app; its exit code. With --json, a usage error (unknown option, missing argument, a value of the wrong
    type) is the same JSON error object on stdout as every other error, and one line on stderr."""
    if not wants_json(sys.argv[1:]):
        app()  # click's own usage errors (its boxed text, exit 2)
        return 0
    try:
        code = app(standalone_mode=False)
    except _CLICK_ERROR as e:
        code = e.exit_code
        _json_error(*_usage_message(e), code)
    except Exception as e:  # click's Abort (Ctrl-C at a prompt, EOF): it has no message of its own
        if type(e).__name__ != "Abort":
            raise
        code = 130
        _json_error("interrupted", None, code)
    return code if isinstance(code, int) else 0


def _exit(code: object) -> None:
    """End the process as `sys.exit(code)` would, without the interpreter's teardown.

    The command's work is done and its outputs are written (atomically, closed) by now; what remains of a normal exit
    is freeing every object one by one (the records of a 60,000-module model, torch's modules: 0.05 s to seconds).
    What matters of the exit still happens: the atexit handlers (temporary folders' finalizers, logging, coverage),
    then stdout and stderr are flushed. With another thread still running, or a flush that fails, the normal exit
    runs instead (it waits for non-daemon threads, and reports the broken pipe as Python does), except after a Ctrl-C
    (exit 130), which no thread may hold up."""
    import atexit
    import threading

    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    elif code is None:
        code = 0
    elif not isinstance(code, int):
        code = 1
    if threading.active_count() > 1 and code != 130:  # the user's Ctrl-C: a thread still reading (a hung server)
        sys.exit(code)  # must not hold the exit, so it ends here like the others
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code % 256)


# click's base of usage errors (typer may bundle its own click: found through the class typer exports)
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def wants_json(argv: list[str]) -> bool:
    """Whether the command line asks for JSON: `--json`, or `--format json` (`-f json`, `--format=json`)."""
    for i, arg in enumerate(argv):
        if arg == "--json" or arg == "--format=json":
            return True
        if arg in ("--format", "-f") and i + 1 < len(argv) and argv[i + 1].lower() == "json":
            return True
    return False


def _usage_message(e: Exception) -> tuple[str, str | None]:
    """A click error as (message, hint): what was wrong, and the command's --help to read."""
    message = e.format_message() if isinstance(e, _CLICK_ERROR) else str(e)
    ctx = getattr(e, "ctx", None)
    path = ctx.command_path if ctx is not None else "archviz"
    return f"{path}: {message}", f"see `{path} --help`"


def _json_error(message: str, hint: str | None, code: int) -> None:
    from rich.text import Text

    from ..errors import one_line
    from .common import emit_json, err

    line = one_line(f"{message} — {hint}" if hint else message)
    err.print(Text.assemble(("error:", "bold red"), f" {line}"), highlight=False, soft_wrap=True)
    emit_json({"error": one_line(message), "hint": one_line(hint) if hint else None, "exit_code": code})

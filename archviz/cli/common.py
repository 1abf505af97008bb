"""What every command shares: the consoles, error handling, progress, and loading a record (the options they share:
archviz.cli.options).

Only the `archviz.cli` package talks to the terminal; its modules hold one command family each."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import typer
from rich.console import Console, RenderHook
from rich.segment import Segment
from rich.text import Text

from ..errors import ArchvizError, ShapeError, one_line
from ..pipeline import Feedback, PassOptions, records_for
from ..files.sanitize import json_text, printable
from ..processes.owner import Signalled
from ..render.text import Labelled
from . import interrupts
from .flags import FLAGS, cli_bytes, cli_text
from ..sources.options import BuildOptions


def _escaped_lines(text: str) -> str:
    """`text` with every control character escaped (archviz.files.sanitize) but its line breaks, which stay breaks."""
    return "\n".join(map(printable, text.split("\n"))) if not text.isprintable() else text


class _Escaped:
    """A renderable whose text segments reach the terminal with their control characters escaped: the last guard,
    behind the renderers' own escaping (archviz.render.text), for any text from a data file that reached rich
    raw. Segments of rich's own controls (cursor moves of a progress bar) pass as they are."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: Any) -> Iterator[Segment]:
        for seg in console.render(self.renderable, options):
            if seg.control or seg.text.isprintable():
                yield seg
            else:
                yield Segment(_escaped_lines(seg.text), seg.style)


class _EscapeHook(RenderHook):
    def process_renderables(self, renderables: list[Any]) -> list[Any]:
        return [_Escaped(r) for r in renderables]


class _SafeConsole(Console):
    """A console that shows control characters in what it prints as escapes (strings before rich lays them out, so
    tables stay aligned; every segment again on the way out) and never reads rich markup or emoji codes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, emoji=False, **kwargs)
        self.push_render_hook(_EscapeHook())

    def render_str(self, text: str, **kwargs: Any) -> Text:  # str cells of tables, str printed as such
        return super().render_str(_escaped_lines(text), **kwargs)

    def _render_buffer(self, buffer: Any) -> str:  # everything this console writes: option tokens as the CLI's flags
        return cli_text(super()._render_buffer(buffer))


# Everything printed is data (module paths, file names, error lines that echo what the user typed): never rich markup
# ("[bold]") or emoji codes (hf:llama: read as ":llama:"), never a control character sent raw (an ESC sequence in a
# module name). Styles are given as Text styles.
out = _SafeConsole(soft_wrap=False)
err = _SafeConsole(stderr=True)


@contextmanager
def handled(debug: bool, json_: bool = False) -> Iterator[None]:
    """Turn archviz errors (and any crash) into one line on stderr and a distinct exit code; with `json_` (the
    command's --json) the same error is also written to stdout as JSON, `{"error", "hint", "exit_code"}`, so a
    script reading stdout gets a parseable answer either way."""
    try:
        yield
    except typer.Exit:
        raise
    except ArchvizError as e:
        if debug:
            e.words = FLAGS  # the traceback's line spells the flags too
            raise
        err.print(Text.assemble(("error:", "bold red"), f" {e.line()}"), highlight=False, soft_wrap=True)
        if json_:
            emit_json({"error": one_line(e.message), "hint": one_line(e.hint) if e.hint else None,
                       "exit_code": e.exit_code})
        raise typer.Exit(e.exit_code) from None
    except Signalled as e:  # SIGTERM or SIGHUP while archviz owned processes: every one of them ended
        err.print(e.line())
        if json_:
            emit_json({"error": "terminated", "hint": None, "exit_code": e.exit_code})
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        if interrupts.from_code() and not debug:  # raised by the model's code (no Ctrl-C came): its failure
            err.print(Text.assemble(("error:", "bold red"), " the model's code raised KeyboardInterrupt (not a "
                                    "Ctrl-C) — archviz cannot count past it; rerun with --debug to see where"),
                      highlight=False, soft_wrap=True)
            if json_:
                emit_json({"error": "the model's code raised KeyboardInterrupt (not a Ctrl-C)",
                           "hint": "rerun with --debug to see where", "exit_code": 2})
            raise typer.Exit(2) from None
        err.print("interrupted")
        if json_:
            emit_json({"error": "interrupted", "hint": None, "exit_code": 130})
        raise typer.Exit(130) from None
    except Exception as e:  # noqa: BLE001
        if debug:
            raise
        what = f"{type(e).__name__}: {one_line(str(e))}"
        err.print(Text.assemble(("internal error:", "bold red"), f" {what} — rerun with --debug and report it"),
                  highlight=False, soft_wrap=True)
        if json_:
            emit_json({"error": f"internal error: {what}", "hint": "rerun with --debug and report it",
                       "exit_code": 3})
        raise typer.Exit(3) from None


@contextmanager
def progress_bar(label: str, enabled: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr (only on a terminal); yields a callback(done, total)."""
    if not enabled or not err.is_terminal:
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as p:
        task = p.add_task(printable(label), total=None)  # a live display passes by the escaping hook

        def update(done: int, total: int) -> None:
            p.update(task, completed=done, total=total)

        yield update


@contextmanager
def spinner(label: str) -> Iterator[None]:
    if not err.is_terminal:
        yield
        return
    with err.status(Text(printable(label))):  # a live display passes by the escaping hook
        yield


# The project file's `set` table as --set texts (archviz.cli.project sets it before each command): under the
# command line's own --set, key by key.
PROJECT_SETS: list[str] = []


def overrides(sets: list[str] | None, flag: str = "--set") -> tuple[tuple[str, Any], ...]:
    """`--set` texts read (archviz.sources.options.check_overrides) into `BuildOptions.overrides`; for --set, the
    project file's values first, each key the command line gives replaced."""
    from ..sources.options import check_overrides

    if flag == "--set" and PROJECT_SETS:
        given = {text.split("=", 1)[0].strip() for text in sets or ()}
        sets = [t for t in PROJECT_SETS if t.split("=", 1)[0].strip() not in given] + list(sets or ())
    return tuple(check_overrides(sets, flag).items())


def note(text: str, label: str = "note: ") -> None:
    """A note (or a warning) on stderr, wrapped to the terminal's width (render.text.Labelled)."""
    err.print(Labelled(label, text))


# The pipeline's steps shown on stderr: a spinner around the build, bars around the walk and the pass, notes.
FEEDBACK = Feedback(step=spinner, progress=progress_bar, note=note)
NOTES = Feedback(note=note)  # notes only: inside a live display of the command's own (gallery's progress bar)


def load_record(source: str, build: BuildOptions, passes: PassOptions = PassOptions(), *, group: bool = True,
                names: str | None = None, cache: bool = True) -> Any:
    """`archviz.pipeline.records_for` with the terminal's feedback; a failed meta pass says --no-shapes skips it
    (the commands that run the pass here all have --no-shapes)."""
    try:
        return records_for(source, build, passes, group=group, names=names, cache=cache, feedback=FEEDBACK)
    except ShapeError as e:
        e.hint = f"{e.hint}; --no-shapes skips shapes" if e.hint else "--no-shapes skips shapes"
        raise


def emit_json(data: Any) -> None:
    from ..render.jsondump import dumps_indented  # json.dumps(data, indent=1, ensure_ascii=False), faster

    sys.stdout.write(cli_text(json_text(dumps_indented(data, 1))) + "\n")  # sanitize: C1, bidi as escapes


def write_output(path: str, data: bytes) -> None:
    """`-o`: via a temp file in the same folder, then moved into place: never a half-written output, and only ever
    over a regular file (archviz.files.outputs); `-o -`: to stdout."""
    from ..files.outputs import write_file

    sys.stdout.flush()
    write_file(path, cli_bytes(data), stdout=sys.stdout.buffer)


def atomic_write(path: str, text: str) -> None:
    """`text` written as `write_output` writes, UTF-8."""
    write_output(path, text.encode("utf-8"))


@contextmanager
def output_option(path: str | None, json_: bool = False) -> Iterator[None]:
    """A command's single-file `-o PATH`, checked before any work (archviz.files.outputs: a target it may not replace is
    refused); `-o -`: stdout carries that output alone, so the command's report goes to stderr while this lasts,
    and --json (stdout's too) is refused."""
    from ..files.outputs import STDOUT, check_file_target

    if path:
        check_file_target(path)
    if path != STDOUT:
        yield
        return
    if json_:
        raise ArchvizError("-o - and --json both write to stdout", hint="give -o a file, or drop --json")
    out.file = sys.stderr
    try:
        yield
    finally:
        out.file = None  # type: ignore[assignment]  # back to whatever sys.stdout is
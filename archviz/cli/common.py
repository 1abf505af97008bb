"""What every command shares: the consoles, the options, error handling, progress, and loading a record.

Only the `archviz.cli` package talks to the terminal; its modules hold one command family each."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Annotated, Any, Callable, Iterator, Optional

import typer
from rich.console import Console, RenderHook
from rich.segment import Segment
from rich.text import Text

from ..errors import ArchvizError, ShapeError, one_line
from ..files.sanitize import json_text, printable


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


# Everything printed is data (module paths, file names, error lines that echo what the user typed): never rich markup
# ("[bold]") or emoji codes (hf:llama: read as ":llama:"), never a control character sent raw (an ESC sequence in a
# module name). Styles are given as Text styles.
out = _SafeConsole(soft_wrap=False)
err = _SafeConsole(stderr=True)


def flag(*names: str, **kw: Any) -> Any:
    """A bool option: no value follows it, so its help shows no `<bool>` type."""
    return typer.Option(*names, metavar="", **kw)


# ---------------------------------------------------------------------------------------------------------------------
# Shared options

SourceArg = Annotated[str, typer.Argument(help="hf:<model_type> | config.json | model folder | model.py | "
                                               "package.module:callable")]
ConfigOpt = Annotated[Optional[str], typer.Option("--config", "-c", help="config.json of a reference model.py")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", help="override a config field (a factory: pass a keyword "
                                                   "argument): key=value, the value read as JSON (4, true, null, "
                                                   "[1, 2]), else a Python literal (None, True, False), else a "
                                                   "string (repeatable)")]
ModelClassOpt = Annotated[Optional[str], typer.Option("--model-class", help="reference: the top nn.Module class")]
ConfigClassOpt = Annotated[Optional[str], typer.Option("--config-class", help="reference: the class the config JSON "
                                                       "builds (default: the one the model's constructor takes)")]
TokenizerOpt = Annotated[Optional[str], typer.Option("--tokenizer", help="reference: tokenizer.json for "
                                                                        "constructors that take a tokenizer")]
WorldSizeOpt = Annotated[Optional[int], typer.Option("--world-size", help="reference: tensor-parallel world size "
                                                                         "(module global world_size)")]
RankOpt = Annotated[Optional[int], typer.Option("--rank", help="reference: tensor-parallel rank")]
TrustRemoteCodeOpt = Annotated[bool, flag("--trust-remote-code", help="transformers folder: import and run the "
                                                  ".py files its config.json's auto_map names (the model's own code) "
                                                  "instead of transformers' class")]
QuantizedOpt = Annotated[bool, flag("--quantized", help="transformers: lay the modules out as config.json's "
                                    "quantization_config says, as from_pretrained does on a GPU (fp8 weights with "
                                    "their scales), instead of the unquantized modules from_config builds")]
InputOpt = Annotated[Optional[list[str]], typer.Option("--input", help="a forward input for the meta pass, beside "
                                                     "the default token ids or replacing the one of its name: "
                                                     "name=B,T,512[:dtype], name=int:5, name=none (repeatable); "
                                                     "name a dim H=224, or H alone to take the default input's "
                                                     "size")]
KernelRulesOpt = Annotated[Optional[str], typer.Option("--kernel-rules", help="a .py file declaring shape rules "
                                                     "with @archviz.kernels.shape_rule(...)")]
BatchOpt = Annotated[Optional[int], typer.Option("--batch", help="batch size B for the meta forward pass (default: a "
                                                 "value no width of the model equals)")]
SeqOpt = Annotated[Optional[int], typer.Option("--seq", help="sequence length T for the meta forward pass")]
EveryBlockOpt = Annotated[bool, flag("--every-block", help="run every repeated layer, MoE block and expert in "
                                                "the meta pass instead of answering identical ones from the first "
                                                "that ran (slower; for blocks that differ in what their classes, "
                                                "tensors and attributes do not show)")]
TrainOpt = Annotated[bool, flag("--train", help="trace the meta pass in training mode (dropout, batch statistics, "
                                         "auxiliary heads) instead of eval mode, the default")]
JsonOpt = Annotated[bool, flag("--json", help="print JSON instead of tables")]
DebugOpt = Annotated[bool, flag("--debug", help="show tracebacks")]
NoCacheOpt = Annotated[bool, flag("--no-cache", help="build the records again instead of reusing those of an "
                                  "unchanged source from the records cache ($XDG_CACHE_HOME/archviz; "
                                  "ARCHVIZ_NO_CACHE=1 does the same)")]


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
            raise
        err.print(Text.assemble(("error:", "bold red"), f" {e.line()}"), highlight=False, soft_wrap=True)
        if json_:
            emit_json({"error": one_line(e.message), "hint": one_line(e.hint) if e.hint else None,
                       "exit_code": e.exit_code})
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
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


def _parse_sets(sets: list[str] | None, flag: str = "--set") -> dict[str, Any]:
    from ..sources.options import check_overrides

    return check_overrides(sets, flag)


def is_records_file(path: str) -> bool:
    """A records JSON written by `archviz walk` (its first key is the schema)."""
    if not path.endswith(".json") or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and b'"schema"' in head and b"archviz.records/" in head


def read_records(path: str) -> Any:
    from ..gcpause import collector_paused
    from ..records import loads

    try:
        with open(path, encoding="utf-8") as f, collector_paused():  # JSON of a million acyclic objects
            record = loads(f.read())
        if record.extra("cost") is not None:  # what the cost renderers read, checked now rather than failing there
            from ..cost.extra import check as check_cost

            check_cost(record.extra("cost"))
        return record
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ArchvizError(f"{path}: not a readable records file ({e})",
                           hint="write one with `archviz walk SOURCE -o records.json`") from None


def _given(options: dict[str, Any]) -> list[str]:
    """The flags of `options` (flag -> value) that the user gave."""
    return [name for name, value in options.items() if value not in (None, False, [], ())]


def refuse_pass_options(*, batch: int | None = None, seq: int | None = None, kernel_rules: str | None = None,
                        inputs: list[str] | None = None, every_block: bool = False, train: bool = False) -> None:
    """Options of the meta forward pass given to a run without it would be ignored: say so instead."""
    given = _given({"--batch": batch, "--seq": seq, "--kernel-rules": kernel_rules, "--input": inputs,
                    "--every-block": every_block, "--train": train})
    if given:
        raise ArchvizError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to the meta forward pass, "
                           "which this run skips",
                           hint=f"run the pass (walk --shapes; inspect and build run it unless --no-shapes), or drop "
                                f"{', '.join(given)}")


def load_record(source: str, config: str | None, sets: list[str] | None, model_class: str | None,
                tokenizer: str | None, world_size: int | None, rank: int | None, *, shapes: bool = False,
                batch: int | None = None, seq: int | None = None, grouping: bool = True,
                kernel_rules: str | None = None, names: str | None = None,
                inputs: list[str] | None = None, every_block: bool = False, trust_remote_code: bool = False,
                quantized: bool = False, train: bool = False, cache: bool = True,
                config_class: str | None = None) -> Any:
    if is_records_file(source):  # already built (by `archviz walk -o`, maybe elsewhere): read, group if asked
        options = {"--config": config, "--set": sets, "--model-class": model_class, "--config-class": config_class,
                   "--tokenizer": tokenizer,
                   "--world-size": world_size, "--rank": rank, "--batch": batch, "--seq": seq,
                   "--kernel-rules": kernel_rules, "--input": inputs, "--every-block": every_block,
                   "--trust-remote-code": trust_remote_code, "--quantized": quantized, "--train": train}
        given = _given(options)
        if given:
            raise ArchvizError(f"{source}: a records file is already built, so {', '.join(given)} cannot apply",
                               hint="give the model source to build it again with them, or drop them")
        record = read_records(source)
        if grouping:  # always from the modules: a grouping stored in the file is derived data, never trusted
            from ..gcpause import collector_paused
            from ..group import group, load_names

            with collector_paused():
                record = group(record, names=load_names(names) if names else None)
        return record
    if not shapes:
        refuse_pass_options(batch=batch, seq=seq, kernel_rules=kernel_rules, inputs=inputs, every_block=every_block,
                            train=train)

    def build() -> Any:
        from ..sources.guard import model_code

        with model_code():  # the model's code may not end the process or print to stdout (--json stays JSON)
            return _built_record(source, config, sets, model_class, tokenizer, world_size, rank, shapes=shapes,
                                 batch=batch, seq=seq, grouping=False, kernel_rules=kernel_rules, names=None,
                                 inputs=inputs, every_block=every_block, trust_remote_code=trust_remote_code,
                                 quantized=quantized, train=train, config_class=config_class)

    # The cache keeps the records as the walk and the pass make them; grouping (a pure function of them, a fraction
    # of a second) runs after, so one entry serves `walk`, `check`, `summary`, `inspect` and `build` alike.
    options = {"config": config, "set": sets, "model_class": model_class, "world_size": world_size, "rank": rank,
               "shapes": shapes, "batch": batch, "seq": seq, "inputs": inputs, "every_block": every_block,
               "trust_remote_code": trust_remote_code, "quantized": quantized, "train": train,
               "tokenizer": tokenizer, "kernel_rules": kernel_rules,
               **({"config_class": config_class} if config_class else {})}
    record = cached("records", source, options, (config, tokenizer, kernel_rules), build, cache)
    if grouping:
        from ..gcpause import collector_paused
        from ..group import group, load_names

        with collector_paused():  # tens of thousands of signatures and nodes, none cyclic
            record = group(record, names=load_names(names) if names else None)
    return record


def cache_key(kind: str, source: str, options: dict[str, Any], files: tuple[str | None, ...] = (),
              versions: dict[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The records-cache key of `cached`'s arguments, and the files known before the build that it hashes
    (`versions`: archviz.cache.versions() as a caller looking up many keys read it once)."""
    from ..records import cache as rc

    inputs = rc.source_files(source, *files)
    return rc.make_key(kind, source, {**options, "_inputs": inputs}, versions), inputs


def cached(kind: str, source: str, options: dict[str, Any], files: tuple[str | None, ...], build: Callable[[], Any],
           use: bool = True) -> Any:
    """The records `build()` makes, from the records cache when an entry of the same source, options, package
    versions and file contents is there (records.cache: nothing is imported then, torch included); else built, and
    stored for the next run. `files`: the option files the build reads (--config, ...)."""
    from ..records import cache as rc

    if not use or rc.disabled():
        return build()
    key, inputs = cache_key(kind, source, options, files)
    found = rc.lookup(key)
    if found.note:
        err.print(f"note: {found.note}", highlight=False, soft_wrap=True)
    if found.record is not None:
        return found.record
    vouched = {p: rc.sha256_file(p) for p in inputs}
    before = set(sys.modules)
    record = build()
    vouched.update(rc.record_files(record))
    vouched.update({p: rc.sha256_file(p) for p in rc.new_code_files(before)})
    note = rc.store(key, record, {p: d for p, d in vouched.items() if d is not None})
    if note:
        err.print(f"note: {note}", highlight=False, soft_wrap=True)
    return record


def _built_record(source: str, config: str | None, sets: list[str] | None, model_class: str | None,
                  tokenizer: str | None, world_size: int | None, rank: int | None, *, shapes: bool,
                  batch: int | None, seq: int | None, grouping: bool, kernel_rules: str | None, names: str | None,
                  inputs: list[str] | None, every_block: bool, trust_remote_code: bool, quantized: bool,
                  train: bool = False, config_class: str | None = None) -> Any:
    from .. import build
    from ..walk import walk

    with spinner(f"building {source} on meta"):
        built = build(source, config=config, overrides=_parse_sets(sets), model_class=model_class,
                      tokenizer=tokenizer, world_size=world_size, rank=rank, trust_remote_code=trust_remote_code,
                      quantized=quantized, config_class=config_class)
    with progress_bar("walking modules") as cb:
        record = walk(built, progress=cb)
    if shapes:
        from ..shapes import trace_shapes

        if kernel_rules:
            from ..shapes.kernels import load_rules_file

            load_rules_file(kernel_rules)
        try:
            with progress_bar("meta forward pass") as cb:
                record = trace_shapes(built, record, batch=batch, seq=seq, input_specs=inputs, memo=not every_block,
                                      train=train, progress=cb)
        except ShapeError as e:  # the commands that run the pass here all have --no-shapes
            e.hint = f"{e.hint}; --no-shapes skips shapes" if e.hint else "--no-shapes skips shapes"
            raise
    if grouping:
        from ..group import group, load_names

        record = group(record, names=load_names(names) if names else None)
    return record


def emit_json(data: Any) -> None:
    from ..render.jsondump import dumps_indented  # json.dumps(data, indent=1, ensure_ascii=False), faster

    sys.stdout.write(json_text(dumps_indented(data, 1)) + "\n")  # sanitize: C1, bidi as escapes


def atomic_write(path: str, text: str) -> None:
    """Write via a temp file in the same folder, then move into place: never a half-written output, and only ever
    over a regular file (archviz.files.outputs)."""
    from ..files.outputs import write_file

    write_file(path, text.encode("utf-8"))
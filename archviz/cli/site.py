"""`archviz build SOURCE... -o DIR`: render records into the static HTML explorer (registers itself on the CLI)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, replace
from typing import Annotated, Any, Optional

import typer

from ..errors import ArchvizError, ShapeError
from .app import app
from .flags import FLAGS
from .validate import check_options
from .common import (
    BatchOpt,
    ConfigOpt,
    DebugOpt,
    EveryBlockOpt,
    InputOpt,
    JsonOpt,
    KernelRulesOpt,
    ConfigClassOpt,
    ModelClassOpt,
    NoCacheOpt,
    QuantizedOpt,
    RankOpt,
    SeqOpt,
    SetOpt,
    TrainOpt,
    TokenizerOpt,
    TrustRemoteCodeOpt,
    WorldSizeOpt,
    emit_json,
    err,
    flag,
    handled,
    load_record,
    overrides,
    progress_bar,
    spinner,
)
from ..pipeline import PassOptions, is_records_file
from ..sources.options import BuildOptions


def _group(record: Any, names: str | None) -> Any:
    """The records grouped from their modules (a grouping a records file holds is derived data: made again)."""
    from ..group import group, load_names

    return group(record, names=load_names(names)) if names else group(record)


def _compare(record: Any, checkpoint: str) -> Any:
    from .. import checkpoint as ck
    from ..records import ModelRecord

    if not hasattr(ck, "compare"):
        raise ArchvizError("--checkpoint: this archviz cannot compare with checkpoints yet",
                           hint="drop --checkpoint, or run `archviz check` when it lands")
    with spinner(f"reading {checkpoint}"):
        result = ck.compare(record, checkpoint)
    if isinstance(result, ModelRecord):
        return result
    if isinstance(result, dict):
        return record.with_extra("checkpoint", result)
    to = getattr(result, "to_extra", None) or getattr(result, "as_extra", None)
    if callable(to):
        return record.with_extra("checkpoint", to())
    raise ArchvizError(f"--checkpoint: archviz.checkpoint.compare returned {type(result).__name__}",
                       hint="report this: the site expects records or the checkpoint extra")


def _load(source: str, build: BuildOptions, passes: PassOptions, names: str | None, cache: bool) -> Any:
    """A site's records of one source, grouped: without shapes where the meta pass fails (said on stderr and on the
    overview)."""
    if is_records_file(source):  # records_for says which build options cannot apply to it; B, T and --every-block
        # are let pass, for the model sources built beside it
        return load_record(source, build, replace(passes, shapes=False, batch=None, seq=None, every_block=False),
                           names=names)
    if passes.shapes and passes.kernel_rules:  # a bad option is an error, not a reason to render without shapes
        from ..shapes.kernels import load_rules_file

        load_rules_file(passes.kernel_rules)
    if passes.shapes and passes.inputs:
        from ..shapes import parse_inputs
        from ..shapes.inputs import spec_symbols

        inputs = list(passes.inputs)
        parse_inputs(inputs, 2, 3, dict.fromkeys(spec_symbols(inputs), 1))  # the form only: x=B,3,H,W sizes later
    try:
        record = load_record(source, build, passes, group=False, cache=cache)
    except ShapeError as e:
        err.print(f"warning: {source}: no shapes ({e.line()}); the pages show counts and code only",
                  highlight=False, markup=False, soft_wrap=True)
        record = load_record(source, build, group=False, cache=cache)
        # The overview says why its pages have no shapes.
        record = dataclasses.replace(record, source=dataclasses.replace(
            record.source, notes=(*record.source.notes, f"no shapes: {e.line()}")))
    return _group(record, names)


@app.command("build")
def build(
    sources: Annotated[list[str], typer.Argument(help="model sources (as for the other commands) or records JSON "
                                                      "files from `archviz walk`; several make one site")],
    output: Annotated[str, typer.Option("--output", "-o", help="the site folder (replaced atomically)")] = "site",
    config: ConfigOpt = None,
    set_: SetOpt = None,
    model_class: ModelClassOpt = None,
    config_class: ConfigClassOpt = None,
    tokenizer: TokenizerOpt = None,
    world_size: WorldSizeOpt = None,
    rank: RankOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
    quantized: QuantizedOpt = False,
    shapes: Annotated[bool, flag("--shapes/--no-shapes", help="run the meta forward pass for in/out shapes "
                                                                      "and call sites")] = True,
    batch: BatchOpt = None,
    seq: SeqOpt = None,
    every_block: EveryBlockOpt = False,
    train: TrainOpt = False,
    kernel_rules: KernelRulesOpt = None,
    input_: InputOpt = None,
    annotations: Annotated[Optional[str], typer.Option("--annotations", help="TOML of node titles, descriptions and "
                                                                            "claims checked against the code")] = None,
    source_url: Annotated[Optional[str], typer.Option("--source-url", help="link template for the model's own code: "
                                                                          "{path}, {start}, {end}")] = None,
    names: Annotated[Optional[str], typer.Option("--names", help="grouping names file (passed to the grouping "
                                                                 "stage)")] = None,
    checkpoint: Annotated[Optional[str], typer.Option("--checkpoint", help="compare with this checkpoint and show "
                                                                          "the verdicts")] = None,
    no_cache: NoCacheOpt = False,
    cost: Annotated[bool, flag("--cost/--no-cost", help="count FLOPs and the KV cache too (archviz cost): the "
                               "overview's cost section against context length 1K .. the config's max positions, "
                               "and FLOPs per call on every node; records of `archviz cost -o` show them "
                               "without it")] = False,
    hardware: Annotated[Optional[str], typer.Option("--hardware", help="with --cost: tokens/s against context "
                                                    "length on these devices in the cost section (presets such as "
                                                    "h200,b200, or a TOML file; see archviz cost --hardware)")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="GPUs of each --hardware device; default 1")] = None,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Render a static HTML explorer: one page per node of the grouped tree, an overview per model, search."""
    from ..render.site import build_site

    with handled(debug, json_):
        check_options(sets={"--set": set_}, inputs=input_, positive={"--batch": batch, "--seq": seq, "--gpus": gpus},
                      world_size=world_size, rank=rank)
        from ..render.site.write import check_target

        check_target(output)  # `-` or a folder archviz may not replace: refused before any build
        extras = _extras(sources, cost, hardware, gpus, checkpoint, source_url)
        anns = None
        if annotations:
            from ..render.site.annotations import load_annotations

            anns = load_annotations(annotations)
        build_opts = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                                  config_class=config_class,
                                  tokenizer=tokenizer, world_size=world_size, rank=rank,
                                  trust_remote_code=trust_remote_code, quantized=quantized)
        passes = PassOptions(shapes=shapes, batch=batch, seq=seq, inputs=tuple(input_ or ()),
                             kernel_rules=kernel_rules, every_block=every_block, train=train)
        records = [_site_record(s, build_opts, passes, names, not no_cache, extras) for s in sources]
        with progress_bar("rendering pages") as cb:
            result = build_site(records, output, annotations=anns, source_url=source_url, progress=cb, words=FLAGS)
        if json_:
            emit_json({"output": output, "pages": result.pages, "bytes": result.bytes})
        else:
            err.print(f"wrote {result.pages:,} pages ({result.bytes / 2**20:.1f} MiB) to {output}/ — open "
                      f"{os.path.join(output, 'index.html')}", highlight=False, markup=False)


@dataclass(frozen=True)
class _Extras:
    """What `archviz build` adds to each model's records beyond the pipeline's: cost, hardware, a checkpoint."""

    cost: bool
    devices: tuple[Any, ...]
    gpus: int
    checkpoint: str | None


def _extras(sources: list[str], cost: bool, hardware: str | None, gpus: int | None, checkpoint: str | None,
            source_url: str | None) -> _Extras:
    """--cost, --hardware, --gpus and --checkpoint (and --source-url) checked, before any build."""
    devices: list[Any] = []
    if hardware is not None:
        from ..cost.hardware import resolve

        devices = resolve(hardware)
    elif gpus is not None:
        raise ArchvizError("--gpus applies to --hardware, which was not given",
                           hint="add e.g. --cost --hardware h200, or drop --gpus")
    if source_url is not None and "{path}" not in source_url:
        raise ArchvizError(f"--source-url {source_url!r}: the template has no {{path}}",
                           hint="write e.g. https://github.com/OWNER/REPO/blob/REV/{path}#L{start}-L{end}")
    if checkpoint and len(sources) != 1:
        raise ArchvizError("--checkpoint compares one model", hint="build one SOURCE at a time with --checkpoint")
    return _Extras(cost, tuple(devices), gpus or 1, checkpoint)


def _site_record(source: str, build: BuildOptions, passes: PassOptions, names: str | None, cache: bool,
                 extras: _Extras) -> Any:
    """One model's records for the site: grouped, every rank's shapes under --world-size N, and `extras`."""
    record = _load(source, build, passes, names, cache)
    if build.world_size is not None and build.world_size > 1 and build.rank is None and not is_records_file(source):
        from ..walk.ranks import with_rank_shapes  # every rank's tensor shapes on the node pages

        record = with_rank_shapes([record] + [load_record(source, replace(build, rank=r), group=False, cache=cache)
                                              for r in range(1, build.world_size)])
    if extras.cost:
        from .site_cost import with_cost

        record = with_cost(record, source, build, passes)
    if extras.devices:
        from .site_cost import with_hardware

        record = with_hardware(record, source, list(extras.devices), extras.gpus)
    if extras.checkpoint:
        record = _compare(record, extras.checkpoint)
    return record


__all__ = ["build"]

"""`archviz build SOURCE... -o DIR`: render records into the static HTML explorer (registers itself on the CLI)."""

from __future__ import annotations

import dataclasses
import os
from typing import Annotated, Any, Optional

import typer

from ..errors import ArchvizError, ShapeError
from .app import app
from .validate import check_options
from .common import (
    BatchOpt,
    ConfigOpt,
    DebugOpt,
    EveryBlockOpt,
    InputOpt,
    JsonOpt,
    KernelRulesOpt,
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
    is_records_file,
    load_record,
    progress_bar,
    refuse_pass_options,
    spinner,
)


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


def _load(source: str, config: str | None, sets: list[str] | None, model_class: str | None, tokenizer: str | None,
          world_size: int | None, rank: int | None, shapes: bool, batch: int | None, seq: int | None, names: str | None,
          every_block: bool = False, kernel_rules: str | None = None, inputs: list[str] | None = None,
          trust_remote_code: bool = False, quantized: bool = False, train: bool = False, cache: bool = True) -> Any:
    if is_records_file(source):  # load_record says which build options cannot apply to it
        return _group(load_record(source, config, sets, model_class, tokenizer, world_size, rank, grouping=False,
                                  kernel_rules=kernel_rules, inputs=inputs, trust_remote_code=trust_remote_code,
                                  quantized=quantized, train=train), names)
    if not shapes:
        refuse_pass_options(batch=batch, seq=seq, kernel_rules=kernel_rules, inputs=inputs, every_block=every_block,
                            train=train)
    if shapes and kernel_rules:  # a bad option is an error, not a reason to render without shapes
        from ..shapes.kernels import load_rules_file

        load_rules_file(kernel_rules)
    if shapes and inputs:
        from ..shapes import parse_inputs
        from ..shapes.inputs import spec_symbols

        parse_inputs(inputs, 2, 3, dict.fromkeys(spec_symbols(inputs), 1))  # the form only: x=B,3,H,W sizes later
    try:
        record = load_record(source, config, sets, model_class, tokenizer, world_size, rank, shapes=shapes,
                             batch=batch, seq=seq, grouping=False, every_block=every_block, inputs=inputs,
                             kernel_rules=kernel_rules,  # loaded above; in the records cache's key too
                             trust_remote_code=trust_remote_code, quantized=quantized, train=train, cache=cache)
    except ShapeError as e:
        err.print(f"warning: {source}: no shapes ({e.line()}); the pages show counts and code only",
                  highlight=False, markup=False, soft_wrap=True)
        record = load_record(source, config, sets, model_class, tokenizer, world_size, rank, shapes=False,
                             grouping=False, trust_remote_code=trust_remote_code, quantized=quantized,
                             cache=cache)
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
        devices = []
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
        anns = None
        if annotations:
            from ..render.site.annotations import load_annotations

            anns = load_annotations(annotations)
        records = []
        for s in sources:
            record = _load(s, config, set_, model_class, tokenizer, world_size, rank, shapes, batch, seq, names,
                           every_block, kernel_rules, input_, trust_remote_code, quantized, train, not no_cache)
            if world_size is not None and world_size > 1 and rank is None and not is_records_file(s):
                from ..walk.ranks import with_rank_shapes  # every rank's tensor shapes on the node pages

                record = with_rank_shapes([record] + [
                    load_record(s, config, set_, model_class, tokenizer, world_size, r, shapes=False, grouping=False,
                                trust_remote_code=trust_remote_code, quantized=quantized, cache=not no_cache)
                    for r in range(1, world_size)])
            if cost:
                from .site_cost import with_cost

                record = with_cost(record, s, config, set_, model_class, tokenizer, world_size, rank, batch, seq,
                                   every_block, input_, trust_remote_code, quantized, train)
            if devices:
                from .site_cost import with_hardware

                record = with_hardware(record, s, devices, gpus or 1)
            if checkpoint:
                record = _compare(record, checkpoint)
            records.append(record)
        with progress_bar("rendering pages") as cb:
            result = build_site(records, output, annotations=anns, source_url=source_url, progress=cb)
        if json_:
            emit_json({"output": output, "pages": result.pages, "bytes": result.bytes})
        else:
            err.print(f"wrote {result.pages:,} pages ({result.bytes / 2**20:.1f} MiB) to {output}/ — open "
                      f"{os.path.join(output, 'index.html')}", highlight=False, markup=False)


__all__ = ["build"]

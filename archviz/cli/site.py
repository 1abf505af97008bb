"""`archviz build SOURCE... -o DIR`: the static HTML explorer of records (registers itself on the CLI); the site is
made by archviz.pipeline.site.make_site."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Annotated, Optional

import typer

from .app import app
from .flags import FLAGS
from .validate import check_options
from .common import (
    FEEDBACK,
    emit_json,
    err,
    handled,
    note,
    overrides,
)
from .options import (
    Annotations,
    Batch,
    Config,
    ConfigClass,
    Debug,
    EveryBlock,
    flag,
    Gpus,
    Input,
    Json,
    KernelRules,
    ModelClass,
    Names,
    NoCache,
    Quantized,
    Rank,
    Seq,
    Set,
    Shapes,
    SiteFolder,
    SourceUrl,
    Tokenizer,
    Train,
    TrustRemoteCode,
    WorldSize,
)
from ..pipeline import PassOptions, is_records_file
from ..pipeline.site import SiteOptions, make_site
from ..sources.options import BuildOptions


@app.command("build")
def build(
    sources: Annotated[list[str], typer.Argument(help="model sources (as for the other commands) or records JSON "
                                                      "files from `archviz walk`; several make one site")],
    output: SiteFolder = "site",
    config: Config = None,
    set_: Set = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    world_size: WorldSize = None,
    rank: Rank = None,
    trust_remote_code: TrustRemoteCode = False,
    quantized: Quantized = False,
    shapes: Shapes = True,
    batch: Batch = None,
    seq: Seq = None,
    every_block: EveryBlock = False,
    train: Train = False,
    kernel_rules: KernelRules = None,
    input_: Input = None,
    annotations: Annotations = None,
    source_url: SourceUrl = None,
    names: Names = None,
    checkpoint: Annotated[Optional[str], typer.Option("--checkpoint", help="compare with this checkpoint and show "
                                                                          "the verdicts")] = None,
    no_cache: NoCache = False,
    cost: Annotated[bool, flag("--cost/--no-cost", help="count FLOPs and the KV cache too (archviz cost): the "
                               "overview's cost section against context length 1K .. the config's max positions, "
                               "and FLOPs per call on every node; records of `archviz cost -o` show them "
                               "without it")] = False,
    hardware: Annotated[Optional[str], typer.Option("--hardware", help="with --cost: tokens/s against context "
                                                    "length on these devices in the cost section (presets such as "
                                                    "h200,b200, or a TOML file; see archviz cost --hardware)")] = None,
    gpus: Gpus = None,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """Render a static HTML explorer: one page per node of the grouped tree, an overview per model, search."""
    with handled(debug, json_):
        check_options(sets={"--set": set_}, inputs=input_, positive={"--batch": batch, "--seq": seq, "--gpus": gpus},
                      world_size=world_size, rank=rank)
        build_opts = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                                  config_class=config_class,
                                  tokenizer=tokenizer, world_size=world_size, rank=rank,
                                  trust_remote_code=trust_remote_code, quantized=quantized)
        passes = PassOptions(shapes=shapes, batch=batch, seq=seq, inputs=tuple(input_ or ()),
                             kernel_rules=kernel_rules, every_block=every_block, train=train)
        options = SiteOptions(names=names, annotations=annotations, source_url=source_url, checkpoint=checkpoint,
                              cost=cost, hardware=hardware, gpus=gpus, cache=not no_cache,
                              feedback=replace(FEEDBACK, warning=_warning), words=FLAGS)
        result = make_site(sources, output, build_opts, passes, options)
        if json_:
            emit_json({"output": output, "pages": result.pages, "bytes": result.bytes})
        else:
            err.print(f"wrote {result.pages:,} pages ({result.bytes / 2**20:.1f} MiB) to {output}/ — open "
                      f"{os.path.join(output, 'index.html')}", highlight=False, markup=False)


def _warning(text: str) -> None:
    note(text, "warning: ")


__all__ = ["build"]

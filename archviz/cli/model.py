"""`archviz summary`, `inspect` and `walk`: one model's totals, tree and cards, and its records file."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .app import app
from .validate import check_options
from .common import (
    atomic_write,
    FEEDBACK,
    emit_json,
    err,
    handled,
    output_option,
    load_record,
    note as say_note,
    out,
    overrides,
)
from ..render.text import Labelled
from .options import (
    Batch,
    Config,
    ConfigClass,
    Debug,
    EveryBlock,
    flag,
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
    Source,
    Tokenizer,
    Train,
    TrustRemoteCode,
    WorldSize,
)
from ..pipeline import PassOptions, with_pass_counts
from ..sources.options import BuildOptions


@app.command()
def summary(
    source: Source,
    config: Config = None,
    set_: Set = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    world_size: WorldSize = None,
    rank: Rank = None,
    trust_remote_code: TrustRemoteCode = False,
    quantized: Quantized = False,
    no_cache: NoCache = False,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """Totals: parameters (logical weights), active per token, scales, tables, buffers, bytes per dtype. A GGUF file
    alone: the model its key-values describe, built on meta, and the file checked against it (exit 1 if not whole)."""
    from ..render.terminal import summary_table
    from ..render.views import summary_json

    with handled(debug, json_):
        check_options(sets={"--set": set_}, world_size=world_size, rank=rank)
        if source.lower().endswith(".gguf") and config is None:  # the file's key-values describe the model
            from .check import gguf_summary

            gguf_summary(source, json_)
        build = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                             config_class=config_class, tokenizer=tokenizer, world_size=world_size, rank=rank,
                             trust_remote_code=trust_remote_code, quantized=quantized)
        record = load_record(source, build, group=False, cache=not no_cache)
        # built again with the meta pass where only the pass counts the active parameters
        record = with_pass_counts(record, source, build, cache=not no_cache, feedback=FEEDBACK)
        checked = record.extra("checkpoint")  # a Hub repository: checked against its own headers
        if json_:
            emit_json({**summary_json(record), **({"checkpoint": {k: checked.get(k) for k in (
                "source", "verdict", "summary")}} if checked else {})})
        else:
            out.print(summary_table(record))
            if checked:
                from ..checkpoint.report import verdict_line

                out.print(Labelled("", verdict_line(checked), None if checked.get("verdict") == "match" else "red"))


@app.command()
def inspect(
    source: Source,
    target: Annotated[Optional[list[str]], typer.Argument(help="`layer N` or a module path such as "
                                                                "layers.3.attn.wo_b; nothing for the whole model")]
    = None,
    config: Config = None,
    set_: Set = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    world_size: WorldSize = None,
    rank: Rank = None,
    trust_remote_code: TrustRemoteCode = False,
    quantized: Quantized = False,
    depth: Annotated[int, typer.Option("--depth", "-d", help="tree levels to show")] = 3,
    shapes: Shapes = True,
    flat: Annotated[bool, flag("--flat", help="the raw module tree, identical siblings not grouped")] = False,
    flow: Annotated[bool, flag("--flow", help="the module's forward as it ran, folded (child calls, function "
                                              "calls, ops) as a tree with shapes; --depth opens child forwards")]
    = False,
    batch: Batch = None,
    seq: Seq = None,
    kernel_rules: KernelRules = None,
    input_: Input = None,
    every_block: EveryBlock = False,
    train: Train = False,
    names: Names = None,
    no_cache: NoCache = False,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """A module's tree with per-module counts, shapes and call sites: `archviz inspect hf:deepseek_v3 layer 3`."""
    from ..group.layers import layer_note, resolve_target
    from ..render.terminal import grouped_tree, module_card, module_tree, run_notes
    from ..render.views import module_json

    with handled(debug, json_):
        check_options(sets={"--set": set_}, inputs=input_, positive={"--batch": batch, "--seq": seq},
                      non_negative={"--depth": depth}, world_size=world_size, rank=rank)
        build = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                             config_class=config_class, tokenizer=tokenizer, world_size=world_size, rank=rank,
                             trust_remote_code=trust_remote_code, quantized=quantized)
        passes = PassOptions(shapes=shapes, batch=batch, seq=seq, inputs=tuple(input_ or ()),
                             kernel_rules=kernel_rules, every_block=every_block, train=train)
        record = load_record(source, build, passes, group=not flat, names=names, cache=not no_cache)
        path = resolve_target(record, target or [])
        note = layer_note(record, target or [])
        if note:
            say_note(note)
        if json_:
            emit_json(module_json(record, path))
            return
        if path:
            out.print(module_card(record, path))
        if flow:
            from ..render.flowtree import flow_tree

            out.print(flow_tree(record, path, depth))
            return
        out.print(module_tree(record, path, depth) if flat else grouped_tree(record, path, depth))
        notes = run_notes(record) if not path else None
        if notes is not None:
            out.print(notes)


@app.command()
def walk(
    source: Source,
    output: Annotated[str, typer.Option("--output", "-o", help="records JSON to write ('-' for stdout)")] = "-",
    config: Config = None,
    set_: Set = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    world_size: WorldSize = None,
    rank: Rank = None,
    trust_remote_code: TrustRemoteCode = False,
    quantized: Quantized = False,
    shapes: Shapes = False,
    kernel_rules: KernelRules = None,
    input_: Input = None,
    every_block: EveryBlock = False,
    train: Train = False,
    no_cache: NoCache = False,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """Write the records (versioned JSON schema, docs/records-schema.md) of every module."""
    from ..records import dumps_compact as dumps

    with handled(debug, json_), output_option(output):  # --json: the line of what was written, to a file only
        check_options(sets={"--set": set_}, inputs=input_, world_size=world_size, rank=rank)
        build = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                             config_class=config_class, tokenizer=tokenizer, world_size=world_size, rank=rank,
                             trust_remote_code=trust_remote_code, quantized=quantized)
        passes = PassOptions(shapes=shapes, inputs=tuple(input_ or ()), kernel_rules=kernel_rules,
                             every_block=every_block, train=train)
        record = load_record(source, build, passes, group=False, cache=not no_cache)
        atomic_write(output, dumps(record) + "\n")
        if output != "-":
            if json_:
                emit_json({"output": output, "modules": record.summary.modules, "schema": record.schema})
            else:
                err.print(f"wrote {len(record.modules):,} module records ({record.summary.modules:,} modules) to {output}")

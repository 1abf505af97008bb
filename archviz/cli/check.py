"""`archviz check` (model vs checkpoint headers) and `archviz manifest` (a header-only manifest for CI).

Registered on `archviz.cli.app` when `archviz.cli` imports this module.
"""

from __future__ import annotations

import os
import tempfile
from typing import Annotated, Optional

import typer

from ..errors import EXIT_MISMATCH, EXIT_OK, ArchvizError, CheckpointError
from .app import app
from .validate import check_options
from .common import (
    ConfigOpt,
    DebugOpt,
    JsonOpt,
    ConfigClassOpt,
    ModelClassOpt,
    NoCacheOpt,
    QuantizedOpt,
    RankOpt,
    SetOpt,
    SourceArg,
    TokenizerOpt,
    TrustRemoteCodeOpt,
    WorldSizeOpt,
    atomic_write,
    emit_json,
    err,
    handled,
    load_record,
    out,
    progress_bar,
    spinner,
)

CheckpointOpt = Annotated[str, typer.Option("--checkpoint", "-k", help=".safetensors file, shard folder, "
                                                                        "*.safetensors.index.json, manifest "
                                                                        "(.json/.json.gz) or hf://owner/name[@rev]")]
RulesOpt = Annotated[Optional[str], typer.Option("--rules", help="a rules file (JSON, or TOML on Python 3.11+): "
                                                                 "renames, fuse, ignore, explain; see "
                                                                 "archviz/checkpoint/rules/")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=0.1, help="hf:// only: seconds each HTTP request may take, "
                                                                     "its whole answer included; the whole read "
                                                                     "gets 30 times that")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table | github (workflow annotations) | json")]


@app.command()
def check(
    source: SourceArg,
    checkpoint: CheckpointOpt,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    model_class: ModelClassOpt = None,
    config_class: ConfigClassOpt = None,
    tokenizer: TokenizerOpt = None,
    world_size: WorldSizeOpt = None,
    rank: RankOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
    quantized: QuantizedOpt = False,
    rules: RulesOpt = None,
    format_: FormatOpt = "table",
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="also write the records, with the "
                                                                         "comparison, as JSON")] = None,
    limit: Annotated[int, typer.Option("--limit", help="rows per table")] = 40,
    timeout: TimeoutOpt = 10.0,
    no_cache: NoCacheOpt = False,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Compare the model with a checkpoint's headers: exit 0 when they match, 1 when they differ, 2 on bad input.

    Names are mapped by data-driven rules (identity, common prefixes, transformers' conversions, the DeepSeek
    reference loaders, --rules); fp8/fp4 weights pair with their scales; dtype differences are notes."""
    from ..checkpoint.compare import EXTRA_KEY, compare
    from ..checkpoint.report import (
        checkpoint_only_groups,
        checkpoint_only_table,
        github_lines,
        note_groups,
        notes_table,
        problem_modules,
        problems_table,
        summary_table,
    )
    from ..checkpoint.rules import load_rules

    fmt = "json" if json_ else format_.lower()
    with handled(debug, fmt == "json"):
        if fmt not in ("table", "github", "json"):
            raise ArchvizError(f"--format {format_!r}: unknown format", hint="use table, github or json")
        check_options(sets={"--set": set_}, positive={"--limit": limit}, world_size=world_size, rank=rank,
                      timeout=timeout)
        rule_set = load_rules(rules)  # a bad rules file fails before the (slow) model build
        from ..checkpoint import open_checkpoint

        with progress_bar(f"reading {checkpoint}") as cb:
            inventory = open_checkpoint(checkpoint, progress=(lambda d, t, *_: cb(d, t)), timeout=timeout)
        # a model source is built; a records file from `archviz walk -o` is read as it is
        record = load_record(source, config, set_, model_class, tokenizer, world_size, rank, grouping=False,
                             config_class=config_class,
                             trust_remote_code=trust_remote_code, quantized=quantized, cache=not no_cache)
        with spinner("comparing"):
            record = compare(record, inventory, rule_set)
        result = record.extra(EXTRA_KEY)
        if output:
            from ..records import dumps_compact as dumps

            atomic_write(output, dumps(record) + "\n")
        if fmt == "json":
            emit_json(result)
        elif fmt == "github":
            file = source if os.path.isfile(source) else (config or checkpoint)
            for line in github_lines(result, file=file, limit=limit):
                out.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            out.print(summary_table(result))
            rows = problem_modules(result)
            if rows:
                out.print(problems_table(rows, limit))
            groups = checkpoint_only_groups(result)
            if groups:
                out.print(checkpoint_only_table(groups))
            notes = note_groups(result)
            if notes:
                out.print(notes_table(notes, min(limit, 12)))
        if output and fmt != "json":
            err.print(f"wrote records with the comparison to {output}")
        raise typer.Exit(EXIT_OK if result["verdict"] == "match" else EXIT_MISMATCH)


@app.command()
def manifest(
    checkpoint: Annotated[str, typer.Argument(help=".safetensors file, shard folder, *.safetensors.index.json, "
                                                   "manifest or hf://owner/name[@rev]")],
    output: Annotated[str, typer.Option("--output", "-o", help="manifest to write; gzip'd when it ends in .gz")],
    timeout: TimeoutOpt = 10.0,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Write a header-only manifest (names, dtypes, shapes, shard sizes; no weights), small enough to commit, so CI
    can `archviz check` a model against it without downloading the checkpoint."""
    from ..checkpoint import open_checkpoint, write_manifest

    with handled(debug, json_):
        check_options(timeout=timeout)
        with progress_bar(f"reading {checkpoint}") as cb:
            inventory = open_checkpoint(checkpoint, progress=(lambda d, t, *_: cb(d, t)), timeout=timeout)
        target = os.path.abspath(output)
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):
            raise CheckpointError(f"cannot write {output}: folder {folder} does not exist")
        suffix = ".gz" if output.endswith(".gz") else ".json"
        fd, tmp = tempfile.mkstemp(prefix=".archviz-", suffix=suffix, dir=folder)
        os.close(fd)
        try:
            write_manifest(inventory, tmp)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        size = os.path.getsize(target)
        info = {"output": output, "source": inventory.source, "revision": inventory.revision,
                "shards": len(inventory.shards), "tensors": len(inventory.tensors), "bytes": size}
        if json_:
            emit_json(info)
        else:
            err.print(f"wrote {len(inventory.tensors):,} tensors of {len(inventory.shards):,} shards to {output} "
                      f"({size:,} bytes)")



__all__ = ["check", "manifest"]

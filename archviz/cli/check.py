"""`archviz check` (model vs checkpoint headers) and `archviz manifest` (a header-only manifest for CI).

Registered on `archviz.cli.app` when `archviz.cli` imports this module.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Annotated, Optional

import typer

from ..errors import EXIT_MISMATCH, EXIT_OK, ArchvizError
from .app import app
from .validate import check_options
from .common import (
    atomic_write,
    emit_json,
    err,
    handled,
    load_record,
    out,
    output_option,
    overrides,
    progress_bar,
    spinner,
    write_output,
)
from .options import (
    Config,
    ConfigClass,
    Debug,
    Format,
    HubTimeout,
    Json,
    Limit,
    ModelClass,
    NoCache,
    Quantized,
    Rank,
    RankPattern,
    Set,
    Source,
    Tokenizer,
    TrustRemoteCode,
    WorldSize,
)
from ..render.text import Labelled
from ..sources.options import BuildOptions

CheckpointOpt = Annotated[str, typer.Option("--checkpoint", "-k", help=".safetensors file, shard folder, "
                                                                        "*.safetensors.index.json, manifest "
                                                                        "(.json/.json.gz), .gguf (or one of its "
                                                                        "split files), torch.save zip (.bin/.pt/.pth) "
                                                                        "or hf://owner/name (@rev and /file.gguf "
                                                                        "may follow)")]
RulesOpt = Annotated[Optional[str], typer.Option("--rules", help="a rules file (JSON, or TOML on Python 3.11+): "
                                                                 "renames, fuse, ignore, explain; see "
                                                                 "archviz/checkpoint/rules/")]


@app.command()
def check(
    source: Source,
    checkpoint: CheckpointOpt,
    config: Config = None,
    set_: Set = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    world_size: WorldSize = None,
    rank: Rank = None,
    trust_remote_code: TrustRemoteCode = False,
    quantized: Quantized = False,
    rules: RulesOpt = None,
    format_: Format = "table",
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="also write the records, with the "
                                                                         "comparison, as JSON")] = None,
    limit: Limit = 40,
    timeout: HubTimeout = 10.0,
    no_cache: NoCache = False,
    rank_pattern: RankPattern = None,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """Compare the model with a checkpoint's headers: exit 0 when they match, 1 when they differ, 2 on bad input.

    Names are mapped by data-driven rules (identity, common prefixes, transformers' conversions, the DeepSeek
    reference loaders, --rules); fp8/fp4 weights pair with their scales; dtype differences are notes.
    --world-size N without --rank compares every rank's shard (model{rank}-mp{N}.safetensors in the folder, or
    --rank-pattern) with the records of that rank: one verdict per rank and one overall."""
    from ..checkpoint.compare import EXTRA_KEY, compare
    from ..checkpoint.rules import load_rules

    fmt = "json" if json_ else format_.lower()
    with handled(debug, fmt == "json"), output_option(output, fmt == "json"):
        if fmt not in ("table", "github", "json"):
            raise ArchvizError(f"--format {format_!r}: unknown format", hint="use table, github or json")
        check_options(sets={"--set": set_}, positive={"--limit": limit}, world_size=world_size, rank=rank,
                      timeout=timeout)
        rule_set = load_rules(rules)  # a bad rules file fails before the (slow) model build
        build = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                             config_class=config_class, tokenizer=tokenizer, world_size=world_size, rank=rank,
                             trust_remote_code=trust_remote_code, quantized=quantized)
        if rank_pattern is not None and (world_size is None or rank is not None):
            raise ArchvizError(f"--rank-pattern {rank_pattern!r}: only --world-size N without --rank reads rank files",
                               hint="drop --rank to check every rank's shard, or drop --rank-pattern")
        if world_size is not None and rank is None:
            _check_ranks(source, checkpoint, world_size, rank_pattern, rule_set, fmt, limit,
                         lambda r: load_record(source, replace(build, rank=r), group=False, cache=not no_cache))
        from ..checkpoint import open_checkpoint

        with progress_bar(f"reading {checkpoint}") as cb:
            inventory = open_checkpoint(checkpoint, progress=(lambda d, t, *_: cb(d, t)), timeout=timeout)
        # a model source is built; a records file from `archviz walk -o` is read as it is
        record = load_record(source, build, group=False, cache=not no_cache)
        with spinner("comparing"):
            record = compare(record, inventory, rule_set)
        result = record.extra(EXTRA_KEY)
        if output:
            from ..records import dumps_compact as dumps

            atomic_write(output, dumps(record) + "\n")
        _print_result(result, fmt, source if os.path.isfile(source) else (config or checkpoint), limit)
        if output and output != "-" and fmt != "json":
            err.print(f"wrote records with the comparison to {output}")
        raise typer.Exit(EXIT_OK if result["verdict"] == "match" else EXIT_MISMATCH)


def _print_result(result: dict, fmt: str, file: str, limit: int) -> None:
    """One check's result as JSON, workflow annotations on `file`, or tables of `limit` rows."""
    from ..checkpoint.report import github_lines
    from ..render.results import check_view

    if fmt == "json":
        emit_json(result)
    elif fmt == "github":
        for line in github_lines(result, file=file, limit=limit):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        out.print(check_view(result, limit))



def _check_ranks(source: str, checkpoint: str, world_size: int, pattern: str | None, rule_set: object, fmt: str,
                 limit: int, records: object) -> None:
    """`check --world-size N` without --rank: every rank's shard against that rank's records; exits 0 or 1."""
    from ..checkpoint.ranks import check_ranks, rank_inventories
    from ..checkpoint.report import github_lines, problem_modules
    from ..render.checkpoint import problems_table, ranks_table

    with spinner(f"reading {world_size} rank shards"):
        ranks = rank_inventories(checkpoint, world_size, pattern)
    with spinner("comparing each rank"):
        result = check_ranks(records, ranks, rule_set)  # type: ignore[arg-type]
    if fmt == "json":
        emit_json(result)
    elif fmt == "github":
        for r in result["ranks"]:
            for line in github_lines(r, file=source if os.path.isfile(source) else checkpoint, limit=limit):
                head, _, message = line.rpartition("::")
                out.print(f"{head}::rank {r['rank']}: {message}", markup=False, highlight=False, soft_wrap=True)
    else:
        out.print(ranks_table(result, world_size))
        for r in result["ranks"]:
            bad = [t for t in r["tensors"] if isinstance(t, dict) and t.get("verdict") in ("mismatch", "missing")]
            for t in bad[:limit]:
                out.print(Labelled(f"rank {r['rank']}: ", f"{t['model']}: {t['verdict']}, model "
                                   f"{t.get('model_shape')} vs checkpoint {t.get('checkpoint_shape')}", "red"))
            rows = problem_modules(r)
            if rows:
                out.print(problems_table(rows, limit))
    raise typer.Exit(EXIT_OK if result["verdict"] == "match" else EXIT_MISMATCH)


@app.command()
def manifest(
    checkpoint: Annotated[str, typer.Argument(help=".safetensors file, shard folder, *.safetensors.index.json, "
                                                   "manifest, .gguf, torch.save zip or "
                                                   "hf://owner/name (@rev and /file.gguf may follow)")],
    output: Annotated[str, typer.Option("--output", "-o", help="manifest to write; gzip'd when it ends in .gz")],
    timeout: HubTimeout = 10.0,
    world_size: Annotated[Optional[int], typer.Option("--world-size", help="a folder of one shard per rank: "
                                                                          "keep each rank's tensors apart")] = None,
    rank_pattern: RankPattern = None,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """Write a header-only manifest (names, dtypes, shapes, shard sizes; no weights), small enough to commit, so CI
    can `archviz check` a model against it without downloading the checkpoint. With --world-size N, the folder's
    rank files (model{rank}-mp{N}.safetensors, or --rank-pattern) go in with their ranks, for
    `archviz check SOURCE --world-size N --checkpoint MANIFEST`."""
    from ..checkpoint import open_checkpoint
    from ..checkpoint.manifest import manifest_bytes

    # a target archviz may not replace is refused before any reading
    with handled(debug, json_), output_option(output, json_):
        check_options(timeout=timeout, world_size=world_size)
        if world_size is not None:
            _rank_manifest(checkpoint, output, world_size, rank_pattern, json_)
            return
        with progress_bar(f"reading {checkpoint}") as cb:
            inventory = open_checkpoint(checkpoint, progress=(lambda d, t, *_: cb(d, t)), timeout=timeout)
        data = manifest_bytes(inventory, gz=output.endswith(".gz"))
        write_output(output, data)
        size = len(data)
        types = inventory.type_totals()
        info = {"output": output, "source": inventory.source, "revision": inventory.revision,
                "shards": len(inventory.shards), "tensors": len(inventory.tensors), "bytes": size,
                "types": [{"type": t.dtype, "tensors": t.tensors, "elements": t.elements, "bytes": t.bytes,
                           "bits_per_weight": round(t.bits_per_weight, 4)} for t in types]}
        if json_:
            emit_json(info)
        elif output != "-":
            err.print(f"wrote {len(inventory.tensors):,} tensors of {len(inventory.shards):,} shards to {output} "
                      f"({size:,} bytes)")
            for t in types:
                err.print(f"  {t.dtype:>8} {t.tensors:>6,} tensors {t.elements:>15,} weights {t.bytes:>15,} bytes "
                          f"{t.bits_per_weight:5.2f} bpw", markup=False, highlight=False, soft_wrap=True)



def gguf_summary(source: str, json_: bool, limit: int = 40) -> None:
    """`summary FILE.gguf`: the model its key-values describe (transformers' GGUF config table), built on meta, its
    totals, and the same file checked against it; exits 0 when they match, 1 when not."""
    import json
    import tempfile

    from ..checkpoint import open_checkpoint
    from ..checkpoint.compare import EXTRA_KEY, compare
    from ..checkpoint.gguf_config import config_from_gguf
    from ..render.terminal import summary_table
    from ..render.views import summary_json

    inventory = open_checkpoint(source)
    config = config_from_gguf(inventory)
    with tempfile.TemporaryDirectory(prefix="archviz-gguf-") as folder:
        named = os.path.join(folder, os.path.basename(source))  # the model is named after the file
        os.mkdir(named)
        path = os.path.join(named, "config.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        record = load_record(path, BuildOptions(), group=False, cache=False)
    record = compare(record, inventory)
    result = record.extra(EXTRA_KEY)
    if json_:
        emit_json({"config": config, "summary": summary_json(record), "checkpoint": result})
    else:
        out.print(summary_table(record, stored=False))  # the check's table below says what the file stores
        _print_result(result, "table", source, limit)
    raise typer.Exit(EXIT_OK if result["verdict"] == "match" else EXIT_MISMATCH)


def _rank_manifest(checkpoint: str, output: str, world_size: int, pattern: str | None, json_: bool) -> None:
    from ..checkpoint.ranks import rank_inventories, rank_manifest_bytes

    ranks = rank_inventories(checkpoint, world_size, pattern)
    data = rank_manifest_bytes(ranks, world_size, gz=output.endswith(".gz"))
    write_output(output, data)
    info = {"output": output, "world_size": world_size, "ranks": [{"rank": r, "file": name, "tensors":
                                                                    len(inv.tensors)} for r, name, inv in ranks],
            "bytes": len(data)}
    if json_:
        emit_json(info)
    elif output != "-":
        err.print(f"wrote {world_size} ranks' tensors ({', '.join(str(len(inv.tensors)) for _, _, inv in ranks)}) "
                  f"to {output} ({info['bytes']:,} bytes)")


__all__ = ["check", "gguf_summary", "manifest"]

"""`archviz cost SOURCE [SOURCE2]`: FLOPs of a prefill and of one decode step at a context length, KV cache bytes,
serving and training memory, counted from the code in one meta pass each (registers itself on the CLI)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Optional

import typer

from ..errors import ArchvizError, shown
from .app import app
from .validate import check_options
from .common import (
    FEEDBACK,
    atomic_write,
    emit_json,
    handled,
    output_option,
    out,
    overrides,
)
from .options import (
    Config,
    ConfigClass,
    Debug,
    EveryBlock,
    Gpus,
    Input,
    Json,
    KernelRules,
    ModelClass,
    NoCache,
    Quantized,
    Rank,
    Set,
    Source,
    Tokenizer,
    TrustRemoteCode,
    WorldSize,
)
from ..cost.options import CostOptions
from ..pipeline import cost_for, is_records_file, read_records
from ..records import dumps_compact
from ..sources.options import BuildOptions

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
CheckpointOpt = Annotated[Optional[str], typer.Option("--checkpoint", "-k", help="count SOURCE's weights as this "
                                                     "checkpoint stores them (a GGUF's real quant mix, safetensors "
                                                     "...), once it matches the model")]
MAX_TOKENS = 1 << 30  # the largest --seq/--context: a 10**12-token pass is refused, not run


def parse_tokens(text: str, flag_name: str) -> int:
    """'1M' -> 1,048,576; '128K' -> 131,072; '4096' -> 4096 (K and M are binary, as context lengths are quoted)."""
    m = re.fullmatch(r"\s*([0-9]{1,15})\s*([kKmMgG]?)\s*", text or "")
    if not m:
        raise ArchvizError(f"{flag_name} {shown(text or '')} is not a token count",
                           hint=f"write e.g. {flag_name} 1M, 128K or 4096 (K = 1024, M = 1024²)")
    n = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if n < 1:
        raise ArchvizError(f"{flag_name} {text!r}: must be at least 1 token",
                           hint=f"write e.g. {flag_name} 1M, 128K or 4096 (K = 1024, M = 1024²)")
    if n > MAX_TOKENS:
        raise ArchvizError(f"{flag_name} {text.strip()}: {n:,} tokens, over the {MAX_TOKENS:,} (1G) archviz counts at",
                           hint=f"write at most {flag_name} 1G (no model holds more context)")
    return n


@app.command()
def cost(
    source: Source,
    source2: Annotated[Optional[str], typer.Argument(help="a second model, shown beside the first with a ratio "
                                                          "column (B / A)")] = None,
    config: Config = None,
    config2: Annotated[Optional[str], typer.Option("--config2", help="config.json of SOURCE2 (a reference "
                                                                     "model.py)")] = None,
    set_: Set = None,
    set2: Annotated[Optional[list[str]], typer.Option("--set2", help="override a config field of SOURCE2: "
                                                                     "key=value (repeatable)")] = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    world_size: WorldSize = None,
    rank: Rank = None,
    trust_remote_code: TrustRemoteCode = False,
    quantized: Quantized = False,
    context: Annotated[Optional[str], typer.Option("--context", "-L", help="context length L of the decode step and the KV "
                                         "cache: 1M, 128K or a number (K = 1024); default 1M, or the model's limit "
                                         "(block_size, max_position_embeddings, ...) where shorter")] = None,
    batch: Annotated[Optional[int], typer.Option("--batch", "-B", help="sequences B (prefill, decode and KV cache); "
                                                 "default 1")] = None,
    seq: Annotated[Optional[str], typer.Option("--seq", "-T", help="prefill tokens T: the prefill pass's FLOPs and "
                                               "its activation peak (one chunk); default 4096, or the model's limit "
                                               "where shorter")] = None,
    kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="KV cache bytes in this dtype instead of the "
                                                    "code's: fp8, bf16, fp16, fp32, int8, fp4 or a torch dtype "
                                                    "name")] = None,
    kernel_rules: KernelRules = None,
    inputs: Input = None,
    every_block: EveryBlock = False,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="also write SOURCE's records, with the "
                                                  "cost extra (per-module FLOPs), to this JSON file")] = None,
    hardware: Annotated[Optional[str], typer.Option("--hardware", help="lower bounds on time per decode step and "
                                                    "prefill, tokens/s and fit on these devices: presets (h100, "
                                                    "h200, b200, gb200, mi300x, mi355x, l40s, rtx4090, m4-max, "
                                                    "m3-ultra), comma-separated, or a TOML file of the same "
                                                    "fields")] = None,
    gpus: Gpus = None,
    checkpoint: CheckpointOpt = None,
    no_cache: NoCache = False,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """What a token costs, from the code: prefill FLOPs at (B, T) and decode FLOPs for one new token at context L
    (per layer kind and module, attention/MLP split; routed experts counted for the tokens the policy routes them),
    KV cache bytes per token and at (B, L) from the caches the code keeps, and memory to serve (weights + KV +
    activation peak of one prefill chunk) and to train (weights, gradients, Adam states). `archviz cost
    hf:deepseek_v3 --context 1M`; two sources: side by side with B / A."""
    with handled(debug, json_):  # before the imports below: a typo costs no torch import
        check_options(sets={"--set": set_, "--set2": set2}, positive={"--batch": batch, "--gpus": gpus},
                      world_size=world_size, rank=rank)
        L = None if context is None else parse_tokens(context, "--context")
        T = None if seq is None else parse_tokens(seq, "--seq")
        devices = _devices(hardware, gpus)

    with handled(debug, json_), output_option(output, json_):
        given = [f for f, v in (("--context", context), ("--seq", seq), ("--batch", batch), ("--every-block",
                                every_block), ("--kernel-rules", kernel_rules), ("--input", inputs)) if v]
        asked = _kv_dtype(kv_dtype)
        if source2 is None and (config2 or set2):
            raise ArchvizError("--config2/--set2 apply to SOURCE2, which was not given",
                               hint="give a second source, or drop them")
        _load_pass_files(kernel_rules, inputs)
        options = CostOptions(batch=1 if batch is None else batch, seq=T, context=L, every_block=every_block,
                              inputs=tuple(inputs or ()), kernel_rules=kernel_rules)
        build = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                             config_class=config_class, tokenizer=tokenizer, world_size=world_size, rank=rank,
                             trust_remote_code=trust_remote_code, quantized=quantized)
        sides = [(source, build)] + ([(source2, BuildOptions(config=config2, overrides=overrides(set2, "--set2")))]
                                     if source2 is not None else [])
        records, reports = _all_records(sides, options, given, not no_cache, checkpoint, asked)
        if output:
            atomic_write(output, dumps_compact(records[0]) + "\n")
        _show(records, reports, _bounds(records, devices, gpus or 1, asked), json_, bool(devices))


def _kv_dtype(kv_dtype: str | None) -> str | None:
    """--kv-dtype's dtype name (None: the code's own)."""
    if kv_dtype is None:
        return None
    from ..cost.kv import kv_dtype_name

    asked = kv_dtype_name(kv_dtype)
    if asked is None:
        raise ArchvizError(f"--kv-dtype {kv_dtype!r} is not a dtype archviz knows",
                           hint="give fp8, bf16, fp16, fp32, int8, fp4 or a torch dtype name")
    return asked


def _load_pass_files(kernel_rules: str | None, inputs: list[str] | None) -> None:
    """--kernel-rules loaded and the form of --input checked, before any build."""
    if kernel_rules:
        from ..shapes.kernels import load_rules_file

        load_rules_file(kernel_rules)
    if inputs:
        from ..shapes import parse_inputs
        from ..shapes.inputs import spec_symbols

        parse_inputs(inputs, 2, 3, dict.fromkeys(spec_symbols(inputs), 1))  # the form, before any build


def _cost_records(source: str, build: BuildOptions, options: CostOptions, given: list[str], cache: bool) -> Any:
    """SOURCE's records with the cost extra: counted (archviz.pipeline.cost_for), or read from records written by
    `archviz cost -o` (rendered again, nothing rebuilt; `given`: the cost flags, which cannot apply to them)."""
    if not is_records_file(source):
        return cost_for(source, build, options, cache=cache, feedback=FEEDBACK)
    over = given + [f for f, v in (("--config", build.config), ("--set", build.overrides)) if v]
    if over:
        raise ArchvizError(f"{source}: its cost is already counted, so {', '.join(over)} cannot apply",
                           hint="give the model source to count it again with them, or drop them")
    record = read_records(source)
    if not record.extra("cost"):
        raise ArchvizError(f"{source}: these records carry no cost",
                           hint="write them with `archviz cost SOURCE -o FILE`, or give the model source")
    return record


def _all_records(sides: list[tuple[str, BuildOptions]], options: CostOptions, given: list[str], cache: bool,
                 checkpoint: str | None, kv_dtype: str | None) -> tuple[list[Any], list[Any]]:
    """Each source's records with the cost extra, and its report (KV bytes in `kv_dtype` where asked); SOURCE's
    checked against --checkpoint (archviz.checkpoint.compare), so that its report counts the bytes the file stores
    for the weights. The checkpoint's headers are read first: a bad file costs no build."""
    from ..cost.report import cost_report

    inventory = None
    if checkpoint:
        from ..checkpoint import open_checkpoint
        from .common import spinner

        with spinner(f"reading {checkpoint}"):
            inventory = open_checkpoint(checkpoint)
    records = [_cost_records(src, b, options, given, cache) for src, b in sides]
    if inventory is not None:
        from ..checkpoint.compare import compare

        records[0] = compare(records[0], inventory)
    return records, [cost_report(r, kv_dtype) for r in records]


def _show(records: list[Any], reports: list[Any], bounds: list[list[Any]], json_: bool, hardware: bool) -> None:
    """One model's cost tables, or two side by side with B / A; as JSON with --json; bounds with --hardware."""
    from ..render.cost import bounds_table, compare_table, cost_tables

    if json_:
        from ..render.results import cost_json

        emit_json(cost_json(records, reports, bounds if hardware else None))
        return
    out.print(cost_tables(reports[0]) if len(reports) == 1 else compare_table(*reports))
    if hardware:
        for r, hb in zip(reports, bounds):
            if len(reports) > 1:
                out.print(f"{r.name}:", markup=False, highlight=False)
            out.print(bounds_table(hb))


def _devices(hardware: str | None, gpus: int | None) -> list[Any]:
    """--hardware's devices, read before any build (a bad file costs no torch import)."""
    if hardware is None:
        if gpus is not None:
            raise ArchvizError("--gpus applies to --hardware, which was not given",
                               hint="add e.g. --hardware h200, or drop --gpus")
        return []
    from ..cost.hardware import resolve

    return resolve(hardware)


def _bounds(records: list[Any], devices: list[Any], gpus: int, kv_dtype: str | None) -> list[list[Any]]:
    """Each record's bounds on each device (none without --hardware)."""
    if not devices:
        return [[] for _ in records]
    from ..cost.bounds import bound
    from ..cost.kv import element_bytes

    element = element_bytes(kv_dtype) if kv_dtype else None
    return [[bound(rec, hw, gpus, element) for hw in devices] for rec in records]

"""`archviz build --cost`: the cost extra (archviz.cost.measure) attached to a model's site records, measured at the
standard context lengths up to the config's max positions, so the overview draws FLOPs and KV cache against L."""

from __future__ import annotations

from typing import Any

from ..errors import ArchvizError, ShapeError
from .common import _parse_sets, err, is_records_file, spinner


def with_cost(record: Any, source: str, config: str | None, sets: list[str] | None, model_class: str | None,
              tokenizer: str | None, world_size: int | None, rank: int | None, batch: int | None, seq: int | None,
              every_block: bool, inputs: list[str] | None, trust_remote_code: bool, quantized: bool,
              train: bool) -> Any:
    """`record` with `extra("cost")`: kept from a records file that has it (`archviz cost -o`), else counted."""
    if is_records_file(source):
        if not record.extra("cost"):
            raise ArchvizError(f"{source}: --cost, but these records carry no cost",
                               hint="write them with `archviz cost SOURCE -o FILE`, or give the model source")
        return record
    if record.extra("cost"):
        return record
    over = [f for f, v in (("--input", inputs), ("--train", train)) if v]
    if over:
        raise ArchvizError(f"--cost counts the model on token ids in eval mode, so {', '.join(over)} cannot apply",
                           hint=f"drop {' and '.join(over)}, or build without --cost")
    from ..cost.measure import SEQ_DEFAULT, measure

    try:
        with spinner(f"cost of {source} on meta (a decode step at each context length)"):
            measured = measure(source, config=config, overrides=_parse_sets(sets), model_class=model_class,
                               tokenizer=tokenizer, world_size=world_size, rank=rank,
                               trust_remote_code=trust_remote_code, quantized=quantized, batch=batch or 1,
                               seq=seq or SEQ_DEFAULT, context=None, contexts="auto", every_block=every_block)
    except ShapeError as e:
        err.print(f"warning: {source}: no cost ({e.line()}); the pages show no FLOPs", highlight=False, markup=False,
                  soft_wrap=True)
        return record
    return record.with_extra("cost", measured.extra("cost"))


def with_hardware(record: Any, source: str, devices: list[Any], gpus: int) -> Any:
    """`record` whose cost extra names the devices of `archviz build --hardware` (the overview draws tokens/s on
    each against context length)."""
    cost = record.extra("cost")
    if not cost:
        raise ArchvizError(f"{source}: --hardware draws tokens/s from the cost, which these records do not carry",
                           hint="add --cost, or give records written by `archviz cost SOURCE -o FILE`")
    return record.with_extra("cost", {**cost, "hardware": {"devices": {hw.key: hw.table() for hw in devices},
                                                           "gpus": gpus}})


__all__ = ["with_cost", "with_hardware"]

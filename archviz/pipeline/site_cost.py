"""The site's cost (`archviz build` with the cost option): the cost extra (archviz.cost.measure) attached to a model's site records, measured at the
standard context lengths up to the config's max positions, so the overview draws FLOPs and KV cache against L."""

from __future__ import annotations

from typing import Any

from ..errors import ArchvizError, ShapeError, option
from ..cost.options import CostOptions
from ..sources.options import BuildOptions
from .cost import cost_for
from .options import QUIET, Feedback, PassOptions
from .records import is_records_file


def with_cost(record: Any, source: Any, build: BuildOptions, passes: PassOptions, feedback: Feedback = QUIET) -> Any:
    """`record` with `extra("cost")`: kept from a records file that has it (`archviz cost -o`), else counted (at the
    pass's B and T where given)."""
    if not isinstance(source, str) or is_records_file(source):  # records: their cost is what they carry
        if not record.extra("cost"):
            raise ArchvizError(f"{source if isinstance(source, str) else record.source.spec}: {option('cost')}, but these "
                               "records carry no cost",
                               hint="write them with `archviz cost SOURCE -o FILE`, or give the model source")
        return record
    if record.extra("cost"):
        return record
    over = [f for f, v in ((option("input"), passes.inputs), (option("train"), passes.train)) if v]
    if over:
        raise ArchvizError(f"{option('cost')} counts the model on token ids in eval mode, so {', '.join(over)} cannot apply",
                           hint=f"drop {' and '.join(over)}, or build without {option('cost')}")
    from ..cost.measure import SEQ_DEFAULT

    options = CostOptions(batch=passes.batch or 1, seq=passes.seq or SEQ_DEFAULT, contexts="auto",
                          every_block=passes.every_block)
    try:  # a decode step at each context length
        measured = cost_for(source, build, options, feedback=feedback)
    except ShapeError as e:
        feedback.warning(f"{source}: no cost ({e.line()}); the pages show no FLOPs")
        return record
    return record.with_extra("cost", measured.extra("cost"))


def with_hardware(record: Any, source: str, devices: list[Any], gpus: int) -> Any:
    """`record` whose cost extra names the devices of the site's hardware option (the overview draws tokens/s on
    each against context length)."""
    cost = record.extra("cost")
    if not cost:
        raise ArchvizError(f"{source}: {option('hardware')} draws tokens/s from the cost, which these records do not carry",
                           hint=f"add {option('cost')}, or give records written by `archviz cost SOURCE -o FILE`")
    return record.with_extra("cost", {**cost, "hardware": {"devices": {hw.key: hw.table() for hw in devices},
                                                           "gpus": gpus}})


__all__ = ["with_cost", "with_hardware"]

"""One model of `archviz gallery`, in a worker process: its records with the cost extra, exactly as `archviz cost
SOURCE --context 32K` makes them (the same records-cache entry), or, where a stage fails, the records it got to and
the stage and one-line reason of the failure. Returns JSON-able data; prints nothing to stdout."""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

from ..errors import ArchvizError, ShapeError, one_line

CONTEXT = 32 << 10  # the decode step's context: the index's "decode FLOPs per token at 32K"
SEQ = 4096  # as `archviz cost` defaults


def _config_of(source: str) -> dict[str, Any] | None:
    """The transformers config a source is built from, as a dict: a type's default, a config.json's fields; None
    for other sources (a model.py, a factory)."""
    if source.startswith("hf:"):
        from ..sources.hf_types import default_config

        return default_config(source[3:]) or {}
    path = os.path.join(source, "config.json") if os.path.isdir(source) else source
    if not (path.endswith(".json") and os.path.isfile(path)):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "model_type" not in data:
        return None
    return {**data, "dtype": data.get("dtype") or data.get("torch_dtype")}


def build_choice(source: str, sets: list[str]) -> tuple[list[str], str, int]:
    """(the --set list to build with, what the page says of the dtype, the prefill's tokens T): the config's dtype
    where it names one (`dtype`, or `torch_dtype` in a config.json), else bfloat16 for a transformers config, set and
    said so; T as `archviz cost` defaults it, or the config's max positions where fewer (a BERT takes 512)."""
    from ..cost.curve import max_positions
    from ..sources.options import check_overrides

    config = _config_of(source)
    merged = {**(config or {}), **check_overrides(sets)}
    longest = max_positions(merged)
    seq = longest if longest is not None and longest < SEQ else SEQ
    if any(s.split("=", 1)[0].strip() in ("dtype", "torch_dtype") for s in sets):
        return sets, "as --set gives it", seq
    named = (config or {}).get("dtype")
    if isinstance(named, str) and named:
        return sets, f"{named} (the config's)", seq
    if config is not None:
        return [*sets, "dtype=bfloat16"], "bfloat16 (the config names none)", seq
    return sets, "as the code builds it", seq


def _options(sets: list[str], seq: int) -> tuple[Any, Any]:
    """The build and cost options of `archviz cost SOURCE --context 32K --seq T --set ...` (archviz/cli/cost.py), so
    one records-cache entry serves both commands."""
    from ..cost.options import CostOptions
    from ..sources.options import BuildOptions, check_overrides

    return BuildOptions(overrides=tuple(check_overrides(sets).items())), CostOptions(batch=1, seq=seq, context=CONTEXT)


def _cached(kind: str, source: str, sets: list[str], seq: int, build: Any, use: bool = True) -> Any:
    """The records-cache entry of `kind` for this model (the key of `archviz cost`'s, archviz.pipeline.cost_key)."""
    from ..pipeline import cached
    from ..pipeline.cost import cost_key
    from .common import NOTES

    return cached(kind, source, cost_key(*_options(sets, seq)), (None, None, None), build, use=use, feedback=NOTES)


def failure(stage: str, e: BaseException) -> dict[str, str]:
    line = e.line() if isinstance(e, ArchvizError) else f"{type(e).__name__}: {one_line(str(e))}"
    return {"stage": stage, "reason": line[:400]}


def _partial(source: str, sets: list[str], failed: BaseException) -> tuple[Any, list[dict[str, str]]]:
    """After the cost run failed: which stage it was, found by running them in turn (build, walk, shapes), and the
    records of the last one that worked (None when the build failed)."""
    from ..sources import build
    from ..sources.guard import model_code
    from ..walk import walk

    try:
        with model_code():
            built = build(source, _options(sets, SEQ)[0])
    except Exception as e:  # noqa: BLE001 - the model's code may raise anything; it is reported, not ours
        return None, [failure("build", e)]
    try:
        record = walk(built)
    except Exception as e:  # noqa: BLE001
        return None, [failure("walk", e)]
    from ..shapes import trace_shapes

    try:
        with model_code("running the model on meta"):
            record = trace_shapes(built, record)
    except Exception as e:  # noqa: BLE001
        return record, [failure("shapes", e)]
    return record, [failure("cost", failed)]


class _Miss(Exception):
    pass


PARTIAL = "gallery-partial"  # the records-cache kind of a model whose cost run failed: what it got to, and why


def from_cache(source: str, sets: list[str], seq: int) -> tuple[Any, list[dict[str, str]]] | None:
    """(records, failures) of run_one(source, sets) if the records cache holds them (nothing built, torch not
    imported): the cost run's records, or those of a run that failed after the build, with its failures; else None."""
    def miss() -> Any:
        raise _Miss

    for kind in ("cost", PARTIAL):
        try:
            record = _cached(kind, source, sets, seq, miss)
        except _Miss:
            continue
        return record, list((record.extra("gallery") or {}).get("failures") or [])
    return None


def run_one(source: str, sets: list[str], seq: int = SEQ, use_cache: bool = True) -> dict[str, Any]:
    """The gallery entry of one source built with `sets` and a prefill of `seq` tokens (build_choice's): {"source", "records" (compact JSON or
    None), "failures"}."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    from ..pipeline import cost_for
    from ..records import dumps_compact
    from .common import NOTES

    failures: list[dict[str, str]] = []
    try:
        record = cost_for(source, *_options(sets, seq), cache=use_cache, feedback=NOTES)
    except (ArchvizError, Exception) as e:  # noqa: BLE001
        record, failures = _partial(source, sets, e)
        if isinstance(e, ShapeError) and failures and failures[0]["stage"] == "cost":
            failures = [failure("shapes", e)]
        if record is not None:  # kept, so that a second run does not fail it again
            done = record.with_extra("gallery", {"failures": failures})
            record = _cached(PARTIAL, source, sets, seq, lambda: done, use_cache)
    return {"source": source, "failures": failures, "records": dumps_compact(record) if record is not None else None}


def main(argv: list[str] | None = None) -> None:
    """`python -m archviz.cli.gallery_work OUT SEQ SOURCE [KEY=VALUE ...] [--no-cache]`: run_one in a process of its own
    (what `archviz gallery --jobs N` starts for each model), its result written to the JSON file OUT."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    use_cache = "--no-cache" not in args
    args = [a for a in args if a != "--no-cache"]
    out, seq, source, sets = args[0], int(args[1]), args[2], args[3:]
    result = run_one(source, sets, seq, use_cache)
    from ..files.outputs import write_file

    write_file(out, json.dumps(result).encode("utf-8"))


__all__ = ["run_one", "from_cache", "build_choice", "failure", "CONTEXT", "main"]


if __name__ == "__main__":
    main()

"""`cost_for`: a source's records with `extra("cost")` (archviz.cost.measure: its own build, walk, passes and
grouping), with the records cache in front. What `archviz cost`, the site's cost and the gallery run."""

from __future__ import annotations

from dataclasses import asdict, replace

from ..cost.options import CostOptions
from ..records import ModelRecord
from ..sources.options import BuildOptions
from .cached import build_key, cached
from .options import QUIET, Feedback


def cost_for(source: str, build: BuildOptions, options: CostOptions, *, cache: bool = False,
             feedback: Feedback = QUIET) -> ModelRecord:
    """The records of SOURCE, shapes from the prefill pass, grouped, with the cost extra counted at `options`; from
    the records cache (kind "cost": one entry serves `archviz cost` and the gallery) when `cache`. The model's code
    runs under `archviz.sources.guard.model_code`. A transformers config that names no dtype is counted in bfloat16
    (archviz.cost.provenance: as the gallery counts it), and the cost extra says which dtype and why ("dtype")."""
    from ..cost.provenance import DTYPE_KEYS, dtype_choice

    choice = dtype_choice(source, dict(build.overrides))
    if choice.origin == "default" and not any(k in DTYPE_KEYS for k, _ in build.overrides):
        build = replace(build, overrides=(*build.overrides, ("dtype", choice.dtype)))

    def measured() -> ModelRecord:
        from ..cost.measure import measure
        from ..sources.guard import model_code

        if options.kernel_rules:
            from ..shapes.kernels import load_rules_file

            load_rules_file(options.kernel_rules)
        with feedback.step(f"cost of {source} on meta"), model_code("costing the model"):  # its prints: stderr
            record = measure(source, build, options)
        return record.with_extra("cost", {**record.extra("cost"), "dtype": choice.json()})

    return cached("cost", source, cost_key(build, options), (build.config, build.tokenizer, options.kernel_rules),
                  measured, use=cache, feedback=feedback)


def cost_key(build: BuildOptions, options: CostOptions) -> dict:
    """The records-cache key's options of a cost run (the gallery looks its models' entries up by it)."""
    return {**build_key(build), **asdict(options)}

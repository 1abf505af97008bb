"""archviz: model-architecture introspection and exact parameter accounting.

    >>> import archviz
    >>> rec = archviz.load("hf:llama", overrides={"num_hidden_layers": 2})
    >>> rec.summary.parameters

`load` builds the model on the meta device and walks it into a `ModelRecord`; every renderer consumes that record.
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import Any, Callable, Mapping

from .errors import ArchvizError, CheckpointError, ShapeError, SourceError
from .records import ModelRecord


def __getattr__(name: str) -> Any:
    """`archviz.kernels` without importing it first (`import archviz` then `@archviz.kernels.shape_rule(...)`)."""
    if name != "kernels":
        raise AttributeError(f"module 'archviz' has no attribute {name!r}")
    import importlib

    return importlib.import_module("archviz.kernels")


def build(source: str, options: Any = None, **fields: Any):
    """Build SOURCE on the meta device; returns the internal `Built` (live model + build facts). The build is said by
    a `BuildOptions` (archviz.sources) or by its fields as keywords: config, overrides (a mapping), model_class,
    config_class, tokenizer, world_size, rank, default_dtype, trust_remote_code, quantized."""
    from .sources import build as _build

    return _build(source, _build_options(options, fields))


def load(source: str, *, progress: Callable[[int, int], None] | None = None, **build_options: Any) -> ModelRecord:
    """Build SOURCE on meta and walk it into records (no shapes, no grouping: archviz.pipeline.records_for runs
    those); `build_options` as `build` takes them (`options=BuildOptions(...)`, or its fields); `progress`: the
    walk's callback(done, total)."""
    from contextlib import nullcontext

    from .pipeline import Feedback, records_for

    walked = Feedback(progress=lambda label: nullcontext(progress)) if progress else Feedback()
    return records_for(source, _build_options(build_options.pop("options", None), build_options), feedback=walked)


def _build_options(options: Any, fields: Mapping[str, Any]) -> Any:
    """A `BuildOptions` from one, or from its fields given as keywords (overrides as a mapping)."""
    from .sources import BuildOptions

    if options is not None:
        if fields:
            raise TypeError(f"give a BuildOptions or its fields, not both ({', '.join(fields)})")
        return options
    fields = dict(fields)
    fields["overrides"] = tuple((fields.get("overrides") or {}).items())
    return BuildOptions(**fields)


__all__ = ["__version__", "build", "load", "ModelRecord", "ArchvizError", "SourceError", "CheckpointError",
           "ShapeError"]

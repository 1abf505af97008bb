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


def build(source: str, *, config: str | None = None, overrides: Mapping[str, Any] | None = None,
          model_class: str | None = None, tokenizer: str | None = None, world_size: int | None = None,
          rank: int | None = None, default_dtype: str | None = None, trust_remote_code: bool = False,
          quantized: bool = False, config_class: str | None = None):
    """Build SOURCE on the meta device; returns the internal `Built` (live model + build facts)."""
    from .sources import BuildOptions
    from .sources import build as _build

    opts = BuildOptions(config=config, overrides=tuple((overrides or {}).items()), model_class=model_class,
                        config_class=config_class, tokenizer=tokenizer, world_size=world_size, rank=rank,
                        default_dtype=default_dtype, trust_remote_code=trust_remote_code, quantized=quantized)
    return _build(source, opts)


def load(source: str, *, progress: Callable[[int, int], None] | None = None, **build_options: Any) -> ModelRecord:
    """Build SOURCE on meta and walk it into records (no shapes)."""
    from .walk import walk

    return walk(build(source, **build_options), progress=progress)


__all__ = ["__version__", "build", "load", "ModelRecord", "ArchvizError", "SourceError", "CheckpointError",
           "ShapeError"]

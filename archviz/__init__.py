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


def load(source: Any, *, overrides: Mapping[str, Any] | None = None, inputs: Any = None, shapes: bool = False,
         group: bool = False, names: str | None = None, progress: Callable[[int, int], None] | None = None,
         **build_options: Any) -> ModelRecord:
    """The records of a model: SOURCE (any string the CLI takes), a live `nn.Module` (any device: walked where it
    is, its weights never read or copied; a `torch.compile`, DDP or peft wrapper taken off and said in the records),
    a callable returning one (called on meta with `overrides` as its keyword arguments) or a transformers config.

    `overrides`: config fields (a factory's keyword arguments) as a mapping; `inputs` (the meta pass's forward
    inputs): a mapping of names to tensors, shapes (`{"x": (1, 3, 224, 224)}`) or input specs (`"B,T,512:float32"`),
    or a list of specs (`["x=B,3,224,224"]`); `shapes`: run the meta forward pass (given `inputs`, it runs);
    `group`: group the tree (titles from the `names` file); `build_options`: the fields of a `BuildOptions`
    (config, model_class, ...) or `options=BuildOptions(...)`; `progress`: the walk's callback(done, total).

        >>> import archviz
        >>> rec = archviz.load("hf:llama", overrides={"num_hidden_layers": 2, "hidden_size": 64,
        ...                    "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 100})
        >>> rec.summary.parameters == 100 * 64 * 2 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
        True
    """
    from contextlib import nullcontext

    from .pipeline import Feedback, PassOptions, records_for

    specs = _input_specs(inputs)
    walked = Feedback(progress=lambda label: nullcontext(progress)) if progress else Feedback()
    if overrides is not None:
        build_options["overrides"] = overrides
    return records_for(source, _build_options(build_options.pop("options", None), build_options),
                       PassOptions(shapes=shapes or bool(specs), inputs=specs), group=group, names=names,
                       feedback=walked)


def _input_specs(inputs: Any) -> tuple[str, ...]:
    """`load`'s `inputs` as the pass's input specs (`name=dims:dtype`, the grammar of archviz.input_specs)."""
    if inputs is None:
        return ()
    if isinstance(inputs, str):
        return (inputs,)
    if not isinstance(inputs, Mapping):
        return tuple(inputs)
    out = []
    for name, value in inputs.items():
        if value is None:
            out.append(f"{name}=none")
        elif isinstance(value, str):
            out.append(f"{name}={value}")
        elif isinstance(value, bool):
            out.append(f"{name}=bool:{str(value).lower()}")
        elif isinstance(value, int):
            out.append(f"{name}=int:{value}")
        elif isinstance(value, float):
            out.append(f"{name}=float:{value!r}")
        elif hasattr(value, "shape") and hasattr(value, "dtype"):  # a tensor (read for its shape and dtype only)
            out.append(f"{name}={','.join(map(str, value.shape))}:{str(value.dtype).removeprefix('torch.')}")
        else:
            out.append(f"{name}={','.join(map(str, value))}")
    return tuple(out)


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

"""Python objects as sources (`archviz.load(obj)`): a model already built, a factory callable, a transformers config.

- a live `nn.Module`, on any device: walked where it is (the walk reads each tensor's shape and dtype, never its
  values); the meta pass runs on `on_meta`'s stand-in, a copy of the modules whose tensors are empty ones on meta,
  so the weights are never read, moved or copied. A wrapper training code puts around a model (`torch.compile`,
  DistributedDataParallel, a peft adapter model; FSDP2's `fully_shard`, which wraps in place) is taken off, noted,
  and said in the records (`extra("wrapper")`: which wrappers, and the parameters of the modules a wrapper added,
  beside the base model's);
- a callable: called on meta with `BuildOptions.overrides` as its keyword arguments, as a factory SOURCE is;
- a transformers `PretrainedConfig`: its model built on meta, as `hf:<model_type>` with that config.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
from typing import Any

from ..errors import ShapeError, SourceError
from ..records import ModelRecord
from .options import BuildOptions, Built, _versions

WRAPPER_KEY = "wrapper"


def build_live(obj: Any, options: BuildOptions) -> Built:
    """`obj` (a live model, a callable returning one, or a transformers config) as a `Built`."""
    import torch

    given = [f.name for f in dataclasses.fields(options) if f.name not in ("overrides", "device")
             and getattr(options, f.name) != f.default]
    if given:  # options of a build from files: an object is built already, or builds itself
        raise SourceError(f"{type(obj).__name__}: {', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to "
                          "a model built from a SOURCE string, not to a Python object",
                          hint=f"drop {', '.join(given)}, or give the model's SOURCE string")
    if isinstance(obj, torch.nn.Module):
        if options.overrides:
            raise SourceError(f"{type(obj).__name__}: a model already built takes no overrides",
                              hint="give its factory or its config with the overrides, or build it with them")
        return _module_built(obj, [])
    config_class = _transformers_class("PretrainedConfig")
    if config_class is not None and isinstance(obj, config_class):
        return _config_built(obj, options)
    if callable(obj):
        return _factory_built(obj, options)
    raise SourceError(f"{type(obj).__name__} is not a model source",
                      hint="give a SOURCE string, an nn.Module, a callable that returns one, or a transformers "
                           "config")


def _transformers_class(name: str) -> Any:
    """transformers' class `name`, only where transformers is imported already (an object of it can exist only then)."""
    module = sys.modules.get("transformers")
    return getattr(module, name, None) if module is not None else None


def _config_built(config: Any, options: BuildOptions) -> Built:
    from .hf import built_from_config

    if options.overrides:
        config = type(config).from_dict({**config.to_dict(), **dict(options.overrides)})
    name = getattr(config, "_name_or_path", "") or config.model_type
    return built_from_config(f"hf:{config.model_type}", config, name, options)


def _factory_built(fn: Any, options: BuildOptions) -> Built:
    import torch

    from .meta import meta_build
    from .process_group import constructed

    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    kwargs = dict(options.overrides)

    def construct() -> tuple[Any, Any]:
        from .construct import module_held

        with meta_build(options.device) as notes:
            made = fn(**kwargs)
            config_class = _transformers_class("PretrainedConfig")
            if not isinstance(made, torch.nn.Module) and not (config_class and isinstance(made, config_class)):
                model, how = module_held(made)  # a config or spec that builds the model
                if model is not None:
                    notes.items.append(f"built as {name}(){how}: {name} returned a {type(made).__name__}")
                    made = model
            return made, notes

    try:
        (model, notes), started = constructed(construct)
    except Exception as e:  # noqa: BLE001 - the user's factory raised
        raise SourceError(f"{name}: building the model raised {type(e).__name__}: {e}",
                          hint="check the factory's keyword arguments (the overrides)") from e
    config_class = _transformers_class("PretrainedConfig")
    if config_class is not None and isinstance(model, config_class):  # a config class: its model
        return _config_built(model, BuildOptions())
    if not isinstance(model, torch.nn.Module):
        raise SourceError(f"{name}: returned {type(model).__name__}, not a torch.nn.Module",
                          hint="the factory must return the model (an nn.Module)")
    built = _module_built(model, list(notes.items) + started)
    config = {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool, list)) or v is None}
    return dataclasses.replace(built, spec=f"live:{name}", name=name.rsplit(".", 1)[-1], config=config,
                               overrides=kwargs)


def _module_built(obj: Any, notes: list[str]) -> Built:
    model, wrappers = unwrap(obj)
    own = wrapper_paths(model)
    if wrappers:
        notes = [*notes, f"{' around '.join(wrappers)} taken off: the records are of the {type(model).__name__} "
                         "it wraps" + (", with the modules the adapter added (extra 'wrapper')" if own else "")]
    wrapper = {"wrappers": wrappers, "own_modules": own} if wrappers or own else None
    name = type(model).__name__
    pretrained = _transformers_class("PreTrainedModel")
    if pretrained is not None and isinstance(model, pretrained):
        from .hf import model_built

        config = model.config
        built = model_built(model, f"live:{name}", getattr(config, "_name_or_path", "") or config.model_type, notes)
        return dataclasses.replace(built, wrapper=wrapper)
    module = sys.modules.get(type(model).__module__)
    root = os.path.dirname(getattr(module, "__file__", "") or "")
    return Built(model=model, spec=f"live:{name}", kind="factory", name=name, config={}, overrides={},
                 notes=notes, roots=(root,) if root else (), display_roots=_display_roots(module),
                 versions=_versions(), wrapper=wrapper)


def _display_roots(module: Any) -> tuple[tuple[str, str], ...]:
    """A module's files named from the folder above its top-level package (`mypkg/models.py`)."""
    top = sys.modules.get(getattr(module, "__name__", "").split(".")[0])
    f = getattr(top, "__file__", None)
    if not f:
        return ()
    base = os.path.dirname(f)
    return ((os.path.dirname(base) if os.path.basename(f) == "__init__.py" else base, ""),)


def unwrap(model: Any) -> tuple[Any, list[str]]:
    """The model inside the wrappers training code puts around one, and those wrappers, outermost first. Only
    classes of packages already imported are looked for (a model wrapped by one has imported it)."""
    import torch

    wrappers: list[str] = []
    while True:
        inner, what = _inner(model, torch)
        if inner is None:
            break
        wrappers.append(what)
        model = inner
    fsdp = sys.modules.get("torch.distributed.fsdp")
    if fsdp is not None and hasattr(fsdp, "FSDPModule") and isinstance(model, fsdp.FSDPModule):
        # fully_shard wraps in place (the class is swapped, the parameters become DTensors): walked as it is, each
        # parameter by its global shape
        wrappers.append("FSDP2 fully_shard (in place: parameters counted at their global shapes)")
    return model, wrappers


def _inner(model: Any, torch: Any) -> tuple[Any, str]:
    frame = sys.modules.get("torch._dynamo.eval_frame")
    if frame is not None and isinstance(model, frame.OptimizedModule):
        return model._orig_mod, "torch.compile (OptimizedModule)"
    if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        return model.module, type(model).__name__
    peft = sys.modules.get("peft")
    if peft is not None and isinstance(model, peft.PeftModel):
        return model.get_base_model(), f"peft {type(model).__name__}"
    return None, ""


def wrapper_paths(model: Any) -> list[str]:
    """Paths of the modules an adapter library added to the model (peft's tuner layers name theirs in
    `adapter_layer_names`: lora_A, lora_B, ...), in pre-order."""
    out = []
    for path, mod in model.named_modules():
        for name in getattr(mod, "adapter_layer_names", ()) or ():
            child = mod._modules.get(name) if isinstance(name, str) else None
            if child is not None:
                out.append(f"{path}.{name}" if path else name)
    return out


def with_wrapper(built: Built, record: ModelRecord) -> ModelRecord:
    """The record with `extra("wrapper")` where `built` was handed in wrapped: the wrappers, and the parameters of the
    modules a wrapper added beside the base model's (their sum is the record's total)."""
    if built.wrapper is None:
        return record
    totals = {m.path: m.totals.parameters for m in record.modules}
    own = sum(totals.get(p, 0) for p in built.wrapper["own_modules"])
    return record.with_extra(WRAPPER_KEY, {**built.wrapper, "own_parameters": own,
                                           "base_parameters": record.summary.parameters - own})


def on_meta(built: Built) -> Built:
    """`built` itself where every tensor of its model is on meta; else the same with a stand-in model for the meta
    pass: the modules copied, each parameter and buffer replaced by an empty tensor on meta of its shape and dtype
    (a parameter stays a parameter, a tensor held twice stays one tensor). The weights are never read or copied."""
    import torch

    model = built.model
    held = [t for m in model.modules() for t in (*m._parameters.values(), *m._buffers.values()) if t is not None]
    if all(t.device.type == "meta" for t in held):
        return built
    memo: dict[int, Any] = {}
    for t in held:
        if id(t) not in memo:
            empty = torch.empty(t.shape, dtype=t.dtype, device="meta")
            memo[id(t)] = torch.nn.Parameter(empty, t.requires_grad) if isinstance(t, torch.nn.Parameter) else empty
    for m in model.modules():  # tensors kept as plain attributes (a rotary table): stood in for too
        for v in m.__dict__.values():
            if isinstance(v, torch.Tensor) and id(v) not in memo:
                memo[id(v)] = torch.empty(v.shape, dtype=v.dtype, device="meta")
    try:
        twin = copy.deepcopy(model, memo)
    except Exception as e:  # noqa: BLE001 - the user's modules may hold what cannot be copied
        raise ShapeError(f"{type(model).__name__}: its modules could not be copied onto meta for the pass "
                         f"({type(e).__name__}: {e})", hint="load it without shapes") from None
    return dataclasses.replace(built, model=twin)

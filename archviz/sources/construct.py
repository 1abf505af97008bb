"""A builder or factory called on meta: `fn(**kwargs)` under the meta build (sources.meta), a process group started
for code that insists on one, and what it raises said in one line. Used by a factory source and by a model file
whose model is made by a builder function."""

from __future__ import annotations

import inspect
import os
import re
from typing import Any

import torch

from ..errors import ArchvizError, SourceError, UnknownArgument, option
from .meta import CUDA_HINT, build_failure_hint, is_cuda_insistence, meta_build, user_frame
from .guard import time_limit
from .stubs import MissingPackage, StubRegistry


def _required(fn: Any, kwargs: dict[str, Any]) -> list[str]:
    """The parameters `fn` requires (no default) that `kwargs` does not give; none where its signature is hidden."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in params if p.kind in kinds and p.default is p.empty and p.name not in kwargs]


def call_factory(fn: Any, kwargs: dict[str, Any], spec: str, root: str, device: str = "meta",
                 stubs: StubRegistry | None = None) -> tuple[Any, list[str]]:
    """`fn(**kwargs)` on meta: the model it returns and the build's notes; what it raises said in one line. With the
    registry of the module's stubs, a result that is a job's config reaches its model even where the job's other
    parts call into packages that are not installed (`_assumed`)."""
    from .options import SET_VALUES
    from .process_group import constructed

    attr = getattr(fn, "__name__", spec)
    kwargs, said = namespace_argument(fn, kwargs)
    missing = _required(fn, kwargs)
    if missing:  # said before anything is built, as for a model class's required arguments
        raise SourceError(f"{spec}: {attr} needs {', '.join(missing)}, which {'was' if len(missing) == 1 else 'were'} "
                          "not given", hint=f"give {'it' if len(missing) == 1 else 'them'} with {option('set')} "
                                            f"{missing[0]}=VALUE")

    def construct() -> tuple[Any, Any]:
        with meta_build(device) as notes, time_limit(f"building {attr}"):
            made = _made(fn, kwargs, stubs)  # --set key=value: the factory's keyword arguments
            model, how = (made, "") if isinstance(made, torch.nn.Module) else module_held(made)  # a config or spec
            assumed = _assumed(stubs, made, model, attr)
            if model is not made and model is not None:
                notes.items.append(f"built as {attr}(){how}: {attr} returned a {type(made).__name__}")
                made = model
            notes.items.extend(assumed)
            return made, notes

    try:
        (model, notes), started = constructed(construct)  # a process group started for code that insists on one
    except ArchvizError:
        raise
    except Exception as e:  # noqa: BLE001
        if stubs is not None and stubs.assumed:  # what failed may be a stub's answer: the missing package said
            raise stubs.not_installed(stubs.assumed[0][0]) from e
        where = user_frame(e, (root,)) or spec
        # the factory's own signature refused an argument (not a TypeError from deeper in its code)
        lacked = [k for k in kwargs if isinstance(e, TypeError) and f"unexpected keyword argument '{k}'" in str(e)]
        if lacked:
            raise UnknownArgument(f"{spec}: {attr} does not take {', '.join(lacked)} ({e})",
                              hint=f"{option('set')} key=value passes keyword arguments to a factory: give only the "
                                   "ones it takes") from None
        if is_cuda_insistence(e):
            raise SourceError(f"{spec}: the model insists on CUDA at {where}: {e}", hint=CUDA_HINT) from None
        lacking = re.fullmatch(r"the config has no '(\w+)'", str(e)) if said and isinstance(e, AttributeError) else None
        if lacking:  # the namespace made from the launcher's defaults lacks what the code reads
            raise SourceError(f"{spec}: {attr} reads {lacking.group(1)} at {where}, which {said[0].split(':')[0]} "
                              f"does not hold ({said[0].split(': ', 1)[1].split(',')[0]})",
                              hint=f"give it with {option('set')} {lacking.group(1)}=VALUE, or in the JSON of "
                                   f"{option('config')}") from None
        strings = [f"{k}={v!r}" for k, v in kwargs.items() if isinstance(v, str)]
        hint = build_failure_hint(e, kwargs)
        if strings:  # a value the user meant as something else may have stayed a string
            hint = (f"{', '.join(strings)} {'was' if len(strings) == 1 else 'were'} passed as "
                    f"{'a string' if len(strings) == 1 else 'strings'} ({option('set')}: {SET_VALUES}); run with "
                    f"{option('debug')} for "
                    "the traceback")
        raise SourceError(f"{spec}: building the model raised {type(e).__name__}: {e} ({where})", hint=hint) from e
    if not isinstance(model, torch.nn.Module):
        raise SourceError(f"{spec}: returned {type(model).__name__}, not a torch.nn.Module",
                          hint="the factory must return the model (an nn.Module)")
    return model, said + list(notes.items) + started


def namespace_argument(fn: Any, kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`fn`'s launcher namespace (`build_model(args)`) made, where it takes one and it was not given: the defaults
    of the project's argument parser (sources.launcher), the keyword arguments `fn` does not take (a config JSON's
    keys, overrides values) over them, as one attribute bag. Returns (the keyword arguments, notes)."""
    from .configs import AttrBag
    from .launcher import launcher_defaults, namespace_parameter

    name = namespace_parameter(fn, _required(fn, kwargs))
    if name is None:
        return kwargs, []
    params = inspect.signature(fn).parameters
    meant = {k: v for k, v in kwargs.items() if k not in params}
    found = launcher_defaults(fn)
    if not meant and found is None:
        return kwargs, []
    defaults, where = found or ({}, "")
    given = {k: v for k, v in kwargs.items() if k in params}
    said = f"{name}: " + (f"the defaults of the argument parser in {os.path.basename(where)} ({len(defaults)} "
                          f"options)" if found else "the config's keys as attributes")
    if found and meant:
        said += f", {len(meant)} of them given ({', '.join(f'{k}={v!r}' for k, v in list(meant.items())[:6])}" \
                f"{', ...' if len(meant) > 6 else ''})"
    return {**given, name: AttrBag({**defaults, **meant})}, [said]


def _made(fn: Any, kwargs: dict[str, Any], stubs: StubRegistry | None) -> Any:
    """`fn(**kwargs)`; where it calls into a plain package that is not installed (MissingPackage) and the module's
    stub registry is given, called again with such calls answered by stubs (`StubRegistry.assembling_job`), so that
    a job's config whose other parts need the package still reaches its model (`_assumed` decides whether it
    did). A factory that calls none runs once, as it always did."""
    try:
        return fn(**kwargs)
    except MissingPackage:
        if stubs is None:
            raise
    with stubs.assembling_job():
        return fn(**kwargs)


def _assumed(stubs: StubRegistry | None, made: Any, model: Any, attr: str) -> list[str]:
    """What was assumed where the factory called into packages that are not installed (each answered by a stub):
    nothing where it called none; the note of what was stubbed and which parts of its result hold the stubs where
    the model it holds was built without them; else the first such package refused as not installed (the model
    itself called it, holds what it returned, or none was found)."""
    if stubs is None or not stubs.assumed:
        return []
    made_ids = {id(value) for _, value in stubs.assumed}
    if model is None or model is made or any(_reaches(v, made_ids, 1) for m in model.modules()
                                             for v in vars(m).values()):
        raise stubs.not_installed(stubs.assumed[0][0])
    called = sorted({qualname for qualname, _ in stubs.assumed})
    packages = sorted({q.split(".")[0] for q in called})
    holders = [name for name, value in _fields(made) if _reaches(value, made_ids, _HELD_DEPTH + 2)]
    held = f"held by its {', '.join(holders)}" if holders else "held by none of its fields"
    return [f"{', '.join(called)} stubbed while {attr}() ran ({', '.join(packages)} not installed): {held}; the "
            "model was built without them"]


def _reaches(value: Any, ids: set[int], depth: int) -> bool:
    """Whether `value`, its fields or items (`depth` levels down) are one of the objects `ids` names."""
    if id(value) in ids:
        return True
    if depth == 0:
        return False
    items = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, (list, tuple)) \
        else [v for _, v in _fields(value)]
    return any(_reaches(v, ids, depth - 1) for v in items)


_BUILD_METHODS = ("build", "build_model", "make_model", "create_model", "get_model")
_HELD_DEPTH = 2


def module_held(obj: Any, depth: int = _HELD_DEPTH) -> tuple[Any, str]:
    """The model a factory's result that is no module holds or builds: a method of it that takes no arguments and
    returns an nn.Module (`config.build()`), else the same found in its fields (`spec.model.build()`, a training
    config's `model_spec.model`), `depth` fields deep; where several fields hold one, the one with the most
    parameters. A config class nested in the class it configures (`Trainer.Config`) builds that class: where that is
    no nn.Module (a training job), its own build methods are never called, only its fields looked in. Returns
    (model, how it was reached) or (None, "")."""
    for name in _BUILD_METHODS if _may_build_module(type(obj)) else ():
        method = getattr(type(obj), name, None)
        if callable(method) and _no_arguments(getattr(obj, name)):
            made = getattr(obj, name)()
            if isinstance(made, torch.nn.Module):
                return made, f".{name}()"
    if depth == 0:
        return None, ""
    fields = _fields(obj)
    named = [f for f in fields if _MODEL_FIELD.search(f[0])]
    for group in (named, [f for f in fields if f not in named]):  # a field named for the model first: no other built
        found = []
        for field, value in group:
            model, how = (value, "") if isinstance(value, torch.nn.Module) else module_held(value, depth - 1)
            if model is not None:
                found.append((sum(p.numel() for p in model.parameters()),
                              f"{'' if field.startswith('[') else '.'}{field}{how}", model))
        if found:
            _, how, model = max(found, key=lambda f: f[0])
            return model, how
    return None, ""


def _may_build_module(cls: type) -> bool:
    """False where `cls` is nested in a class that is no nn.Module (`Trainer.Config`: what it builds is the
    trainer, which starts a job); True where it is nested in none, or in a module."""
    import sys

    *outer, _ = cls.__qualname__.split(".")
    owner: Any = sys.modules.get(cls.__module__)
    for part in outer:
        owner = getattr(owner, part, None)
    return not outer or not inspect.isclass(owner) or issubclass(owner, torch.nn.Module)


_MODEL_FIELD = re.compile(r"model|module|net", re.I)  # `model`, `model_spec`, `network`: where a spec keeps it


def _no_arguments(method: Any) -> bool:
    import inspect

    try:
        return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                   for p in inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return False


_ITEMS = 16  # items of a tuple, list or dict looked at


def _fields(obj: Any) -> list[tuple[str, Any]]:
    """The fields of a dataclass or plain object (its __dict__ or __slots__), the items of a tuple, list or dict
    (by index or key), never those of another builtin value."""
    import dataclasses

    if isinstance(obj, (list, tuple)):  # (model, criterion, postprocessors): each item, by its index
        return [(f"[{i}]", v) for i, v in enumerate(obj[:_ITEMS])]
    if isinstance(obj, dict):
        return [(f"[{k!r}]", v) for k, v in list(obj.items())[:_ITEMS] if isinstance(k, str)]
    if isinstance(obj, (str, bytes, int, float, bool, type(None), set, type)) or callable(obj):
        return []
    if dataclasses.is_dataclass(obj):
        return [(f.name, getattr(obj, f.name, None)) for f in dataclasses.fields(obj)]
    names = list(getattr(obj, "__dict__", {}))
    names += [n for c in type(obj).__mro__ for n in getattr(c, "__slots__", ()) if isinstance(n, str)]
    return [(n, getattr(obj, n, None)) for n in dict.fromkeys(names) if not n.startswith("_")]


__all__ = ["namespace_argument", "call_factory", "module_held"]

"""A model's config object made from a JSON object, whatever kind of object its constructor takes.

The constructor's first parameter is the config when it is annotated with a class that is not a plain value, a
tensor or a module, or is named like one (`args`, `config`, `cfg`, ...). That class is made from the JSON: a
dataclass or a class of keyword arguments from its fields, a dict subclass (`AttrDict`, yacs' `CfgNode`) from the
dict, a bare class by setting its attributes, a class that takes the dict whole with it. An unannotated config with no
class of the file that fits is an `AttrBag`: the JSON's keys as attributes and as items, nested tables too.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from typing import Any

from ..errors import SourceError, option
from .options import suggest

_CONFIG_PARAMS = ("args", "config", "params", "cfg", "conf", "model_args", "model_config", "hparams", "h", "hps",
                  "hp", "opt", "opts")
_PLAIN = (int, float, str, bool, bytes, list, tuple, dict, set)


def _init_params(cls: type) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    return [p for p in list(sig.parameters.values())[1:] if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _takes_kwargs(cls: type) -> bool:
    if cls.__init__ is object.__init__:
        return False
    try:
        return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())
    except (TypeError, ValueError):
        return False


def _annotated_class(owner: type, p: inspect.Parameter) -> type | None:
    """The class a constructor parameter is annotated with (`args: ModelArgs`, `config: "GPTConfig"`,
    `Optional[X]`), or None."""
    import typing

    a = p.annotation
    if a is p.empty:
        return None
    if isinstance(a, str):
        scope = vars(sys.modules.get(owner.__module__) or object)
        a = a.strip("'\" ").replace("Optional[", "").rstrip("]").split("|")[0].strip()
        found: Any = scope.get(a.split(".")[0])
        for part in a.split(".")[1:]:
            found = getattr(found, part, None)
        a = found
    if not inspect.isclass(a):
        a = next((x for x in typing.get_args(a) if inspect.isclass(x) and x is not type(None)), None)
    return a if inspect.isclass(a) else None


def _config_param(cls: type) -> tuple[inspect.Parameter, type | None] | None:
    """`cls`'s first constructor parameter when it is a config: annotated with a class that is not a plain value,
    a tensor or a module, or named like one (args, config, params, ...). With the class it is annotated with."""
    import torch

    ps = _init_params(cls)
    if not ps:
        return None
    first = ps[0]
    ann = _annotated_class(cls, first)
    if ann is not None:
        if ann is dict and first.name in _CONFIG_PARAMS:  # `cfg: dict`: the JSON object itself
            return first, dict
        if issubclass(ann, (torch.nn.Module, torch.Tensor)) or issubclass(ann, _PLAIN) and not _dict_like(ann):
            return None
        return first, ann
    return (first, None) if first.name in _CONFIG_PARAMS else None


def _dict_like(cls: type) -> bool:
    """A dict subclass (`AttrDict`, yacs' `CfgNode`): made from the JSON object whole."""
    return issubclass(cls, dict) and cls is not dict


def _whole(cls: type) -> bool:
    """A class whose constructor takes the config as one dict (`def __init__(self, d): self.__dict__.update(d)`)."""
    ps = _init_params(cls)
    return (not dataclasses.is_dataclass(cls) and len(ps) >= 1 and ps[0].default is ps[0].empty
            and all(p.default is not p.empty for p in ps[1:]) and ps[0].annotation in (ps[0].empty, dict, "dict"))


def config_fields(cls: type) -> set[str] | None:
    """The names a config class takes: its dataclass fields or constructor parameters; None when it takes any
    (**kwargs, a dict subclass, a class that takes the dict whole, or a bare class whose attributes are set one by
    one)."""
    if issubclass(cls, dict):
        return None
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls) if f.init}
    if _takes_kwargs(cls):
        return None
    ps = _init_params(cls)
    return {p.name for p in ps} if ps and not _whole(cls) else None


def _required(cls: type) -> set[str]:
    if issubclass(cls, dict) or _whole(cls):
        return set()
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    return {p.name for p in _init_params(cls) if p.default is p.empty}


def _fit(cls: type, keys: set[str]) -> int | None:
    """How many of the config's keys `cls` takes, or None when it lacks a field the config does not give."""
    if _required(cls) - keys:
        return None
    fields = config_fields(cls)
    return len(keys) if fields is None else len(keys & fields)


def make_config(cls: type, values: dict[str, Any]) -> Any:
    """The config object of class `cls` holding `values` (see the module's docstring for each kind of class)."""
    if issubclass(cls, dict) or cls is AttrBag:
        return cls(values)
    if _whole(cls):
        return cls(dict(values))
    fields = config_fields(cls)
    if fields is None and not _takes_kwargs(cls) and not _init_params(cls):  # a bare class: attributes set on it
        obj = cls()
        for k, v in values.items():
            setattr(obj, k, v)
        return obj
    return cls(**{k: v for k, v in values.items() if fields is None or k in fields})


def preset_maker(cls: type, given: set[str]) -> tuple[Any, str] | None:
    """(the classmethod of `cls` that makes a named preset, the key naming it) where one of `given` is the first,
    required parameter of a `from_*` classmethod of `cls` (`Config.from_name(name, **kwargs)`): setting that key
    asks for the preset, not for the field alone."""
    for attr in sorted(vars(cls)):
        if not attr.startswith("from_") or not isinstance(vars(cls)[attr], classmethod):
            continue
        try:
            params = list(inspect.signature(getattr(cls, attr)).parameters.values())
        except (TypeError, ValueError):
            continue
        if params and params[0].name in given and params[0].default is params[0].empty and \
                all(p.default is not p.empty or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params[1:]):
            return getattr(cls, attr), params[0].name
    return None


def absent_file_hint(error: BaseException, config: dict[str, Any]) -> str | None:
    """A config value naming a file that is not there, which the error names (`assert os.path.isfile(path), path`;
    a FileNotFoundError): the constructor reads it (a tokenizer, a vocabulary), so the config is the cause."""
    said = str(error) + " " + str(getattr(error, "filename", "") or "")
    for key, value in config.items():
        if isinstance(value, str) and len(value) > 2 and value in said and not os.path.exists(value):
            return (f"the config's {key} names {value!r}, a file the model's code reads while it is built, and it is "
                    f"not there: give its path with {option('set')} {key}=PATH")
    return None


def config_dict(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if isinstance(obj, dict):
        return {k: v for k, v in obj.items() if isinstance(k, str) and not k.startswith("_")}
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}



def find_config_class(module: Any, model_cls: type, wanted: str | None, keys: set[str]) -> type | None:
    """The class `model_cls` is built from: config_class, else its constructor's annotation, else the dataclass of
    the file (or imported there) that the config's keys fit best. None when the model takes no config."""
    scope = {k: v for k, v in vars(module).items() if inspect.isclass(v)}
    if wanted:
        if wanted in scope:
            return scope[wanted]
        raise SourceError(f"{option('config-class')} {wanted}: no such class in {os.path.basename(module.__file__)}",
                          hint=suggest(wanted, sorted(scope)) or "name the class the model is built from")
    taken = _config_param(model_cls)
    if taken is None:
        return None
    if taken[1] is not None:
        return taken[1]
    import torch

    cands = [c for c in scope.values() if _config_like(c) and not issubclass(c, torch.nn.Module)]
    fits = {c: f for c in cands if (f := _fit(c, keys)) is not None and (f or not keys)}
    if not fits:  # no class of the file takes it: the JSON's keys as attributes (and items), as the code reads them
        return AttrBag
    best = max(fits.values())
    top = [c for c, f in fits.items() if f == best]
    if len(top) > 1:
        own = [c for c in top if c.__module__ == module.__name__]
        top = own or top
    if len(top) > 1:
        named = [c for c in top if c.__name__ == "ModelArgs" or c.__name__.endswith(_CONFIG_SUFFIXES[:2])]
        top = named[:1] if len(named) == 1 else top
    if len(top) > 1:
        raise SourceError(f"{os.path.basename(module.__file__)}: {', '.join(c.__name__ for c in top)} all fit the "
                          f"config of {model_cls.__name__}", hint=f"name one with {option('config-class')}")
    return top[0]




_CONFIG_SUFFIXES = ("Args", "Config", "Cfg", "CfgNode", "Params", "Hparams", "AttrDict")


def _config_like(cls: type) -> bool:
    """A class of the file the JSON could make when the constructor does not say which: a dataclass, a dict
    subclass, or a class named like a config."""
    return dataclasses.is_dataclass(cls) or _dict_like(cls) or cls.__name__.endswith(_CONFIG_SUFFIXES)


class AttrBag(dict):
    """A config the code reads by attribute or by item (`cfg.dim`, `cfg["dim"]`, `cfg.get("dim", 4)`), made from a
    JSON object: what an unannotated config parameter gets when no class of the file takes the JSON. Nested tables
    are bags too; a key the JSON lacks is an AttributeError naming it, as for any object."""

    def __init__(self, values: dict[str, Any] | None = None, **more: Any):
        super().__init__({k: AttrBag(v) if type(v) is dict else v for k, v in {**(values or {}), **more}.items()})

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"the config has no {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        self.pop(name, None)


MAX_READ_FILES = 200  # .py files looked through for a key the code reads
MAX_READ_BYTES = 4 << 20
MAX_LISTED = 20_000  # folder entries looked at in all


def code_reads(key: str, root: str) -> str | None:
    """`file:line` where the code under `root` reads `key` off an object (`cfg.key`, `cfg["key"]`,
    `getattr(cfg, "key"...)`, `cfg.get("key"...)`), or None. Bounded: the first MAX_READ_FILES files, MAX_LISTED
    folder entries."""
    import re

    pattern = re.compile(rf"\.{re.escape(key)}\b|[\[(,]\s*['\"]{re.escape(key)}['\"]")
    seen = listed = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        listed += len(files) + len(dirs)
        if listed > MAX_LISTED:  # a data folder beside the code: not looked through
            return None
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            seen += 1
            if seen > MAX_READ_FILES:
                return None
            try:
                with open(os.path.join(folder, f), encoding="utf-8", errors="replace") as fh:
                    text = fh.read(MAX_READ_BYTES)
            except OSError:
                continue
            m = pattern.search(text)
            if m:
                return f"{f}:{text.count(chr(10), 0, m.start()) + 1}"
    return None

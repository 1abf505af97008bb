"""`package.module:callable` sources: import the module, call the factory on meta with the overrides as keyword
arguments."""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

from ..errors import SourceError
from .configs import _config_param
from .importer import import_named
from .construct import call_factory
from .options import BuildOptions, Built, _versions, read_json_config
from .targets import target_config
from .stubs import StubRegistry


def build_factory(spec: str, options: BuildOptions) -> Built:
    """`package.module:callable`: the module imported as a model file is (archviz.sources.importer: the same stubs,
    noted the same), the callable called on meta with the config JSON's keys and the overrides values as its keyword
    arguments; a class taking a config object gets it as a model file's class does."""
    from .reference import Target, build_target, refuse_weightless

    mod_name, attr = spec.split(":", 1)
    stubs = StubRegistry()
    try:
        module, path = import_named(mod_name, stubs)
    except ModuleNotFoundError as e:
        raise SourceError(f"{spec}: cannot import {mod_name} ({e})",
                          hint="install the package or put its folder on PYTHONPATH") from None
    fn: Any = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise SourceError(f"{spec}: {mod_name} has no attribute {attr!r}",
                              hint=f"names there: {', '.join(n for n in dir(module) if not n.startswith('_'))[:200]}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise SourceError(f"{spec}: {attr} is not callable", hint="point at a function or class that returns a module")
    config = read_json_config(options.config) if options.config else None
    config, _, said = target_config(config, module, attr.split(".")[0], os.path.basename(options.config or spec))
    if path is not None and inspect.isclass(fn) and _config_param(fn) is not None:
        built = build_target(Target(spec, path, module, fn, stubs, kind="factory", said=(said,) if said else ()),
                             config, options.config, options)
        built.name, built.display_roots = attr, _display_roots_for(module)
        return built
    root = os.path.dirname(getattr(module, "__file__", "") or "")
    kwargs = {**(config or {}), **dict(options.overrides)}
    model, notes = call_factory(fn, kwargs, spec, root, options.device, stubs)
    refuse_weightless(model, spec, fn)
    # The keyword arguments are the factory's config: they name dims (`64` -> `d`), as a config.json's fields do.
    config = {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool, list)) or v is None}
    return Built(model=model, spec=spec, kind="factory", name=attr, config=config, overrides=dict(options.overrides),
                 stubbed_imports=stubs.taken(), notes=list(stubs.native_notes) + ([said] if said else []) + notes,
                 roots=(root,),
                 display_roots=_display_roots_for(module), stubs=stubs, versions=_versions())


def _display_roots_for(module: Any) -> tuple[tuple[str, str], ...]:
    """Name files relative to the folder above the top-level package, e.g. `mypkg/models.py`."""
    top = sys.modules.get(module.__name__.split(".")[0])
    f = getattr(top, "__file__", None)
    if not f:
        return ()
    base = os.path.dirname(f)
    if os.path.basename(f) == "__init__.py":
        base = os.path.dirname(base)
    return ((base, ""),)

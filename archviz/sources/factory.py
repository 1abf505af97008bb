"""`package.module:callable` sources: import the module, call the factory on meta with `--set` as keyword arguments."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any
from ..errors import SourceError
from .guard import importing
from .options import SET_VALUES, BuildOptions, Built, _versions


def build_factory(spec: str, options: BuildOptions) -> Built:
    import torch

    from .meta import CUDA_HINT, build_failure_hint, is_cuda_insistence, meta_build, user_frame
    from .native import import_failure_hint, native_answered
    from .stubs import StubRegistry
    from .process_group import constructed

    mod_name, attr = spec.split(":", 1)
    # The current folder is importable, as it is for `python -m`, uvicorn or pytest: `archviz summary net:Net`
    # beside net.py. Only while importing: the model's modules keep what they imported.
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    native_notes: list[str] = []
    try:
        with importing(mod_name), native_answered(StubRegistry(), native_notes):  # exits: one line; kernels stubbed
            module = importlib.import_module(mod_name)
    except SourceError:
        raise
    except ModuleNotFoundError as e:
        raise SourceError(f"{spec}: cannot import {mod_name} ({e})",
                          hint="install the package or put its folder on PYTHONPATH") from None
    except Exception as e:  # noqa: BLE001 - the user's module raised while importing
        where = user_frame(e, (os.path.dirname(getattr(sys.modules.get(mod_name), "__file__", "") or ""),)) or mod_name
        raise SourceError(f"{spec}: importing {mod_name} raised {type(e).__name__}: {e} ({where})",
                          hint=import_failure_hint(e)) from None
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    fn: Any = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise SourceError(f"{spec}: {mod_name} has no attribute {attr!r}",
                              hint=f"names there: {', '.join(n for n in dir(module) if not n.startswith('_'))[:200]}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise SourceError(f"{spec}: {attr} is not callable", hint="point at a function or class that returns a module")
    root = os.path.dirname(getattr(module, "__file__", "") or "")
    kwargs = dict(options.overrides)

    def construct() -> tuple[Any, Any]:
        with meta_build(options.device) as notes:
            return fn(**kwargs), notes  # --set key=value: the factory's keyword arguments

    try:
        (model, notes), started = constructed(construct)  # a process group started for code that insists on one
    except Exception as e:  # noqa: BLE001
        where = user_frame(e, (root,)) or spec
        # the factory's own signature refused an argument (not a TypeError from deeper in its code)
        lacked = [k for k in kwargs if isinstance(e, TypeError) and f"unexpected keyword argument '{k}'" in str(e)]
        if lacked:
            raise SourceError(f"{spec}: {attr} does not take {', '.join(lacked)} ({e})",
                              hint="--set key=value passes keyword arguments to a factory: give only the ones "
                                   "it takes") from None
        if is_cuda_insistence(e):
            raise SourceError(f"{spec}: the model insists on CUDA at {where}: {e}", hint=CUDA_HINT) from None
        strings = [f"{k}={v!r}" for k, v in kwargs.items() if isinstance(v, str)]
        hint = build_failure_hint(e, kwargs)
        if strings:  # a value the user meant as something else may have stayed a string
            hint = (f"{', '.join(strings)} {'was' if len(strings) == 1 else 'were'} passed as "
                    f"{'a string' if len(strings) == 1 else 'strings'} (--set: {SET_VALUES}); run with --debug for "
                    "the traceback")
        raise SourceError(f"{spec}: building the model raised {type(e).__name__}: {e} ({where})", hint=hint) from e
    if not isinstance(model, torch.nn.Module):
        raise SourceError(f"{spec}: returned {type(model).__name__}, not a torch.nn.Module",
                          hint="the factory must return the model (an nn.Module)")
    # The keyword arguments are the factory's config: they name dims (`64` -> `d`), as a config.json's fields do.
    config = {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool, list)) or v is None}
    return Built(model=model, spec=spec, kind="factory", name=attr, config=config, overrides=kwargs,
                 notes=native_notes + list(notes.items) + started, roots=(root,),
                 display_roots=_display_roots_for(module),
                 versions=_versions())


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

"""A builder or factory called on meta: `fn(**kwargs)` under the meta build (sources.meta), a process group started
for code that insists on one, and what it raises said in one line. Used by a factory source and by a model file
whose model is made by a builder function."""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ArchvizError, SourceError, option
from .meta import CUDA_HINT, build_failure_hint, is_cuda_insistence, meta_build, user_frame
from .guard import time_limit


def call_factory(fn: Any, kwargs: dict[str, Any], spec: str, root: str, device: str = "meta"
                 ) -> tuple[Any, list[str]]:
    """`fn(**kwargs)` on meta: the model it returns and the build's notes; what it raises said in one line."""
    from .options import SET_VALUES
    from .process_group import constructed

    attr = getattr(fn, "__name__", spec)

    def construct() -> tuple[Any, Any]:
        with meta_build(device) as notes, time_limit(f"building {attr}"):
            return fn(**kwargs), notes  # overrides key=value: the factory's keyword arguments

    try:
        (model, notes), started = constructed(construct)  # a process group started for code that insists on one
    except ArchvizError:
        raise
    except Exception as e:  # noqa: BLE001
        where = user_frame(e, (root,)) or spec
        # the factory's own signature refused an argument (not a TypeError from deeper in its code)
        lacked = [k for k in kwargs if isinstance(e, TypeError) and f"unexpected keyword argument '{k}'" in str(e)]
        if lacked:
            raise SourceError(f"{spec}: {attr} does not take {', '.join(lacked)} ({e})",
                              hint=f"{option('set')} key=value passes keyword arguments to a factory: give only the "
                                   "ones it takes") from None
        if is_cuda_insistence(e):
            raise SourceError(f"{spec}: the model insists on CUDA at {where}: {e}", hint=CUDA_HINT) from None
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
    return model, list(notes.items) + started


__all__ = ["call_factory"]

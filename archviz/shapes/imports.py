"""Imports made inside forward: stubbed when they fail and the model's own files made them, so the pass runs on."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from ..sources import stubs
from .tracer import ARCHVIZ_DIR


_INSTALLED = frozenset({"site-packages", "dist-packages"})


def _installed(path: str) -> bool:
    """`path` lies in an installed package (a site-packages folder, a virtualenv's included)."""
    return not _INSTALLED.isdisjoint(path.split(os.sep))


class ImportsInForward:
    """Imports inside forward (`from fast_hadamard_transform import hadamard_transform`) of modules that are not
    installed get stub modules too, recorded like the build's, so their functions are answered by shape rules (meta
    pass) or `archviz.kernels` implementations (probe). Only imports made by the model's own files (under `roots`)
    are answered: libraries handle their own ImportErrors (sympy probing for gmpy2 inside torch). A package
    installed in a site-packages folder is never the model's code, even where that folder lies under the model's
    (`proj/model.py` beside `proj/.venv`)."""

    def __init__(self, registry: stubs.StubRegistry, roots: tuple[str, ...],
                 on_stub: Callable[[str], None] | None = None):
        self.registry = registry
        self.on_stub = on_stub
        self.roots = tuple(os.path.abspath(r) + os.sep for r in roots if r)
        self.added: list[str] = []

    def _from_model_code(self) -> bool:
        f = sys._getframe(2)
        while f is not None:
            fn = f.f_code.co_filename
            if fn.startswith("<frozen") or fn.startswith(ARCHVIZ_DIR) or "importlib" in fn:
                f = f.f_back
                continue
            full = os.path.abspath(fn)
            return full.startswith(self.roots) and not _installed(full)
        return False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        import importlib.machinery

        if "." in name or not self.roots or not self._from_model_code():
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: Any) -> Any:
        self.added.append(spec.name)
        if self.on_stub is not None:
            self.on_stub(spec.name)
        return self.registry.module(spec.name, "not installed (imported inside forward)")

    def exec_module(self, module: Any) -> None:
        return None

    def __enter__(self) -> "ImportsInForward":
        sys.meta_path.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.meta_path.remove(self)
        for name in self.added:
            sys.modules.pop(name, None)

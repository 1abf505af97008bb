"""Import paths from before the stage packages (issue 17), kept importable: each is the moved module itself.

`import archviz.grouping` gives the very module object `archviz.group.tree` (not a copy), so registries such as
`archviz.kernels`' shape rules are shared whichever name a user's file imports.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from typing import Any

MOVED = {
    "archviz.kernels": "archviz.shapes.kernels",  # public: @archviz.kernels.shape_rule in --kernel-rules files
    "archviz.grouping": "archviz.group.tree",
    "archviz.layers": "archviz.group.layers",
    "archviz.meta": "archviz.sources.meta",
    "archviz.stubs": "archviz.sources.stubs",
    "archviz.source_hf": "archviz.sources.hf",
    "archviz.source_reference": "archviz.sources.reference",
    "archviz.reduce": "archviz.probe.reduce",
    "archviz.views": "archviz.render.views",
    "archviz.site": "archviz.render.site",
    "archviz.annotations": "archviz.render.site.annotations",
    "archviz.cli_check": "archviz.cli.check",
    "archviz.cli_probe": "archviz.cli.probe",
    "archviz.cli_site": "archviz.cli.site",
}


class _Alias:  # an importlib.abc.Loader (not subclassed: importing importlib.abc costs every command 8 ms)
    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: Any = None

    def create_module(self, spec: Any) -> Any:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = self.spec  # the import system set the old name's spec on it: give the module its own back


class _Finder:  # an importlib.abc.MetaPathFinder
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        new = MOVED.get(name)
        return importlib.machinery.ModuleSpec(name, _Alias(new)) if new else None


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())  # before any finder that could still see an old file of that name


def moved(name: str) -> Any:
    """`archviz.<name>` for a moved module (the package's `__getattr__`), or AttributeError."""
    if f"archviz.{name}" not in MOVED:
        raise AttributeError(f"module 'archviz' has no attribute {name!r}")
    return importlib.import_module(f"archviz.{name}")

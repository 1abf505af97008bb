"""Where a model file sits: the package it belongs to and the project around it, so it imports as its own code does.

A file inside a package (`gpt_oss/torch/model.py`, `src/mistral_inference/transformer.py`, `llama/model.py`) is
imported under its dotted name, found by walking up the folders that hold an `__init__.py`, with the folder above
the top package on `sys.path`: its relative imports (`from .args import ModelArgs`) and its absolute ones (`from
gpt_oss.torch.weights import ...`) resolve as they do once the project is installed. A project root (the nearest
folder above holding `pyproject.toml`, `setup.py` or `setup.cfg`) and its `src/` go on the path too. Neither walk climbs
into a folder others can write (`/tmp`: anyone could plant an `__init__.py`, a `setup.cfg` or a stub-named module
there); a package whose parent is such a folder imports through a private folder holding a link to it alone. A file in no
package (DeepSeek's `inference/model.py`, nanoGPT's `model.py`) is imported as its stem, its folder first on the path
(sibling imports such as `from kernel import ...`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass

_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
MAX_UP = 8  # folders looked at above a model file for its project root


@dataclass(frozen=True)
class Layout:
    module_name: str  # `model`, or `gpt_oss.torch.model` for a file inside a package
    code_root: str  # the user's code: the top package's folder, or the file's folder
    paths: tuple[str, ...]  # put first on sys.path, in this order, while importing
    is_package: bool = False  # the file is a top package's __init__.py: the module is the package itself

    @property
    def package(self) -> str | None:
        """The top package's name, or None for a file in no package."""
        return self.module_name.split(".")[0] if "." in self.module_name or self.is_package else None


def trusted(folder: str) -> bool:
    """A folder whose files only this user (or root) can have put there: owned by one of them, not writable by
    others. `/tmp` is not: anyone can plant an `__init__.py`, a `setup.cfg` or a module named like a stub there."""
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return st.st_uid in (os.getuid(), 0) and not st.st_mode & stat.S_IWOTH


def _importable_from(parent: str, top: str) -> str:
    """The folder to put on sys.path so that the top package `top` imports by its name: its parent where that is
    trusted; else a private folder of this process holding only a link to the package (the parent's other files,
    planted or not, are then not importable)."""
    if trusted(parent):
        return parent
    shim = _shims.get(top)
    if shim is None:
        shim = tempfile.mkdtemp(prefix="archviz-package-")
        os.symlink(top, os.path.join(shim, os.path.basename(top)))
        atexit.register(shutil.rmtree, shim, True)
        _shims[top] = shim
    return shim


_shims: dict[str, str] = {}


def _project_root(folder: str) -> str | None:
    here = folder
    for _ in range(MAX_UP):
        if not trusted(here):
            return None  # a project file in a folder others can write is not the user's project
        if any(os.path.isfile(os.path.join(here, f)) for f in _PROJECT_FILES):
            return here
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up
    return None


def locate(path: str) -> Layout:
    """The import layout of the model file at `path` (absolute)."""
    folder = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    parts = [] if stem == "__init__" else [stem]  # a package's folder: the package itself
    top = None
    here = folder
    while stem.isidentifier() and os.path.isfile(os.path.join(here, "__init__.py")) \
            and os.path.basename(here).isidentifier() and (here == folder or trusted(here)):
        parts.insert(0, os.path.basename(here))
        top = here
        here = os.path.dirname(here)
    paths = [_importable_from(here, top)] if top else [folder]
    project = _project_root(folder)
    if project is not None:
        for p in (project, os.path.join(project, "src")):
            if os.path.isdir(p) and p not in paths:
                paths.append(p)
    return Layout(module_name=".".join(parts), code_root=top or folder, paths=tuple(paths),
                  is_package=stem == "__init__" and len(parts) == 1)


__all__ = ["Layout", "locate", "trusted"]

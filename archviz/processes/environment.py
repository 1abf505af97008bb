"""What a process archviz starts begins with: archviz's own import path, and the current folder nowhere on it.

`python -m pkg.mod` puts the current folder first on `sys.path`, ahead of the standard library, and handing the
parent's `sys.path` down as `PYTHONPATH` puts every folder on it ahead of the standard library too: from a folder
holding a `typing.py` or a `json.py`, a child started that way runs those files before any of archviz's code (and a
gallery of config.json sources has no user code at all). So a child starts as `python -c BOOT ROOT MODULE ARGS`:
BOOT drops the current folder that `-c` puts first, loads the `archviz` package from the very folder the parent
imported it from (ROOT, by its file location: that folder is not put on `sys.path`), and runs MODULE as `__main__`.
The environment is the user's own (their `PYTHONPATH` included, which is theirs to set); the current folder comes
back only where the command names code in it, as the source's own import rules add it (`sources/`).
"""

from __future__ import annotations

import os
import sys
from typing import Mapping

import archviz

# The first statements touch only modules the interpreter has loaded before `-c` runs (sys, and os through site),
# so nothing is looked up in the current folder before it leaves the path.
_BOOT = """\
import sys
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]
import importlib.util, os, runpy
root, module = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("archviz", os.path.join(root, "__init__.py"),
                                              submodule_search_locations=[root])
package = importlib.util.module_from_spec(spec)
sys.modules["archviz"] = package
spec.loader.exec_module(package)
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def archviz_root() -> str:
    """The folder of the `archviz` package this process runs."""
    return os.path.dirname(os.path.abspath(archviz.__file__))


def child_command(module: str, *args: str) -> list[str]:
    """The command line that runs `python -m module args...` as a child of archviz, with archviz's import path."""
    return [sys.executable, "-c", _BOOT, archviz_root(), module, *args]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: this process's, plus `extra`."""
    return {**os.environ, **(extra or {})}


__all__ = ["archviz_root", "child_command", "child_env"]

"""Stage 1, sources: one SOURCE string in, a model built on the meta device out (`Built`, internal to the library).

- `dispatch`: which kind of source a string is (`hf:<type>`, config.json or folder, model.py, package.module:callable);
- `hf`, `reference`, `factory`: the build of each kind;
- `package`: a model file's package and project root (how it imports); `process_group`: a one-process group for
  code that insists on one;
- `meta`: building on the meta device (CUDA requests neutralised, small CPU reads answered, warnings noted);
  `cuda_queries`, `offline` and `arrays` answer what it meets there (torch.cuda's queries, downloads and
  checkpoint loads, weights drawn in numpy); `native`: native code run at import answered (cpp_extension, numba);
- `stubs`: imports that fail (a missing `kernel` module) stood in for and named;
- `options`: `BuildOptions` and `Built`, the stage's input and output.

The walker (`archviz.walk`) turns a `Built` into records; nothing after it sees the live model.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Each name from its module on first use: `BuildOptions` alone (all a command needs before the records cache
# answers it) imports none of the build's code.
_WHERE = {"build": "dispatch", "classify": "dispatch", "build_factory": "factory", "BuildOptions": "options",
          "Built": "options", "parse_override": "options", "read_json_config": "options", "suggest": "options"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_WHERE[name]}", __name__), name)

__all__ = ["BuildOptions", "Built", "build", "build_factory", "classify", "parse_override", "read_json_config",
           "suggest"]

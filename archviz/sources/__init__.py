"""Stage 1, sources: one SOURCE string in, a model built on the meta device out (`Built`, internal to the library).

- `dispatch`: which kind of source a string is (`hf:<type>`, config.json or folder, model.py, package.module:callable);
- `hf`, `reference`, `factory`: the build of each kind;
- `package`: a model file's package and project root (how it imports); `process_group`: a one-process group for
  code that insists on one;
- `meta`: building on the meta device (CUDA requests neutralised, small CPU reads answered, warnings noted);
- `stubs`: imports that fail (a missing `kernel` module) stood in for and named;
- `options`: `BuildOptions` and `Built`, the stage's input and output.

The walker (`archviz.walk`) turns a `Built` into records; nothing after it sees the live model.
"""

from __future__ import annotations

from .dispatch import build, classify
from .factory import build_factory
from .options import BuildOptions, Built, parse_override, read_json_config, suggest

__all__ = ["BuildOptions", "Built", "build", "build_factory", "classify", "parse_override", "read_json_config",
           "suggest"]

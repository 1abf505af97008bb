"""Stage 1, sources: one SOURCE string in, a model built on the meta device out (`Built`, internal to the library).

- `dispatch`: which kind of source a string is (`hf:<type>`, config.json or folder, model.py, package.module:callable),
  and `build`, the one entry of the stage;
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

# The stage's input and output, cheap to import (no torch): all a command needs before the records cache answers it.
# The build itself imports torch, so it is imported from its module where it runs: `from archviz.sources.dispatch
# import build, classify`, `from archviz.sources.factory import build_factory`.
from .options import BuildOptions, Built, parse_override, read_json_config, suggest

__all__ = ["BuildOptions", "Built", "parse_override", "read_json_config", "suggest"]

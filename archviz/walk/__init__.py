"""Stage 2, walk: a `Built` model in, a `ModelRecord` out (every module, its tensors and counts, its source lines).

- `walker`: the walk itself, tensor classification (weights, scales, tables, buffers, tied aliases) and the totals.

Shapes are the next stage's (`archviz.shapes`), which fills the records' calls in one meta forward pass.
"""

from __future__ import annotations

from .walker import classify_module, find_moe, own_totals, summarize, walk

__all__ = ["walk", "classify_module", "find_moe", "own_totals", "summarize"]

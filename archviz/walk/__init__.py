"""Stage 2, walk: a `Built` model in, a `ModelRecord` out (every module, its tensors and counts, its source lines).

- `walker`: the walk in pre-order, module attributes, the summary;
- `tensors`: the accounting rules (weights, packed fp4, quantization scales, tables, buffers, tied aliases);
- `spans`, `widths`: source lines of classes, forwards and constructors; widths named by the code that built them;
- `moe`: routed-expert collections and top-k.

Shapes are the next stage's (`archviz.shapes`), which fills the records' calls in one meta forward pass.
"""

from __future__ import annotations

from .moe import find_moe
from .tensors import classify_module, own_totals
from .walker import summarize, walk

__all__ = ["walk", "classify_module", "find_moe", "own_totals", "summarize"]

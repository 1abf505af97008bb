"""Stage 3, shapes: a `Built` model and its `ModelRecord` in, the record with every module's calls out.

One forward pass on the meta device: in/out shapes with symbolic dims (B, T, widths named from the config), call
sites in the parent's forward, routing decided by a policy instead of data, stand-in kernels answered by shape rules
(`archviz.kernels`, public as `@archviz.kernels.shape_rule`), repeated blocks run once and copied.
"""

from __future__ import annotations

from .trace import (
    ROUTED, ImportsInForward, Tracer, cache_off, choose_dims, default_inputs, merge_inputs, name_dims, parse_inputs,
    trace_shapes,
)

__all__ = ["trace_shapes", "choose_dims", "name_dims", "parse_inputs", "merge_inputs", "default_inputs", "cache_off",
           "Tracer", "ImportsInForward", "ROUTED"]

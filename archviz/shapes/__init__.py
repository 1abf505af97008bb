"""Stage 3, shapes: a `Built` model and its `ModelRecord` in, the record with every module's calls out.

One forward pass on the meta device (`trace`): in/out shapes with symbolic dims (`symbols`: B, T, widths named from
the config), call sites in the parent's forward (`tracer`), what meta cannot answer decided by a policy (`policy`),
the forward's inputs (`inputs`), stand-in kernels answered by shape rules (`kernels`, public as
`@archviz.kernels.shape_rule`), imports inside forward stubbed (`imports`), repeated blocks run once (`memo`).
"""

from __future__ import annotations

from .imports import ImportsInForward
from .inputs import cache_off, default_inputs, merge_inputs, parse_inputs
from .policy import ROUTED
from .symbols import choose_dims, name_dims
from .trace import PassRun, run_steps, trace_shapes
from .tracer import Tracer

__all__ = ["trace_shapes", "PassRun", "run_steps", "choose_dims", "name_dims", "parse_inputs", "merge_inputs", "default_inputs",
           "cache_off", "Tracer", "ImportsInForward", "ROUTED"]

"""`archviz.kernels`, the public module of shape rules: `@archviz.kernels.shape_rule("pkg.op")` in a `kernel_rules`
file registers a rule where the meta pass looks it up.

The rules live in `archviz.shapes.kernels`; importing this name gives that very module object (not a copy), so a
rule registered through either name is the pass's.
"""

from __future__ import annotations

import sys

from .shapes import kernels

sys.modules[__name__] = kernels  # the import system hands back what sys.modules holds once this body has run

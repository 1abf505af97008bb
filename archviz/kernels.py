"""`archviz.kernels`, the public module of shape rules: `@archviz.kernels.shape_rule("pkg.op")` in a kernel-rules
file registers a rule where the meta pass looks it up. For a function your model imports from a module that cannot
import here (a CUDA-only kernel package):

    import archviz.kernels

    @archviz.kernels.shape_rule("my_kernels.fused_rope")
    def fused_rope(x, freqs):
        return torch.empty_like(x)          # anything with the right shape and dtype; runs on meta

and give the file as the `kernel_rules` option (`shape_rule(name, flops=...)` counts its FLOPs for `cost`).

The rules live in `archviz.shapes.kernels`; the names here are its own objects (`shape_rule` registers in the
pass's table whichever module it is reached through), with the DeepSeek reference kernels' torch implementations
that the records name as `archviz.kernels.<name>`.
"""

from __future__ import annotations

from .shapes.kernels import (
    act_quant,
    fp4_act_quant,
    fp4_gemm,
    fp8_gemm,
    fp8_index,
    hadamard_transform,
    hc_split_sinkhorn,
    shape_rule,
    sparse_attn,
    weight_dequant,
)

__all__ = ["shape_rule", "act_quant", "fp4_act_quant", "weight_dequant", "fp8_gemm", "fp4_gemm", "sparse_attn",
           "fp8_index", "hc_split_sinkhorn", "hadamard_transform"]

"""A model file in the style of Triton-kernel code (mamba_ssm's ops/triton, flash-linear-attention): kernels defined
and configured at module level (`@triton.autotune(configs=[triton.Config(...)])`, `@triton.heuristics`, `@triton.jit`)
and launched on a grid in forward (`_scale_kernel[grid](...)`). Written for archviz's tests."""

import torch
import triton
import triton.language as tl
from torch import nn


_CONFIGS = [triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=8),
            triton.Config({"BLOCK": 256})]
_SMALL = [c for c in _CONFIGS if c.num_warps <= 4 and c.num_stages == 3]  # read back, with triton's defaults


@triton.autotune(configs=_SMALL, key=["N"])
@triton.heuristics({"EVEN_N": lambda args: args["N"] % args["BLOCK"] == 0})
@triton.jit
def _scale_kernel(X, Y, N, BLOCK: tl.constexpr, EVEN_N: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(Y + pid, tl.load(X + pid) * 2)


_MIN_BLOCK = min(c.kwargs["BLOCK"] for c in _scale_kernel.configs)  # the autotuner's configs, read at import
assert _MIN_BLOCK == 64 and len(_SMALL) == 2


class Scaled(nn.Module):
    def __init__(self, dim: int = 24, hidden: int = 40):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        y = torch.empty_like(h)
        grid = (triton.cdiv(h.shape[-1], _MIN_BLOCK) * triton.next_power_of_2(3),)  # host-side helpers
        _scale_kernel[grid](h, y, h.shape[-1])
        return self.down(y)

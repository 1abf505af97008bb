"""A model file in the style of research code that builds its kernels when imported: a check of CUDA_HOME, a C++/CUDA
extension compiled by `torch.utils.cpp_extension.load(... .cu ...)` and another by `load_inline`, helpers under
`@numba.jit`, `@numba.njit`, `@numba.vectorize` (numba is a compiled package: not installed here), and a Triton kernel
under `@triton.autotune` and `@triton.jit`, and module-level CUDA state (`torch.cuda.current_device()`, a table
moved with `.cuda()`). Written for archviz's tests."""

import os

import numba
import torch
import triton
import triton.language as tl
from torch import nn
from torch.utils.cpp_extension import CUDA_HOME, load, load_inline

if CUDA_HOME is None:
    raise RuntimeError("CUDA_HOME is not set: the fused kernels cannot be built")

_HERE = os.path.dirname(os.path.abspath(__file__))
_DEVICE = torch.cuda.current_device()
_LUT = torch.arange(16).cuda(_DEVICE)
fused = load(name="fused_bias_act", sources=[os.path.join(_HERE, "fused_bias_act.cpp"),
                                             os.path.join(_HERE, "fused_bias_act_kernel.cu")], verbose=False)
upfirdn = load_inline(name="upfirdn2d", cpp_sources="", cuda_sources="", functions=["upfirdn2d"])


@numba.jit(nopython=True)
def backtrace(trace):
    return trace[::-1]


@numba.njit(cache=True, parallel=True)
def total(n):
    s = 0
    for i in numba.prange(n):
        s += i
    return s


@numba.vectorize(["float64(float64)"])
def halve(x):
    return x / 2


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=4)], key=["n"])
@triton.jit
def _double(X, Y, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(Y + pid, tl.load(X + pid) * 2)


class KernelNet(nn.Module):
    def __init__(self, dim: int = 24, hidden: int = 48, classes: int = 7):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, classes, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))

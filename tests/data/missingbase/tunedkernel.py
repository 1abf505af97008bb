"""Triton-kernel code of a library that builds on triton's own classes (flash-linear-attention's style): the device
backend probed at import through triton's driver (the CPU path taken when it raises), a subclass of triton's
Autotuner that reads what its base's constructor set, its decorator stacked under `@triton.heuristics`, and the
kernel launched on a grid in forward. Written for archviz's tests."""

import torch
import triton
import triton.language as tl
from torch import nn
from triton.runtime.autotuner import Autotuner

try:
    BACKEND = triton.runtime.driver.active.get_current_target().backend
except Exception:
    BACKEND = "cpu"
DEVICE_LIB = getattr(torch, BACKEND)  # torch.cuda on a GPU, torch.cpu here


class CachedTuner(Autotuner):
    def __init__(self, fn, arg_names, configs, key, reset_to_zero=None, restore_value=None, **kwargs):
        super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs)
        self.kernel_name = fn.fn.__name__ if hasattr(fn, "fn") else fn.__name__
        if not self.user_defined_pre_hook and (self.reset_to_zero or self.restore_value):
            self.pre_hook = lambda kw, reset_only=False: None


def cached_autotune(configs, key):
    def decorator(fn):
        return CachedTuner(fn, fn.arg_names, configs, key)
    return decorator


@triton.heuristics({"EVEN": lambda args: args["N"] % args["BLOCK"] == 0})
@cached_autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["N"])
@triton.jit
def gate_kernel(X, Y, N, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(Y + pid, tl.sigmoid(tl.load(X + pid)))


class GatedMix(nn.Module):
    def __init__(self, dim: int = 20, hidden: int = 36):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        y = torch.empty_like(h)
        gate_kernel[(triton.cdiv(h.numel(), 32),)](h, y, h.shape[-1])
        return self.down(y)

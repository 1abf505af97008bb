"""Factories (`package.module:callable` sources) that misbehave, and one that asks for CUDA but builds on meta."""

import torch
from torch import nn


def returns_none():
    """Forgets to return the model."""
    nn.Linear(4, 4)


class NeedsCuda(nn.Module):
    def __init__(self):
        super().__init__()
        assert torch.cuda.is_available(), "needs CUDA"
        self.proj = nn.Linear(8, 8)


def needs_cuda():
    return NeedsCuda()


class AsksForCuda(nn.Module):
    """Names the GPU three ways in __init__; archviz builds it on meta anyway and notes each request."""

    def __init__(self):
        super().__init__()
        torch.set_default_device("cuda")
        self.a = nn.Linear(8, 16, device="cuda")
        self.b = nn.Linear(16, 4).cuda()
        self.register_buffer("steps", torch.zeros(3, device="cuda"))


def asks_for_cuda():
    return AsksForCuda()

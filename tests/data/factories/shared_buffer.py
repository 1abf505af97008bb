"""Layers that share one cached buffer tensor, as DeepSeek-V4.1 shares its lru_cached `freqs_cis`."""
import functools

import torch
from torch import nn


@functools.lru_cache(maxsize=None)
def _freqs(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32)


class Layer(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("freqs", _freqs(dim), persistent=False)

    def forward(self, x):
        return self.proj(x) + self.freqs


class Model(nn.Module):
    def __init__(self, n_layers: int = 6, dim: int = 8):
        super().__init__()
        self.layers = nn.ModuleList(Layer(dim) for _ in range(n_layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def build() -> Model:
    return Model()

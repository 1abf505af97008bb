"""A small model for examples/quickstart.ipynb: `archviz.load("quickstart_model:build", overrides={...})` calls
`build` on the meta device with the overrides as its keyword arguments, as `archviz summary quickstart_model:build`
does from this folder."""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """Pre-norm residual MLP block."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class TinyNet(nn.Module):
    """Token embedding, `depth` blocks, a head back to the vocabulary."""

    def __init__(self, vocab: int, dim: int, hidden: int, depth: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, hidden) for _ in range(depth))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build(vocab: int = 256, dim: int = 32, hidden: int = 64, depth: int = 3) -> TinyNet:
    return TinyNet(vocab, dim, hidden, depth)

"""A tiny model for the explorer's annotation tests: `tiny_model:build` (put this folder on sys.path)."""

import torch
from torch import nn


class Block(nn.Module):
    """One residual block: a norm, then an up and a down projection."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(self.norm(x))
        return x + self.down(torch.relu(h))


class Tiny(nn.Module):
    """Embedding, four identical blocks, and a head."""

    def __init__(self, vocab: int = 32, dim: int = 16, hidden: int = 24, layers: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, hidden) for _ in range(layers))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def build() -> nn.Module:
    return Tiny()

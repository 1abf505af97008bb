"""Models whose forward takes float features, not token ids: `build`'s first module is a Linear (features
[B, T, 24] by default); `build_tabled` also holds an embedding table, so nothing says what its first input is and
shapes need --input."""
from typing import Optional

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, width: int = 24, out: int = 10):
        super().__init__()
        self.proj = nn.Linear(width, 48)
        self.head = nn.Linear(48, out)

    def forward(self, pixels: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.head(torch.relu(self.proj(pixels * scale)))


def build() -> Encoder:
    return Encoder()


class Tabled(nn.Module):
    def __init__(self, width: int = 24, kinds: int = 4):
        super().__init__()
        self.proj = nn.Linear(width, 48)
        self.kinds = nn.Embedding(kinds, 48)

    def forward(self, pixels: torch.Tensor, kind: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.proj(pixels) + (0 if kind is None else self.kinds(kind))


def build_tabled() -> Tabled:
    return Tabled()

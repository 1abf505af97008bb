"""A forward that reads a count from a real CPU scalar (as LED's longformer attention computes its chunk count with
`torch.div(seq_len, window, rounding_mode="trunc") - 1`): the meta pass must read its value, not answer a policy."""

import torch
from torch import nn


class Chunked(nn.Module):
    def __init__(self, dim: int = 8, window: int = 4) -> None:
        super().__init__()
        self.window = window
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chunks = torch.div(x.shape[1], self.window, rounding_mode="trunc") + 1  # a CPU tensor with a real value
        pad = x.new_zeros(x.shape[0], int(chunks), x.shape[2])
        return self.proj(torch.cat([x, pad], dim=1))


def model() -> Chunked:
    return Chunked()

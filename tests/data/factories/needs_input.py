"""A model whose forward needs a second input besides token ids, and says so by name when it is missing (as
LXMERT does for `visual_feats`)."""

from typing import Optional

import torch
from torch import nn


class TwoInputs(nn.Module):
    def __init__(self, vocab: int = 32, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(2 * dim, dim)

    def forward(self, input_ids: torch.Tensor, features: Optional[torch.Tensor] = None) -> torch.Tensor:
        if features is None:
            raise ValueError("`features` cannot be `None`")
        return self.mix(torch.cat([self.embed(input_ids), features], dim=-1))


def model() -> TwoInputs:
    return TwoInputs()

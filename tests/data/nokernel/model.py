"""A reference-style model whose forward calls a kernel archviz has no shape rule for."""
from dataclasses import dataclass

import torch
from torch import nn

from kernel import mystery_fused_op  # no kernel.py here: archviz stubs it


@dataclass
class ModelArgs:
    vocab_size: int = 32
    dim: int = 16


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.proj = nn.Linear(args.dim, args.dim)

    def forward(self, tokens: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        h = self.embed(tokens)
        return self.proj(mystery_fused_op(h))

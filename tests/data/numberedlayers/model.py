"""A reference-style recurrent model whose decoder loop hands each layer its number as an argument
(`layer(h, layer_idx)`), and whose layers scan the sequence one step at a time in Python: the block memo must answer
every layer but the first, or the pass runs the scan once per layer."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    vocab_size: int = 32
    dim: int = 16
    n_layers: int = 4
    decay: float = 0.5


class ScanBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.decay = args.decay
        self.proj = nn.Linear(args.dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, layer_idx: int) -> torch.Tensor:
        h = self.proj(x)
        state = torch.zeros_like(h[:, 0])
        steps = []
        for t in range(h.shape[1]):
            state = self.decay * state + h[:, t]
            steps.append(state)
        return x + torch.stack(steps, dim=1)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(ScanBlock(args) for _ in range(args.n_layers))
        self.out = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        h = self.embed(tokens)
        for layer_idx, layer in enumerate(self.layers):
            h = layer(h, layer_idx)
        return self.out(h)

"""A reference-style model that reads a config field its ModelArgs does not declare."""

from dataclasses import dataclass

from torch import nn


@dataclass
class ModelArgs:
    dim: int = 16
    n_layers: int = 2


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(args.dim, args.dim) for _ in range(args.n_layers))
        self.experts = nn.ModuleList(nn.Linear(args.dim, args.dim) for _ in range(args.n_experts))

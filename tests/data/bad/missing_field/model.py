"""A reference-style model whose ModelArgs has a required field (no default) that config.json lacks."""

from dataclasses import dataclass

from torch import nn


@dataclass
class ModelArgs:
    dim: int  # required: no default
    n_layers: int = 2


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(args.dim, args.dim) for _ in range(args.n_layers))

"""A valid reference-style model; its config.json is not JSON."""

from dataclasses import dataclass

from torch import nn


@dataclass
class ModelArgs:
    dim: int = 16


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.proj = nn.Linear(args.dim, args.dim)

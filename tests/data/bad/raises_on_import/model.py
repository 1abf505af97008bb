"""A reference-style model file that raises while it is imported."""

from dataclasses import dataclass

from torch import nn

raise RuntimeError("boom")


@dataclass
class ModelArgs:
    dim: int = 16


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.proj = nn.Linear(args.dim, args.dim)

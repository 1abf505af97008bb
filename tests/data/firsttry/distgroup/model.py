"""Model-parallel code as a launcher runs it: its constructor asks the process group unconditionally
(archviz test fixture)."""
from dataclasses import dataclass

import torch.distributed as dist
import torch.nn as nn


@dataclass
class ModelArgs:
    dim: int = 32
    hidden: int = 64
    n_layers: int = 2


class ShardedMLP(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        world = dist.get_world_size()
        self.up = nn.Linear(args.dim, args.hidden // world, bias=False)
        self.down = nn.Linear(args.hidden // world, args.dim, bias=False)

    def forward(self, x):
        return self.down(self.up(x))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.rank = dist.get_rank()
        self.layers = nn.ModuleList(ShardedMLP(args) for _ in range(args.n_layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

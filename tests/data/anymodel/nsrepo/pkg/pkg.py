import torch.nn as nn

from pkg.models.block import Block


class Model(nn.Module):
    def __init__(self, width=10, depth=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x

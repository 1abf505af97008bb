import torch.nn as nn

from ..args import LMSettings


class FeedForward(nn.Module):
    def __init__(self, s: LMSettings):
        super().__init__()
        self.up = nn.Linear(s.width, s.hidden, bias=False)
        self.down = nn.Linear(s.hidden, s.width, bias=False)

    def forward(self, x):
        return self.down(self.up(x).relu())

import torch
import torch.nn as nn


class Block(nn.Module):
    """A block of Net: Net(...) stacks these."""

    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + self.fc(x)


class Head(nn.Module):
    """The last layer of a Net."""

    def __init__(self, width, out):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.proj = nn.Linear(width, out)

    def forward(self, x):
        return self.proj(self.norm(x))


class Net(nn.Module):
    def __init__(self, in_dim=6, width=24, depth=3, out=4):
        super().__init__()
        self.embed = nn.Linear(in_dim, width)
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = Head(width, out)

    @classmethod
    def from_name(cls, name):
        return cls(**{"S": dict(width=8, depth=2), "L": dict(width=40, depth=5)}[name])

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class NetLoss(nn.Module):
    """The training loss of Net."""

    def __init__(self, smoothing=0.1):
        super().__init__()
        self.ce = nn.CrossEntropyLoss(label_smoothing=smoothing)

    def forward(self, logits, target):
        return self.ce(logits, target)


def Net_S(**kwargs):
    return Net(width=8, depth=2, **kwargs)


def Net_L(**kwargs):
    return Net(width=40, depth=5, **kwargs)


def sincos(n):
    return torch.arange(n)

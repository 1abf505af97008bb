import torch.nn as nn

from helpers import padding


class ResA(nn.Module):
    def __init__(self, h, channels, kernel=3):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel, padding=padding(kernel))

    def forward(self, x):
        return x + self.conv(x)


class ResB(nn.Module):
    def __init__(self, h, channels, kernel=3):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(channels, channels, kernel, padding=padding(kernel)) for _ in range(2)])

    def forward(self, x):
        for c in self.convs:
            x = x + c(x)
        return x


class Generator(nn.Module):
    def __init__(self, h):
        super().__init__()
        block = ResA if h.resblock == "a" else ResB  # picked, then called by another name
        self.pre = nn.Conv1d(h.num_mels, h.channels, 7, padding=3)
        self.blocks = nn.ModuleList([block(h, h.channels, k) for k in h.kernels])
        self.post = nn.Conv1d(h.channels, 1, 7, padding=3)

    def forward(self, x):
        x = self.pre(x)
        for b in self.blocks:
            x = b(x)
        return self.post(x)


class Discriminator(nn.Module):
    def __init__(self, periods=(2, 3)):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(1, 4, (5, 1)) for _ in periods])

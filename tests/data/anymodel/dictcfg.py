import torch.nn as nn


class AttrDict(dict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.__dict__ = self


class Generator(nn.Module):
    def __init__(self, h: AttrDict):
        super().__init__()
        self.pre = nn.Conv1d(h.num_mels, h.channels, 7, padding=3)
        self.ups = nn.ModuleList([nn.ConvTranspose1d(h.channels, h.channels, k, stride=k // 2) for k in h.kernels])
        self.post = nn.Conv1d(h.channels, 1, 7, padding=3)

    def forward(self, x):
        x = self.pre(x)
        for up in self.ups:
            x = up(x)
        return self.post(x)

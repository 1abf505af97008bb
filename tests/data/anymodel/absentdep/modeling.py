import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, width: int, depth: int, in_chans: int = 3):
        super().__init__()
        self.stem = nn.Conv2d(in_chans, width, kernel_size=4, stride=4)
        self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        for b in self.blocks:
            x = b(x)
        return x


class Segmenter(nn.Module):
    def __init__(self, encoder: Encoder, classes: int):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.blocks[0].out_features, classes)

    def forward(self, x):
        return self.head(self.encoder(x))

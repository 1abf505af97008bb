import torch.nn as nn

from tinylm.args import LMSettings
from .blocks.mlp import FeedForward


class Layer(nn.Module):
    def __init__(self, s: LMSettings):
        super().__init__()
        self.norm = nn.LayerNorm(s.width)
        self.ffn = FeedForward(s)

    def forward(self, x):
        return x + self.ffn(self.norm(x))


class TinyLM(nn.Module):
    def __init__(self, settings: LMSettings):
        super().__init__()
        self.embed = nn.Embedding(settings.vocab, settings.width)
        self.layers = nn.ModuleList(Layer(settings) for _ in range(settings.depth))
        self.head = nn.Linear(settings.width, settings.vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)

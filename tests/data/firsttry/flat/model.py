"""A forward that takes 1-D token ids [T], as gpt-oss's does: its attention unpacks a 2-D [T, width] activation
(archviz test fixture)."""
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class ModelConfig:
    vocab_size: int = 40
    hidden_size: int = 16
    num_hidden_layers: int = 2


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=False)
        self.out = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, x):
        n_tokens, width = self.qkv(x).shape
        q, k, v = self.qkv(x).split(width // 3, dim=-1)
        return x + self.out(torch.softmax(q @ k.transpose(0, 1), dim=-1) @ v)


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.block = nn.ModuleList(Attention(config) for _ in range(config.num_hidden_layers))

    def forward(self, x):
        x = self.embedding(x)
        for b in self.block:
            x = b(x)
        return x

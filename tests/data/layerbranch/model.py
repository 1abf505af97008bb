"""A training-codebase-style model whose layers branch on their own number: every layer holds a LoRA on its output
projection, and layer 0 skips it (`if self.layer_id == 0:`); every third layer (by `layer_idx % 3`, passed as an
argument) adds a second MLP. Layers alike in structure, different in the work their forwards do."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    vocab_size: int = 64
    dim: int = 16
    hidden: int = 40
    lora_rank: int = 4
    n_layers: int = 7


class Attention(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.layer_id = layer_id
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.lora_a = nn.Linear(args.dim, args.lora_rank, bias=False)
        self.lora_b = nn.Linear(args.lora_rank, args.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.wo(x)
        if self.layer_id == 0:
            return y
        return y + self.lora_b(self.lora_a(x))


class Block(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.attn = Attention(layer_id, args)
        self.up = nn.Linear(args.dim, args.hidden, bias=False)
        self.down = nn.Linear(args.hidden, args.dim, bias=False)
        self.extra = nn.Linear(args.dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, layer_idx: int) -> torch.Tensor:
        x = x + self.attn(x)
        x = x + self.down(torch.relu(self.up(x)))
        if layer_idx % 3 == 2:
            x = x + self.extra(x)
        return x


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(i, args) for i in range(args.n_layers))
        self.out = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for layer_idx, layer in enumerate(self.layers):
            h = layer(h, layer_idx)
        return self.out(h)

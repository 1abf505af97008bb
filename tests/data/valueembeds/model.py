"""A training-codebase-style dense model with value embeddings: tables as large as the vocabulary, kept in a
ModuleDict keyed by layer and read one row per token (`self.value_embeds[str(i)](idx)`), mixed into the values of
every other layer; a learned position table beside the token embedding; and a raw parameter holding two more tables,
read through a view (`self.extra_embeds.view(2, V, d)[:, idx]`)."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class GPTConfig:
    vocab_size: int = 512
    sequence_len: int = 64
    n_embd: int = 16
    n_layer: int = 4


def has_ve(layer_idx: int) -> bool:
    return layer_idx % 2 == 1


class Block(nn.Module):
    def __init__(self, config: GPTConfig, layer_idx: int):
        super().__init__()
        d = config.n_embd
        self.c_v = nn.Linear(d, d, bias=False)
        self.c_fc = nn.Linear(d, 4 * d, bias=False)
        self.c_proj = nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor, ve: torch.Tensor | None) -> torch.Tensor:
        v = self.c_v(x)
        if ve is not None:
            v = v + ve
        x = x + v
        return x + self.c_proj(torch.relu(self.c_fc(x)))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.sequence_len, config.n_embd),
            h=nn.ModuleList(Block(config, i) for i in range(config.n_layer))))
        self.value_embeds = nn.ModuleDict({str(i): nn.Embedding(config.vocab_size, config.n_embd)
                                           for i in range(config.n_layer) if has_ve(i)})
        self.extra_embeds = nn.Parameter(torch.zeros(2 * config.vocab_size, config.n_embd))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        x = x + self.extra_embeds.view(2, -1, x.shape[-1])[:, idx].sum(0)
        for i, block in enumerate(self.transformer.h):
            ve = self.value_embeds[str(i)](idx) if str(i) in self.value_embeds else None
            x = block(x, ve)
        return self.lm_head(x)

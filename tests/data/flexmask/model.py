"""Flex attention whose BlockMask the forward makes itself from a mask_mod, as training codebases write it, in one
of three layouts, `mask`:

- "causal":   q_idx >= kv_idx;
- "window":   causal within the last `window` positions (a sliding window);
- "document": packed documents, a token attending only within its own (document ids counted from the tokens, so
              the layout depends on the data: on meta it is not known).
"""
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


@dataclass
class Config:
    vocab_size: int = 64
    dim: int = 32
    n_heads: int = 4
    n_layers: int = 2
    window: int = 16
    mask: str = "causal"


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.h = c.n_heads
        self.qkv = nn.Linear(c.dim, 3 * c.dim, bias=False)
        self.out = nn.Linear(c.dim, c.dim, bias=False)

    def forward(self, x, block_mask):
        b, t, d = x.shape
        q, k, v = (y.view(b, t, self.h, d // self.h).transpose(1, 2) for y in self.qkv(x).chunk(3, -1))
        o = flex_attention(q, k, v, block_mask=block_mask)
        return self.out(o.transpose(1, 2).reshape(b, t, d))


class Model(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab_size, c.dim)
        self.layers = nn.ModuleList(Attention(c) for _ in range(c.n_layers))
        self.head = nn.Linear(c.dim, c.vocab_size, bias=False)

    def mask_mod(self, tokens):
        if self.c.mask == "window":
            w = self.c.window
            return lambda b, h, q, kv: (q >= kv) & (q - kv < w)
        if self.c.mask == "document":
            doc = torch.cumsum((tokens[0] == 0).int(), 0)
            return lambda b, h, q, kv: doc[q] == doc[kv]
        return lambda b, h, q, kv: q >= kv

    def forward(self, tokens: torch.Tensor):
        B, T = tokens.shape
        block_mask = create_block_mask(self.mask_mod(tokens), B, None, T, T, device=tokens.device)
        x = self.embed(tokens)
        for layer in self.layers:
            x = x + layer(x, block_mask)
        return self.head(x)

"""A reference-style decoder whose KV caches do not exist after construction: its generate loop calls
`model.set_kv_cache(batch_size, max_seq_len, dtype)` first, which gives each attention a cache module with k/v
buffers; forward then writes and reads them at `start_pos`."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    vocab_size: int = 64
    dim: int = 32
    n_layers: int = 3
    n_heads: int = 4
    n_kv_heads: int = 2


class KVCache(nn.Module):
    def __init__(self, batch_size: int, seq_len: int, n_kv_heads: int, head_dim: int, dtype: torch.dtype):
        super().__init__()
        shape = (batch_size, seq_len, n_kv_heads, head_dim)
        self.register_buffer("k", torch.zeros(shape, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(shape, dtype=dtype), persistent=False)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.n_heads, args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        self.cache = None

    def forward(self, x: torch.Tensor, start_pos: int) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim)
        k = self.wk(x).view(b, t, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim)
        if self.cache is not None:
            self.cache.k[:b, start_pos:start_pos + t] = k
            self.cache.v[:b, start_pos:start_pos + t] = v
            k, v = self.cache.k[:b, :start_pos + t].to(q.dtype), self.cache.v[:b, :start_pos + t].to(q.dtype)
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=t > 1)
        return self.wo(o.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attn = Attention(args)
        self.mlp = nn.Sequential(nn.Linear(args.dim, 4 * args.dim, bias=False), nn.GELU(),
                                 nn.Linear(4 * args.dim, args.dim, bias=False))

    def forward(self, x: torch.Tensor, start_pos: int) -> torch.Tensor:
        x = x + self.attn(x, start_pos)
        return x + self.mlp(x)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args) for _ in range(args.n_layers))
        self.out = nn.Linear(args.dim, args.vocab_size, bias=False)

    def set_kv_cache(self, batch_size: int, max_seq_len: int, dtype: torch.dtype = torch.bfloat16) -> None:
        for layer in self.layers:
            a = layer.attn
            a.cache = KVCache(batch_size, max_seq_len, a.n_kv_heads, a.head_dim, dtype)

    def forward(self, tokens: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h, start_pos)
        return self.out(h)

"""A reference-style model whose dims are cut from T (issue 32 item 2): compression by ratios 4 and 128, a window
of cached positions before the sequence, chunks, a compressed cache after a window, a flattened B·T and top-k
routing over experts, plus one dim the code makes 0 at every size."""
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class ModelArgs:
    vocab_size: int = 64
    dim: int = 16
    compress_ratios: list = field(default_factory=lambda: [4, 128])
    window_size: int = 16
    chunk_size: int = 32
    n_routed_experts: int = 8
    n_activated_experts: int = 2


class Compressor(nn.Module):
    def __init__(self, dim: int, ratio: int):
        super().__init__()
        self.ratio = ratio
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        return self.proj(x.view(b, t // self.ratio, self.ratio, d).mean(2))


class Expert(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.w = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w(x)


class MoE(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.k = args.n_activated_experts
        self.gate = nn.Linear(args.dim, args.n_routed_experts, bias=False)
        self.experts = nn.ModuleList(Expert(args.dim) for _ in range(args.n_routed_experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.view(-1, shape[-1])  # [B·T, dim]
        weights, indices = self.gate(x).softmax(-1).topk(self.k, dim=-1)
        y = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            idx, top = torch.where(indices == e)
            y[idx] += expert(x[idx]) * weights[idx, top, None]
        return y.view(shape)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.window = args.window_size
        self.chunk = args.chunk_size
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.compress = nn.ModuleList(Compressor(args.dim, r) for r in args.compress_ratios)
        self.windowed = nn.Linear(args.dim, args.dim)  # the window's cached positions, then the sequence: T+W
        self.chunked = nn.Linear(args.dim, args.dim)  # one row per chunk: T/chunk
        self.cached = nn.Linear(args.dim, args.dim)  # the window, then the compressed positions: T/4+W
        self.both = nn.Linear(args.dim, args.dim)  # the sequence, then its compression by 4: T+T/4
        self.empty = nn.Linear(args.dim, args.dim)  # no rows at any size: 0
        self.moe = MoE(args)

    def forward(self, tokens: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        h = self.embed(tokens)
        b, t, d = h.shape
        small, tiny = (c(h) for c in self.compress)  # [B, T/4, dim], [B, T/128, dim]
        past = h.new_zeros(b, self.window, d)
        w = self.windowed(torch.cat([past, h], dim=1))
        c = self.chunked(h.view(b, t // self.chunk, self.chunk, d).sum(2))
        k = self.cached(torch.cat([past, small], dim=1))
        both = self.both(torch.cat([h, small], dim=1))
        none = self.empty(h.new_zeros(b, 0, d))
        out = self.moe(h) + w[:, self.window:]
        return out + c.sum(1, keepdim=True) + k.sum(1, keepdim=True) + both[:, :t] + tiny.sum(1, keepdim=True) + \
            none.sum(1, keepdim=True)

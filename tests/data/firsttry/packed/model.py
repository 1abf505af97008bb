"""Packed sequences (issue 29's fixture in mistral-inference's style): the forward takes the token ids of several
sequences laid end to end, [T], and their lengths, `seqlens: List[int]`; it hands both to a method of its own, which
reads `(num_toks,) = input_ids.shape`. Attention runs through xformers' memory_efficient_attention (not installed
here: stubbed) with a block-diagonal causal mask made from the lengths, local where the config gives a window."""

from dataclasses import dataclass
from typing import List, Optional

import torch
from torch import nn
from xformers.ops.fmha import memory_efficient_attention
from xformers.ops.fmha.attn_bias import BlockDiagonalCausalMask


@dataclass
class PackedArgs:
    dim: int = 32
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 8
    hidden_dim: int = 48
    vocab_size: int = 100
    norm_eps: float = 1e-5
    max_batch_size: int = 0  # set by the loader
    sliding_window: Optional[int] = None


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, args: PackedArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, args.n_kv_heads, args.head_dim
        self.wq = nn.Linear(args.dim, args.n_heads * args.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * args.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * args.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * args.head_dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, mask) -> torch.Tensor:
        seqlen_sum, _ = x.shape
        q = self.wq(x).view(seqlen_sum, self.n_heads, self.head_dim)
        k = self.wk(x).view(seqlen_sum, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(seqlen_sum, self.n_kv_heads, self.head_dim)
        repeats = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(repeats, dim=1), v.repeat_interleave(repeats, dim=1)
        out = memory_efficient_attention(q[None], k[None], v[None], mask)  # xformers takes [1, T, H, D]
        return self.wo(out.view(seqlen_sum, self.n_heads * self.head_dim))


class Block(nn.Module):
    def __init__(self, args: PackedArgs):
        super().__init__()
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.attention = Attention(args)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)
        self.w1 = nn.Linear(args.dim, args.hidden_dim, bias=False)
        self.w2 = nn.Linear(args.hidden_dim, args.dim, bias=False)
        self.w3 = nn.Linear(args.dim, args.hidden_dim, bias=False)

    def forward(self, x: torch.Tensor, mask) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), mask)
        y = self.ffn_norm(h)
        return h + self.w2(nn.functional.silu(self.w1(y)) * self.w3(y))


class Packed(nn.Module):
    def __init__(self, args: PackedArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward_partial(self, input_ids: torch.Tensor, seqlens: List[int]) -> torch.Tensor:
        assert len(seqlens) <= self.args.max_batch_size, (len(seqlens), self.args.max_batch_size)
        (num_toks,) = input_ids.shape
        assert sum(seqlens) == num_toks, (sum(seqlens), num_toks)
        mask = BlockDiagonalCausalMask.from_seqlens(seqlens)
        if self.args.sliding_window:
            mask = mask.make_local_attention(self.args.sliding_window)
        h = self.tok_embeddings(input_ids)
        for layer in self.layers:
            h = layer(h, mask)
        return self.norm(h)

    def forward(self, input_ids: torch.Tensor, seqlens: List[int]) -> torch.Tensor:
        return self.output(self.forward_partial(input_ids, seqlens)).float()

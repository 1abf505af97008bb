"""A reference-style model (ModelArgs, Transformer(args), forward(tokens, start_pos), caches as buffers sized by
max_batch_size and max_seq_len) whose attention masks its scores in one of six styles, `mask`:

- "triu":   a -inf mask made with torch.full(...).triu_(start_pos + 1) and added to the scores (causal);
- "einsum": the same mask over einsum scores laid out [b, s, h, t] (DeepSeek's), broadcast over the heads;
- "sdpa":   F.scaled_dot_product_attention(..., is_causal=True) in a prefill, no mask at decode;
- "window": a bool band ones(...).tril(start_pos).triu(start_pos - window + 1), the rest filled with -inf (a
            sliding window done by masking: every cached position is scored);
- "topk":   an indexer scores every cached position, keeps its top index_topk, and a -inf mask made by
            scatter_ keeps only those of the attention's scores (as DeepSeek-V3.2-Exp's reference does);
- "topk_causal": the same, the prefill's causal mask added to the index mask.
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    max_batch_size: int = 4
    max_seq_len: int = 256
    vocab_size: int = 64
    dim: int = 32
    n_layers: int = 2
    n_heads: int = 4
    head_dim: int = 8
    mask: str = "triu"
    window: int = 16
    index_heads: int = 2
    index_dim: int = 8
    index_topk: int = 8


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        h, d = args.n_heads, args.head_dim
        self.wq = nn.Linear(args.dim, h * d, bias=False)
        self.wk = nn.Linear(args.dim, h * d, bias=False)
        self.wv = nn.Linear(args.dim, h * d, bias=False)
        self.wo = nn.Linear(h * d, args.dim, bias=False)
        if args.mask in ("topk", "topk_causal"):
            self.iq = nn.Linear(args.dim, args.index_heads * args.index_dim, bias=False)
            self.ik = nn.Linear(args.dim, args.index_dim, bias=False)
            self.register_buffer("ik_cache", torch.zeros(args.max_batch_size, args.max_seq_len, args.index_dim),
                                 persistent=False)
        self.register_buffer("k_cache", torch.zeros(args.max_batch_size, args.max_seq_len, h, d), persistent=False)
        self.register_buffer("v_cache", torch.zeros(args.max_batch_size, args.max_seq_len, h, d), persistent=False)

    def forward(self, x: torch.Tensor, start_pos: int) -> torch.Tensor:
        a = self.args
        bsz, seqlen, _ = x.shape
        end = start_pos + seqlen
        q = self.wq(x).view(bsz, seqlen, a.n_heads, a.head_dim)
        self.k_cache[:bsz, start_pos:end] = self.wk(x).view(bsz, seqlen, a.n_heads, a.head_dim)
        self.v_cache[:bsz, start_pos:end] = self.wv(x).view(bsz, seqlen, a.n_heads, a.head_dim)
        k = self.k_cache[:bsz, :end].transpose(1, 2)
        v = self.v_cache[:bsz, :end].transpose(1, 2)
        q = q.transpose(1, 2)
        if a.mask == "einsum":  # DeepSeek's layout: [b, s, h, t] scores, the [s, t] mask broadcast over heads
            scores = torch.einsum("bshd,bthd->bsht", q.transpose(1, 2), self.k_cache[:bsz, :end])
            scores = scores * a.head_dim ** -0.5
            mask = torch.full((seqlen, end), float("-inf"), device=x.device).triu_(start_pos + 1)
            scores += mask.unsqueeze(1)
            o = torch.einsum("bsht,bthd->bshd", scores.softmax(dim=-1), self.v_cache[:bsz, :end]).transpose(1, 2)
        elif a.mask == "sdpa":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=seqlen > 1)
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)) * a.head_dim ** -0.5
            if a.mask == "triu":
                mask = torch.full((seqlen, end), float("-inf"), device=x.device).triu_(start_pos + 1)
                scores = scores + mask
            elif a.mask == "window":
                keep = torch.ones(seqlen, end, dtype=torch.bool, device=x.device)
                keep = keep.tril(start_pos).triu(start_pos - a.window + 1)
                scores = scores.masked_fill(~keep, float("-inf"))
            elif a.mask in ("topk", "topk_causal"):
                self.ik_cache[:bsz, start_pos:end] = self.ik(x)
                iq = self.iq(x).view(bsz, seqlen, a.index_heads, a.index_dim)
                index = torch.einsum("bshd,btd->bst", iq, self.ik_cache[:bsz, :end])
                top = index.topk(min(a.index_topk, end), dim=-1)[1]
                mask = torch.full((bsz, seqlen, end), float("-inf"), device=x.device).scatter_(-1, top, 0)
                if a.mask == "topk_causal" and seqlen > 1:  # the prefill's causal mask added to the index mask
                    mask += torch.full((seqlen, end), float("-inf"), device=x.device).triu_(start_pos + 1)
                scores = scores + mask.unsqueeze(1)
            o = torch.matmul(scores.softmax(dim=-1), v)
        return self.wo(o.transpose(1, 2).flatten(2))


class Block(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attn = Attention(args)
        self.ffn = nn.Linear(args.dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, start_pos: int) -> torch.Tensor:
        x = x + self.attn(x, start_pos)
        return x + self.ffn(x)


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args) for _ in range(args.n_layers))
        self.head = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h, start_pos)
        return self.head(h[:, -1])

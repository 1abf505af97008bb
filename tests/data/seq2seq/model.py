"""A small encoder-decoder of its own making (issue 42, inputs of every kind): source token ids through a token
table and an encoder, target token ids through their own table and a decoder that attends to the encoder's output,
`forward(src, tgt)`. Written for archviz's tests in the style of a plain PyTorch translation model file."""

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:
    src_vocab: int = 50
    tgt_vocab: int = 60
    d_model: int = 32
    n_heads: int = 4
    d_ff: int = 64
    n_enc: int = 2
    n_dec: int = 2
    max_src_len: int = 24
    max_tgt_len: int = 12


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)

    def forward(self, x, mem, causal=False):
        B, Tq, D = x.shape
        Tk = mem.shape[1]
        q = self.q(x).view(B, Tq, self.h, D // self.h).transpose(1, 2)
        k = self.k(mem).view(B, Tk, self.h, D // self.h).transpose(1, 2)
        v = self.v(mem).view(B, Tk, self.h, D // self.h).transpose(1, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(D // self.h)
        if causal:
            s = s.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        y = s.softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, Tq, D))


class EncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn = Attention(c.d_model, c.n_heads)
        self.ff = nn.Sequential(nn.Linear(c.d_model, c.d_ff), nn.ReLU(), nn.Linear(c.d_ff, c.d_model))
        self.n1 = nn.LayerNorm(c.d_model)
        self.n2 = nn.LayerNorm(c.d_model)

    def forward(self, x):
        x = self.n1(x + self.attn(x, x))
        return self.n2(x + self.ff(x))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c.d_model, c.n_heads)
        self.cross = Attention(c.d_model, c.n_heads)
        self.ff = nn.Sequential(nn.Linear(c.d_model, c.d_ff), nn.ReLU(), nn.Linear(c.d_ff, c.d_model))
        self.n1 = nn.LayerNorm(c.d_model)
        self.n2 = nn.LayerNorm(c.d_model)
        self.n3 = nn.LayerNorm(c.d_model)

    def forward(self, y, mem):
        y = self.n1(y + self.self_attn(y, y, causal=True))
        y = self.n2(y + self.cross(y, mem))
        return self.n3(y + self.ff(y))


class Seq2Seq(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.src_embed = nn.Embedding(c.src_vocab, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab, c.d_model)
        self.encoder = nn.ModuleList([EncoderLayer(c) for _ in range(c.n_enc)])
        self.decoder = nn.ModuleList([DecoderLayer(c) for _ in range(c.n_dec)])
        self.out = nn.Linear(c.d_model, c.tgt_vocab)

    def forward(self, src, tgt):
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x)
        y = self.tgt_embed(tgt)
        for layer in self.decoder:
            y = layer(y, x)
        return self.out(y)


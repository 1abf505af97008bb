"""A two-stream diffusion transformer in the style of joint-attention text-to-image models: image tokens `img`
[B, L_img, in_channels] and text tokens `txt` [B, L_txt, text_dim], each with its position ids over the axes of a
multi-axis position embedding, projected apart, attended jointly over their concatenation (explicit softmax(QKᵀ)V,
no mask), then a feed-forward each. The text length is the config's `max_txt_len`; the image's is the pass's."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:
    in_channels: int = 16
    text_dim: int = 24
    hidden: int = 32
    heads: int = 4
    depth: int = 2
    axes_dim: tuple = (4, 2, 2)
    max_txt_len: int = 20


class EmbedND(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.axes_dim = list(c.axes_dim)
        self.proj = nn.Linear(len(self.axes_dim), c.hidden)

    def forward(self, ids):
        return self.proj(ids)


class JointBlock(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        h = c.hidden
        self.heads = c.heads
        self.img_qkv, self.txt_qkv = nn.Linear(h, 3 * h), nn.Linear(h, 3 * h)
        self.img_out, self.txt_out = nn.Linear(h, h), nn.Linear(h, h)
        self.img_mlp = nn.Sequential(nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h))
        self.txt_mlp = nn.Sequential(nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h))

    def forward(self, img, txt):
        b, lt, h = txt.shape
        qkv = torch.cat([self.txt_qkv(txt), self.img_qkv(img)], dim=1)
        n = qkv.shape[1]
        q, k, v = qkv.view(b, n, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        att = ((q @ k.transpose(-2, -1)) * (h // self.heads) ** -0.5).softmax(-1) @ v
        o = att.transpose(1, 2).reshape(b, n, h)
        txt = txt + self.txt_out(o[:, :lt])
        img = img + self.img_out(o[:, lt:])
        return img + self.img_mlp(img), txt + self.txt_mlp(txt)


class JointDiT(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.img_in = nn.Linear(c.in_channels, c.hidden)
        self.txt_in = nn.Linear(c.text_dim, c.hidden)
        self.time_in = nn.Linear(1, c.hidden)
        self.pe = EmbedND(c)
        self.blocks = nn.ModuleList(JointBlock(c) for _ in range(c.depth))
        self.final = nn.Linear(c.hidden, c.in_channels)

    def forward(self, img, img_ids, txt, txt_ids, timesteps):
        if img.ndim != 3 or txt.ndim != 3:
            raise ValueError("img and txt must be [B, L, C]")
        img = self.img_in(img) + self.time_in(timesteps[:, None])[:, None]
        txt = self.txt_in(txt)
        pe = self.pe(torch.cat([txt_ids, img_ids], dim=1))
        txt, img = txt + pe[:, :txt.shape[1]], img + pe[:, txt.shape[1]:]
        for block in self.blocks:
            img, txt = block(img, txt)
        return self.final(img)

"""A decoder in the style of training codebases that name their presets (`GPT.from_name("tiny")`, the preset's
keyword arguments handed on to a dataclass config that takes no others), whose KV caches are made by
`set_kv_cache(batch_size, max_seq_length, rope_cache_length=None, ...)` after construction and whose forward takes
the positions it writes as a tensor (`input_pos`): each step writes the cache at those positions and attends over
the whole cache under a mask. Its MLP class is picked by the name the config holds (`mlp_class_name`), and a
checkpoint's `model_config.yaml` holds the config (archviz test fixture)."""
import sys
from dataclasses import dataclass
from typing import Literal, Optional

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    name: str = ""
    vocab_size: int = 64
    n_embd: int = 32
    n_layer: int = 2
    n_head: int = 4
    n_query_groups: int = 2
    block_size: int = 128
    mlp_class_name: Literal["GeluMLP", "GatedMLP"] = "GeluMLP"

    @classmethod
    def from_name(cls, name: str, **kwargs) -> "Config":
        return cls(**{**PRESETS[name], **kwargs})


PRESETS = {"tiny": dict(name="tiny", n_embd=48, n_layer=3, n_head=6, n_query_groups=3, block_size=96)}


class KVCache(nn.Module):
    def __init__(self, k_shape: tuple, v_shape: tuple, device=None, dtype=None):
        super().__init__()
        self.register_buffer("k", torch.zeros(k_shape, device=device, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(v_shape, device=device, dtype=dtype), persistent=False)

    def forward(self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        self.k = self.k.to(k.dtype)
        self.v = self.v.to(v.dtype)
        return self.k.index_copy_(2, input_pos, k), self.v.index_copy_(2, input_pos, v)


class Attention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.head_size = config.n_embd // config.n_head
        self.qkv = nn.Linear(config.n_embd, (config.n_head + 2 * config.n_query_groups) * self.head_size)
        self.proj = nn.Linear(config.n_head * self.head_size, config.n_embd)
        self.kv_cache: Optional[KVCache] = None

    def build_kv_cache(self, batch_size: int, max_seq_length: int, rope_cache_length: Optional[int] = None,
                       device=None, dtype=None) -> KVCache:
        shape = (batch_size, self.config.n_query_groups, max_seq_length, self.head_size)
        return KVCache(shape, shape, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor], input_pos: Optional[torch.Tensor]):
        B, T, C = x.size()
        c = self.config
        q, k, v = self.qkv(x).split([c.n_head * self.head_size, c.n_query_groups * self.head_size,
                                      c.n_query_groups * self.head_size], dim=-1)
        q = q.view(B, T, c.n_head, self.head_size).transpose(1, 2)
        k = k.view(B, T, c.n_query_groups, self.head_size).transpose(1, 2)
        v = v.view(B, T, c.n_query_groups, self.head_size).transpose(1, 2)
        if input_pos is not None:
            k, v = self.kv_cache(input_pos, k, v)
        rep = c.n_head // c.n_query_groups
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class GeluMLP(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class GatedMLP(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.fc_1 = nn.Linear(config.n_embd, 4 * config.n_embd, bias=False)
        self.fc_2 = nn.Linear(config.n_embd, 4 * config.n_embd, bias=False)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=False)

    def forward(self, x):
        return self.proj(F.silu(self.fc_1(x)) * self.fc_2(x))


class Block(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.norm_1 = nn.LayerNorm(config.n_embd)
        self.attn = Attention(config)
        self.norm_2 = nn.LayerNorm(config.n_embd)
        self.mlp = getattr(sys.modules[__name__], config.mlp_class_name)(config)  # picked by its name

    def forward(self, x, mask, input_pos):
        x = x + self.attn(self.norm_1(x), mask, input_pos)
        return x + self.mlp(self.norm_2(x))


class GPT(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.mask_cache: Optional[torch.Tensor] = None

    @classmethod
    def from_name(cls, name: str, **kwargs) -> "GPT":
        return cls(Config.from_name(name, **kwargs))

    def set_kv_cache(self, batch_size: int, max_seq_length: Optional[int] = None,
                     rope_cache_length: Optional[int] = None, device=None, dtype=None) -> None:
        max_seq_length = max_seq_length or self.config.block_size
        for block in self.h:
            block.attn.kv_cache = block.attn.build_kv_cache(batch_size, max_seq_length, rope_cache_length,
                                                            device, dtype)
        ones = torch.ones((max_seq_length, max_seq_length), device=device, dtype=torch.bool)
        self.mask_cache = torch.tril(ones).unsqueeze(0).unsqueeze(0)

    def forward(self, idx: torch.Tensor, input_pos: Optional[torch.Tensor] = None) -> torch.Tensor:
        T = idx.size(1)
        if T > self.config.block_size:
            raise ValueError(f"Cannot forward sequence of length {T}, block size is only {self.config.block_size}")
        mask = None
        if input_pos is not None:
            mask = self.mask_cache.index_select(2, input_pos)
        x = self.wte(idx)
        for block in self.h:
            x = block(x, mask, input_pos)
        return self.lm_head(self.ln_f(x))

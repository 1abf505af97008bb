"""A model whose imports name GPU kernel packages that cannot install here, by their submodules, one of them behind
the model's own "please install" ImportError, and a plain-Python helper package that is simply not installed
(archviz test fixture)."""
import importlib.util
from dataclasses import dataclass

import torch.nn as nn
import triton.language as tl
import xformers.ops.fmha.attn_bias as attn_bias
from fast_hadamard_transform.cuda import hadamard_transform

import archviz_absent_helpers

if importlib.util.find_spec("mlstm_kernels") is None:
    raise ImportError("Please install mlstm_kernels package to use this model")
from mlstm_kernels.torch.chunkwise import mlstm_chunkwise  # noqa: E402

try:
    from causal_conv1d import causal_conv1d_fn
except ImportError as e:
    raise ImportError("the fast path needs its CUDA kernels; see the README") from e


@dataclass
class XConfig:
    dim: int = 24
    layers: int = 2
    vocab: int = 50
    helper_at_build: bool = False


class Mixer(nn.Module):
    def __init__(self, cfg: XConfig):
        super().__init__()
        self.proj = nn.Linear(cfg.dim, 2 * cfg.dim)
        self.out = nn.Linear(2 * cfg.dim, cfg.dim, bias=False)
        self.block = tl.constexpr(16) if False else 16

    def forward(self, x):
        return x + self.out(archviz_absent_helpers.gelu(self.proj(x)))


class XModel(nn.Module):
    def __init__(self, cfg: XConfig):
        super().__init__()
        if cfg.helper_at_build:
            archviz_absent_helpers.check(cfg)
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.mixers = nn.ModuleList(Mixer(cfg) for _ in range(cfg.layers))
        self.mask = attn_bias.BlockDiagonalMask
        self.kernels = (hadamard_transform, mlstm_chunkwise, causal_conv1d_fn)

    def forward(self, tokens):
        x = self.embed(tokens)
        for m in self.mixers:
            x = m(x)
        return x

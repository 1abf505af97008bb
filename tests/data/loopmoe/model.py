"""Reference-style MoE whose experts run in a Python loop: odd layers mask the tokens routed to each expert
(`for mask, expert in zip(masks, self.experts): y[mask] += expert(x[mask])`), even layers gather them with
`torch.where` and scatter back with `index_add_`. Neither keeps its top-k under a conventional name, and the even
layers' experts are not named "experts"."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    vocab_size: int = 64
    dim: int = 16
    ffn_dim: int = 24
    n_layers: int = 4
    n_routes: int = 6
    routes_per_token: int = 2


class FFN(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w_in = nn.Linear(dim, hidden, bias=False)
        self.w_out = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_out(F.gelu(self.w_in(x)))


class MaskedMoE(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.k = args.routes_per_token
        self.router = nn.Linear(args.dim, args.n_routes, bias=False)
        self.experts = nn.ModuleList(FFN(args.dim, args.ffn_dim) for _ in range(args.n_routes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.router(flat).softmax(-1).topk(self.k, dim=-1)
        masks = [(chosen == e).any(-1) for e in range(len(self.experts))]
        y = torch.zeros_like(flat)
        for mask, expert in zip(masks, self.experts):
            y[mask] += expert(flat[mask])
        return y.reshape(x.shape)


class GatheredMoE(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_pick = args.routes_per_token
        self.scores = nn.Linear(args.dim, args.n_routes, bias=False)
        self.mlps = nn.ModuleList(FFN(args.dim, args.ffn_dim) for _ in range(args.n_routes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = torch.topk(self.scores(flat).softmax(-1), self.n_pick, dim=-1)
        y = torch.zeros_like(flat)
        for e, mlp in enumerate(self.mlps):
            rows, slot = torch.where(chosen == e)
            y.index_add_(0, rows, mlp(flat[rows]) * weights[rows, slot, None])
        return y.reshape(x.shape)


class Block(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.norm = nn.LayerNorm(args.dim)
        self.moe = MaskedMoE(args) if layer_id % 2 else GatheredMoE(args)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.moe(self.norm(x))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(i, args) for i in range(args.n_layers))
        self.head = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)

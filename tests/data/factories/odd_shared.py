"""A model whose records share and repeat in odd ways: a head tied to the embedding, one module under two paths, a
buffer every layer holds, identical experts, attributes holding lists (which do not hash), an fp8 weight with its
scale, a module with no tensors, and a parameter slot left None."""
import torch
from torch import nn


class Expert(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.sizes = [dim, hidden]
        self.flags = (True, 1, 1.0)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))


class Quantized(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim, dim, dtype=torch.float8_e4m3fn), requires_grad=False)
        self.scale = nn.Parameter(torch.empty(1, 1), requires_grad=False)
        self.register_parameter("bias", None)

    def forward(self, x):
        return (x @ self.weight.to(x.dtype).t()) * self.scale


class Layer(nn.Module):
    def __init__(self, dim: int, freqs: torch.Tensor, index: int):
        super().__init__()
        self.layer_idx = index
        self.experts = nn.ModuleList(Expert(dim, 2 * dim) for _ in range(4))
        self.quant = Quantized(dim)
        self.gate = nn.Identity()
        self.register_buffer("freqs", freqs, persistent=False)

    def forward(self, x):
        x = x + self.freqs
        for expert in self.experts:
            x = x + expert(x)
        return self.gate(self.quant(x))


class Model(nn.Module):
    def __init__(self, vocab: int = 32, dim: int = 8, n_layers: int = 3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        freqs = torch.arange(dim, dtype=torch.float32)
        self.layers = nn.ModuleList(Layer(dim, freqs, i) for i in range(n_layers))
        self.norm = nn.LayerNorm(dim)
        self.final = self.norm
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.final(x))


def build() -> Model:
    return Model()

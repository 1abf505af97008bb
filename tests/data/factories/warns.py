"""A model whose code warns: once while it is built, and from a sub-module's forward (called twice) in the pass."""

import warnings

import torch
from torch import nn


class Noisy(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        warnings.warn("Noisy.forward: this projection is deprecated", UserWarning)
        warnings.warn("hidden by the default filters", DeprecationWarning)
        return super().forward(x)


class Model(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        warnings.warn(f"Model.__init__: dim={dim} is small", UserWarning)
        self.proj = Noisy(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        return self.proj(h)


def model() -> Model:
    return Model()


class TokenModel(nn.Module):
    """The same warning layer behind an embedding: a forward on token ids, which the probe can run for real."""

    def __init__(self, vocab: int = 16, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = Noisy(dim, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.embed(ids))


def token_model() -> TokenModel:
    return TokenModel()


class Opaque(Model):
    """The same model holding an embedding table it never reads: nothing says its input is features rather than
    token ids, so a pass without --input fails."""

    def __init__(self) -> None:
        super().__init__()
        self.unused = nn.Embedding(2, 8)


def opaque() -> Opaque:
    return Opaque()

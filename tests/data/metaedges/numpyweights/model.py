"""A recommendation-style model whose weights are made in numpy and wrapped as tensors: an embedding table from
`np.random.uniform(...).astype(np.float32)` wrapped by `torch.tensor(..., requires_grad=True)` into `.weight.data`, a
projection from `torch.from_numpy(np.random.randn(...))`, a head from a `default_rng()` draw through
`torch.as_tensor`, and a small permutation kept as a buffer (its values are read). Written for archviz's tests."""

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@dataclass
class TableConfig:
    rows: int
    dim: int
    hidden: int
    classes: int


class NumpyInit(nn.Module):
    def __init__(self, config: TableConfig):
        super().__init__()
        n, m, h = config.rows, config.dim, config.hidden
        self.table = nn.EmbeddingBag(n, m, mode="sum")
        w = np.random.uniform(low=-np.sqrt(1 / n), high=np.sqrt(1 / n), size=(n, m)).astype(np.float32)
        self.table.weight.data = torch.tensor(w, requires_grad=True)
        self.proj = nn.Parameter(torch.from_numpy(np.random.randn(m, h).astype(np.float32) * np.sqrt(2 / (m + h))))
        rng = np.random.default_rng(0)
        self.head = nn.Parameter(torch.as_tensor(rng.standard_normal((h, config.classes * 1024), dtype=np.float32)))
        self.register_buffer("order", torch.from_numpy(np.random.permutation(16)))
        assert sorted(self.order.tolist()) == list(range(16))

    def forward(self, ids):
        return (self.table(ids) @ self.proj) @ self.head

"""A vision backbone in the style of the 2021-era repositories: drop-path rates read one by one from a linspace
(`[x.item() for x in torch.linspace(...)]`, and `float(rates[i])`), CUDA queries while building
(`torch.cuda.current_device()`, `get_device_capability()`, `device_count()`, `synchronize()`, a stream), `.cuda()` and
`.to(torch.device("cpu"))` and `.cpu()` of the whole model, and an `is_available()` branch. Written for archviz's
tests."""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class BackboneConfig:
    in_chans: int = 3
    patch: int = 4
    embed_dim: int = 32
    depth: int = 5
    mlp_ratio: int = 2
    num_classes: int = 10
    drop_path_rate: float = 0.2


class DropPath(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x):
        return x


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int, drop: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop_path = DropPath(drop) if drop > 0.0 else nn.Identity()

    def forward(self, x):
        return x + self.drop_path(self.fc2(torch.relu(self.fc1(self.norm(x)))))


class Backbone(nn.Module):
    def __init__(self, config: BackboneConfig):
        super().__init__()
        c = config
        self.device_id = torch.cuda.current_device()
        self.replicas = torch.cuda.device_count()
        self.fast_bf16 = torch.cuda.get_device_capability(self.device_id)[0] >= 8
        with torch.cuda.device(self.device_id):
            self.copy_stream = torch.cuda.Stream()
        self.patch_embed = nn.Conv2d(c.in_chans, c.embed_dim, c.patch, c.patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.embed_dim))
        dpr = [x.item() for x in torch.linspace(0, c.drop_path_rate, c.depth)]
        rates = torch.linspace(0, c.drop_path_rate, c.depth)
        self.rates = [float(rates[i]) for i in range(c.depth)]
        self.rates64 = rates.to("cuda", torch.float64).tolist()
        self.blocks = nn.ModuleList(Block(c.embed_dim, c.mlp_ratio * c.embed_dim, dpr[i]) for i in range(c.depth))
        self.norm = nn.LayerNorm(c.embed_dim)
        self.head = nn.Linear(c.embed_dim, c.num_classes)
        if torch.cuda.is_available():
            self.cuda(self.device_id)
        else:
            self.to(torch.device("cpu"))
            self.cpu()
        self.cuda()
        torch.cuda.synchronize()

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])

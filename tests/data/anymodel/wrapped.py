from dataclasses import dataclass

import torch.nn as nn


@dataclass
class CoreParams:
    width: int
    depth: int
    out: int


class Core(nn.Module):
    def __init__(self, params: CoreParams):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(params.width, params.width) for _ in range(params.depth)])
        self.out = nn.Linear(params.width, params.out, bias=False)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.out(x)


class CoreLoraWrapper(Core):
    def __init__(self, lora_rank: int = 4, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lora_rank = lora_rank

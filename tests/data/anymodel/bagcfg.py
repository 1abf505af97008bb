import torch.nn as nn


class Net(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.model.width)
        self.layers = nn.ModuleList([nn.Linear(cfg.model.width, cfg.model.width) for _ in range(cfg["depth"])])
        self.head = nn.Linear(cfg.model.width, cfg.get("classes", 3))

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)

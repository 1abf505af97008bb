from dataclasses import dataclass

import torch.nn as nn


@dataclass(frozen=True)
class Settings:
    width: int = 16
    depth: int = 2


class Classifier(nn.Module):
    def __init__(self, settings: Settings, num_classes: int):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(settings.width, settings.width) for _ in range(settings.depth)])
        extra = getattr(settings, "extra_tokens", 0)  # a key the code reads that Settings does not declare
        self.extra = nn.Embedding(extra, settings.width) if extra else None
        self.head = nn.Linear(settings.width, num_classes)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class Plain(nn.Module):
    def __init__(self, num_classes, width=8):
        super().__init__()
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x):
        return self.fc(x)

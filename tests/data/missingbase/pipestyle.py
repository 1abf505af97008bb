import torch.nn as nn
from pipekit_absent.pipe import PipelineModule


class Pipe(PipelineModule, nn.Module):
    def __init__(self, width: int = 24, depth: int = 3, vocab: int = 50):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, idx):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x)
        return x


class Remembering(PipelineModule):
    def __init__(self, width: int = 8):
        super().__init__(num_stages=1)
        self.save_hyperparameters()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x)

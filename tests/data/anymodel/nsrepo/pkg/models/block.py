import torch.nn as nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, 2 * width)
        self.back = nn.Linear(2 * width, width)

    def forward(self, x):
        return self.back(self.fc(x))

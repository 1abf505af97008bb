import torch.nn as nn


class get_loss(nn.Module):
    def __init__(self, weight=1.0):
        super().__init__()
        self.weight = weight
        self.mse = nn.MSELoss()

    def forward(self, pred, target):
        return self.weight * self.mse(pred, target)

"""Two configs and two top models in one file; and a model that needs more than its config (archviz test fixture)."""
from dataclasses import dataclass

import torch.nn as nn


@dataclass
class EncoderConfig:
    width: int = 8
    depth: int = 1


@dataclass
class DecoderConfig:
    width: int = 8
    depth: int = 1


class Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(config.width, config.width) for _ in range(config.depth))


class Decoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(config.width, config.width, bias=False) for _ in range(config.depth))


class Captioner(nn.Module):
    def __init__(self, config: DecoderConfig, vision_tower):
        super().__init__()
        self.vision = vision_tower
        self.decoder = Decoder(config)

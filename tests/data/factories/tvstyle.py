"""Classifiers and heads written in torchvision's style (torchvision itself cannot be imported here): keyword-only
factories taking `weights`/`weights_backbone` (None, or a name this fixture cannot download), a VGG whose 7x7
feature maps equal the meta pass's default batch, an Inception whose auxiliary head runs only in training, and a
DeepLab-style pooling branch whose batch norm refuses a batch of one in training."""

from __future__ import annotations

from collections import namedtuple

import torch
import torch.nn.functional as F
from torch import nn


def _verify(weights, what: str = "weights") -> None:
    """torchvision resolves a weights name and downloads it; this fixture has nothing to download."""
    if weights is not None:
        raise ValueError(f"{what}={weights!r}: no such weights (pass {what}=None to build without)")


class VGG(nn.Module):
    def __init__(self, cfg=(8, "M", 16, "M", 32, "M", 32, "M", 32, "M"), num_classes: int = 10,
                 dropout: float = 0.5) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(channels, v, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                channels = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(nn.Linear(channels * 7 * 7, 64), nn.ReLU(True), nn.Dropout(p=dropout),
                                        nn.Linear(64, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def vgg_tiny(*, weights=None, num_classes: int = 10) -> VGG:
    _verify(weights)
    return VGG(num_classes=num_classes)


class BasicConv2d(nn.Module):
    def __init__(self, cin: int, cout: int, **kwargs) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class InceptionAux(nn.Module):
    def __init__(self, cin: int, num_classes: int) -> None:
        super().__init__()
        self.conv0 = BasicConv2d(cin, 16, kernel_size=1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.conv0(x), (1, 1))
        return self.fc(torch.flatten(x, 1))


InceptionOutputs = namedtuple("InceptionOutputs", ["logits", "aux_logits"])


class Inception(nn.Module):
    def __init__(self, num_classes: int = 10, aux_logits: bool = True) -> None:
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, 8, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(8, 16, kernel_size=3)
        self.AuxLogits = InceptionAux(16, num_classes) if aux_logits else None
        self.Mixed = BasicConv2d(16, 24, kernel_size=3, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(24, num_classes)

    def forward(self, x: torch.Tensor):
        x = self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.avgpool(self.Mixed(x))
        x = self.fc(torch.flatten(x, 1))
        if self.training and self.AuxLogits is not None:
            return InceptionOutputs(x, aux)
        return x


def inception_tiny(*, weights=None, num_classes: int = 10, aux_logits: bool = True) -> Inception:
    _verify(weights)
    return Inception(num_classes=num_classes, aux_logits=aux_logits)


class ASPPPooling(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = x.shape[-2:]
        for mod in self:
            x = mod(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class DeepLabTiny(nn.Module):
    def __init__(self, num_classes: int = 5) -> None:
        super().__init__()
        self.backbone = nn.Sequential(BasicConv2d(3, 16, kernel_size=3, stride=2, padding=1),
                                      BasicConv2d(16, 32, kernel_size=3, stride=2, padding=1))
        self.pool = ASPPPooling(32, 16)
        self.project = nn.Conv2d(32 + 16, num_classes, 1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        size = x.shape[-2:]
        f = self.backbone(x)
        y = self.project(torch.cat([f, self.pool(f)], dim=1))
        return {"out": F.interpolate(y, size=size, mode="bilinear", align_corners=False)}


def deeplab_tiny(*, weights=None, weights_backbone="IMAGENET1K_V1", num_classes: int = 5) -> DeepLabTiny:
    _verify(weights)
    _verify(weights_backbone, "weights_backbone")
    return DeepLabTiny(num_classes=num_classes)


class AnyStage(nn.Sequential):
    def __init__(self, width_in: int, width_out: int, depth: int) -> None:
        super().__init__()
        for i in range(depth):
            self.add_module(f"block{i + 1}", nn.Sequential(
                nn.Conv2d(width_in if i == 0 else width_out, width_out, 3, stride=2 if i == 0 else 1, padding=1,
                          bias=False), nn.BatchNorm2d(width_out), nn.ReLU(inplace=True)))


class RegNetTiny(nn.Module):
    """torchvision's RegNet computes its stage widths and depths from tensors while constructing."""

    def __init__(self, depth: int = 5, w_0: int = 8, w_a: float = 4.0, group_width: int = 4,
                 num_classes: int = 10) -> None:
        super().__init__()
        widths_cont = torch.arange(depth) * w_a + w_0
        block_widths = (torch.round(widths_cont / group_width) * group_width).int().tolist()
        stage_ids = torch.arange(depth).int().tolist()
        stages, depths = [], []
        for w, i in zip(block_widths, stage_ids):
            if stages and stages[-1] == w:
                depths[-1] += 1
            else:
                stages.append(w)
                depths.append(1)
        self.stem = nn.Conv2d(3, w_0, 3, padding=1)
        self.trunk_output = nn.Sequential(*(AnyStage(w_0 if k == 0 else stages[k - 1], w, d)
                                            for k, (w, d) in enumerate(zip(stages, depths))))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(stages[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.trunk_output(self.stem(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def regnet_tiny(*, weights=None, depth: int = 5) -> RegNetTiny:
    _verify(weights)
    return RegNetTiny(depth=depth)

"""A classifier in timm's style (timm cannot be imported here): `create_model`-like factory, `img_size`/`in_chans`
arguments, a patch-embedding convolution, and the `pretrained_cfg` dict whose "input_size" says what it reads."""

from __future__ import annotations

import torch
from torch import nn


class PatchEmbed(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_chans: int, embed_dim: int) -> None:
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class TinyViT(nn.Module):
    def __init__(self, img_size: int = 48, patch_size: int = 8, in_chans: int = 3, num_classes: int = 10,
                 embed_dim: int = 32, depth: int = 2, num_heads: int = 4) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, embed_dim))
        self.blocks = nn.Sequential(*(nn.TransformerEncoderLayer(embed_dim, num_heads, 2 * embed_dim,
                                                                 batch_first=True) for _ in range(depth)))
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.norm(self.blocks(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.forward_features(x)[:, 0])


def vit_tiny_patch8(pretrained: bool = False, **kwargs) -> TinyViT:
    if pretrained:
        raise ValueError("pretrained=True: this fixture has no weights to download")
    model = TinyViT(**kwargs)
    size = kwargs.get("img_size", 48)
    model.pretrained_cfg = {"input_size": (kwargs.get("in_chans", 3), size, size), "num_classes": 10,
                            "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}
    return model


def convnet_no_cfg() -> nn.Module:
    """No pretrained_cfg, no config: the input is read off the first convolution (1 channel)."""
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                         nn.Linear(16, 3))

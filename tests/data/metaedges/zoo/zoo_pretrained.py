"""Factories in the style of a model zoo that downloads pretrained weights by default: `torch.hub`'s
`load_state_dict_from_url` (as an attribute and as a name bound at import), a `urllib.request.urlretrieve` then
`torch.load`, and `model.load_state_dict` of what came back. Written for archviz's tests (the URLs name a domain that
does not exist)."""

import os
import tempfile
import urllib.request

import torch
from torch import nn
from torch.hub import load_state_dict_from_url

URL = "https://weights.example.invalid/tiny_classifier.pth"


class TinyClassifier(nn.Module):
    def __init__(self, width: int = 32, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        return self.fc(self.features(x).mean((2, 3)))


def tiny_classifier(pretrained: bool = True, width: int = 32, classes: int = 10) -> TinyClassifier:
    model = TinyClassifier(width, classes)
    if pretrained:
        state = torch.hub.load_state_dict_from_url(URL, map_location="cpu", progress=False)
        state.update(load_state_dict_from_url(URL + ".ema", progress=False))
        state = {k.replace("module.", ""): v for k, v in state["state_dict"].items()}
        model.load_state_dict(state)
    return model


def tiny_classifier_file(pretrained: bool = True) -> TinyClassifier:
    model = TinyClassifier()
    if pretrained:
        path = os.path.join(tempfile.gettempdir(), "archviz-never-written.pth")
        path, _ = urllib.request.urlretrieve(URL, path)
        model.load_state_dict(torch.load(path, map_location="cpu")["model"], strict=True)
    return model

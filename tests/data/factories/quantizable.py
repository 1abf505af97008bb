"""A quantizable vision net in the style of a vision library's `quantize=True` factory (QuantStub/DeQuantStub, a
Conv + BN + ReLU fused, qconfig set, prepare, a calibration forward on a random image, convert), and a
dynamic-quantized Linear stack (`quantize_dynamic`)."""

import torch
from torch import nn
from torch.ao import quantization as tq

WIDTHS = (3, 8, 16)  # image channels, conv1's and conv2's output channels
KERNEL = 3
CLASSES = 10
HIDDEN = (32, 48, 24)  # the dynamic stack's feature sizes
VOCAB = 50  # the dynamic RNN's embedding rows


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(WIDTHS[0], WIDTHS[1], KERNEL, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(WIDTHS[1], WIDTHS[2], KERNEL, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(WIDTHS[2])
        self.relu2 = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.act = nn.Hardswish()
        self.fc = nn.Linear(WIDTHS[2], CLASSES)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.relu1(self.conv1(x))
        x = self.relu2(self.bn2(self.conv2(x)))
        x = self.act(self.pool(x).flatten(1))
        return self.dequant(self.fc(x))

    def fuse_model(self):
        tq.fuse_modules(self, [["conv2", "bn2", "relu2"]], inplace=True)


def build(quantize=True):
    model = SmallNet()
    if quantize:
        model.eval()
        model.fuse_model()
        model.qconfig = tq.get_default_qconfig("fbgemm")
        tq.prepare(model, inplace=True)
        model(torch.rand(1, WIDTHS[0], 16, 16))  # calibration
        tq.convert(model, inplace=True)
    return model


def dynamic():
    layers = []
    for a, b in zip(HIDDEN, HIDDEN[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return tq.quantize_dynamic(nn.Sequential(*layers), {nn.Linear}, dtype=torch.qint8)


def dynamic_rnn():
    """An embedding bag (weight-only, a scale per row), an LSTM and its head (int8), dynamic-quantized."""
    spec = {nn.LSTM: tq.default_dynamic_qconfig, nn.Linear: tq.default_dynamic_qconfig,
            nn.EmbeddingBag: tq.float_qparams_weight_only_qconfig}
    return tq.quantize_dynamic(nn.ModuleDict({"emb": nn.EmbeddingBag(VOCAB, HIDDEN[0]),
                                              "rnn": nn.LSTM(HIDDEN[0], HIDDEN[1], num_layers=2),
                                              "head": nn.Linear(HIDDEN[1], HIDDEN[2])}), spec)

"""Models converted by torch.ao.quantization (a vision library's `quantize=True` factory: prepare, a calibration
forward, convert; `quantize_dynamic`) build on meta, their packed int8 weights counted as the parameters they hold
(one per value) and their scales and zero points reported apart; a real CPU build of the same model (no nn.Parameter
at all: the weights live in packed params) gives the same counts."""

from __future__ import annotations

import json
import math
import sys

import pytest
import torch

import archviz
from helpers import FACTORIES

sys.path.insert(0, str(FACTORIES))
import quantizable  # noqa: E402

W = quantizable.WIDTHS
K = quantizable.KERNEL


def _static_counts() -> tuple[int, int]:
    """(parameters, scales) of the converted SmallNet from its layer sizes: conv1 weight + bias, conv2 weight + the
    bias its fused batch norm folds into it (one per output channel), fc weight + bias; scales: per output channel a
    weight scale and zero point (fbgemm's per-channel weights) and an output scale and zero point for each of the three,
    and a scale and zero point for the QuantStub's and the Hardswish's outputs."""
    convs = [(W[0], W[1]), (W[1], W[2])]
    params = sum(o * i * K * K + o for i, o in convs) + W[2] * quantizable.CLASSES + quantizable.CLASSES
    outs = [W[1], W[2], quantizable.CLASSES]
    return params, sum(2 * o + 2 for o in outs) + 2 + 2


def _dynamic_counts() -> tuple[int, int]:
    """The dynamic stack: each Linear's weight + bias; one weight scale and zero point each (per tensor)."""
    pairs = list(zip(quantizable.HIDDEN, quantizable.HIDDEN[1:]))
    return sum(a * b + b for a, b in pairs), 2 * len(pairs)


def _dynamic_rnn_counts() -> tuple[int, int]:
    """The embedding bag (a scale and zero point per row), the dynamic LSTM (two layers, four gates: per layer an
    input and a hidden weight and their two biases) and its head; one scale and zero point per int8 weight."""
    x, h, out = quantizable.HIDDEN
    lstm = sum(4 * h * i + 4 * h * h + 2 * 4 * h for i in (x, h))
    return quantizable.VOCAB * x + lstm + h * out + out, 2 * quantizable.VOCAB + 2 * (2 * 2 + 1)


@pytest.mark.parametrize("factory, counts", [("build", _static_counts), ("dynamic", _dynamic_counts),
                                             ("dynamic_rnn", _dynamic_rnn_counts)])
def test_converted_model_builds_on_meta_and_counts_as_on_cpu(archviz_cli, factory, counts):
    params, scales = counts()
    r = archviz_cli("summary", f"quantizable:{factory}", "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["parameters"], out["scale_elements"], out["buffer_elements"]) == (params, scales, 0)
    assert any("converted by torch.ao.quantization: counted as int8 weights, scales apart" in n for n in out["notes"])
    # the real conversion on the CPU: no nn.Parameter left, the same counts from the live model
    live = getattr(quantizable, factory)()
    assert not list(live.parameters())
    int8 = sum(t.numel() for t in _packed(live) if t.dtype in (torch.qint8, torch.quint8))
    assert sum(t.numel() for t in _packed(live)) == params
    s = archviz.load(live).summary
    assert (s.parameters, s.scale_elements, s.buffer_elements) == (params, scales, 0)
    by_dtype = dict(s.parameters_by_dtype)
    assert by_dtype.get("qint8", 0) + by_dtype.get("quint8", 0) == int8
    assert by_dtype == out["parameters_by_dtype"]
    assert s.bytes == out["bytes"]


def _packed(live: torch.nn.Module) -> list[torch.Tensor]:
    """The weights and biases torch's converted modules of `live` give back (`_weight_bias()`)."""
    out = []
    for m in live.modules():
        if callable(getattr(m, "weight", None)) and hasattr(m, "_weight_bias"):  # Linear, Conv
            out += [t for t in m._weight_bias() if t is not None]
        elif isinstance(getattr(m, "_weight_bias", lambda: None)(), dict):  # an RNN
            out += [t for group in m._weight_bias().values() for t in group.values()]
        elif callable(getattr(m, "weight", None)) and type(m).__module__.startswith("torch.ao.nn.quantized"):
            out.append(m.weight())  # an embedding
    return out


def test_per_channel_scales_are_recorded_beside_their_weight():
    live = quantizable.build()
    rec = archviz.load(live)
    w = live.conv1.weight()
    tensors = {t.name: t for t in rec.module("conv1").tensors}
    assert tensors["weight"].elements == math.prod(w.shape) and tensors["weight"].dtype == "qint8"
    assert tensors["weight_scale"].kind == "scale" and tensors["weight_scale"].scales == "weight"
    assert tensors["weight_scale"].shape == tuple(w.q_per_channel_scales().shape)
    assert {t.name: t.kind for t in rec.module("quant").tensors} == {"scale": "scale", "zero_point": "scale"}

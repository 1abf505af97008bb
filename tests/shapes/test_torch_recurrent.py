"""torch's recurrent layers answered whole on meta: nn.LSTM (a projection included), a bidirectional batch-first
nn.GRU, in a codec of strided convolutions (tests/fixtures/firstcmds/codec.py). On meta their kernels decompose
into ops per time step (a minute for an audio codec's two LSTMs over 2,048 frames); here each is one call with the
shapes and FLOPs a real CPU run of the same model gives, and the split counts them as sequence mixing while the
encoder that holds one stays convolution."""

from __future__ import annotations

import importlib.util
import json

import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers import FIXTURES

from archviz.cost.measure import measure
from archviz.cost.report import cost_report

CODEC = FIXTURES / "firstcmds" / "codec.py"


def _codec():
    spec = importlib.util.spec_from_file_location("firstcmds_codec", CODEC)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_recurrent_layers_are_one_call_with_the_real_runs_shapes_and_flops():
    record = measure(str(CODEC))
    r = cost_report(record)
    shape = tuple(json.loads(r.inputs))  # the pass's one input, [1, 1, T] from the first Conv1d
    model = _codec().Codec().eval()
    outs: dict[str, tuple] = {}
    recurrent = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.RNNBase)}
    for name, m in recurrent.items():
        m.register_forward_hook(lambda mod, a, out, name=name: outs.__setitem__(name, (
            tuple(a[0].shape), tuple(out[0].shape), tuple(t.shape for t in (out[1] if isinstance(out[1], tuple)
                                                                            else (out[1],))))))
    # oneDNN's fused RNN kernel is one op FlopCounterMode has no formula for: torch's default kernel, whose
    # matrix products it counts
    with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.randn(*shape))
    assert r.prefill.flops == counter.get_total_flops()
    # every weight matrix of a recurrent layer applied once a token (its input's tokens: T × batch)
    mixing = sum(2 * outs[n][0][0] * outs[n][0][1] * sum(p.numel() for p in m.parameters() if p.dim() == 2)
                 for n, m in recurrent.items())
    assert r.prefill.attention == mixing and r.prefill.other == r.prefill.flops - mixing
    index = record.index()
    for name, (x, y, states) in outs.items():
        m = index[name]
        assert any(k.startswith("torch._VF.") for k in m.kernels), (name, m.kernels)
        traced = [tuple(1 if d == "B" else d for d in s) for s in m.calls[0].outputs]  # the real run's batch: 1
        assert traced == [y, *states], (name, m.calls[0].outputs)

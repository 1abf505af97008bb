"""Construction that meta cannot run, and native code run at import (issue 42): each fixture is written in the style
of the failure (tests/data/metaedges/), built on meta, and checked against counts worked out here from its config
with the layers' own formulas, values computed here on the CPU, or a real CPU build and run of the same fixture.

- audio: a bool buffer made without a device and stored `.to_sparse()` (no meta kernel), a `@torch.jit.script`
  helper with TorchScript's fuser switched on at import, a forward that checks `x.type()`, `self.to(device=None)`;
- backbone: drop-path rates read one element at a time (`.item()`, `float(rates[i])`), CUDA queries, `.cuda()` and
  `.to(torch.device("cpu"))` while building;
- zoo: factories that download pretrained weights by default (torch.hub, urllib + torch.load, load_state_dict);
- numpyweights: weights drawn in numpy and wrapped as tensors, never allocated;
- kernels: `CUDA_HOME`, `cpp_extension.load`/`load_inline`, numba's and triton's decorators at import.
"""

from __future__ import annotations

import json
import socket
import sys
import tracemalloc
from pathlib import Path

import pytest
import torch

import archviz
from archviz.errors import SourceError
from archviz.records import loads, to_json_dict
from archviz.sources.meta import meta_build
from helpers import TESTS
from realrun import real_calls

DATA = TESTS / "data" / "metaedges"


def _line(path: Path, needle: str) -> int:
    """The last line that holds `needle` (the docstrings above name the same calls)."""
    return max(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def _linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


@pytest.fixture
def jit_flags():
    """The audio fixture switches TorchScript's fuser on at import, as training code does: put back after."""
    mode = torch._C._jit_set_profiling_mode(True)
    executor = torch._C._jit_set_profiling_executor(True)
    fuse = torch._C._jit_can_fuse_on_cpu()
    yield
    torch._C._jit_set_profiling_mode(mode)
    torch._C._jit_set_profiling_executor(executor)
    torch._C._jit_override_can_fuse_on_cpu(fuse)


def test_sparse_buffer_scripted_helper_and_type_check(archviz_cli, jit_flags):
    model = DATA / "audio" / "model.py"
    config = DATA / "audio" / "config.json"
    c = json.loads(config.read_text())
    r = archviz_cli("walk", model, "--config", config, "--shapes", "--input", "mel=2,8,12:float32", "-o", "-")
    assert r.returncode == 0, r.stderr
    rec = to_json_dict(loads(r.stdout))
    s, v = c["n_state"], c["n_vocab"]
    block = 2 * s + _linear(s, 4 * s) + _linear(4 * s, s)
    assert rec["summary"]["parameters"] == c["n_mels"] * s * 3 + s + c["n_layer"] * block + 2 * s + s * v
    heads = next(t for t in rec["modules"][0]["tensors"] if t["name"] == "alignment_heads")
    assert heads["shape"] == [c["n_layer"], c["n_head"]] and heads["dtype"] == "bool"
    notes = rec["source"]["notes"]
    sparse = _line(model, "heads.to_sparse()")
    assert (f"to_sparse() of a small tensor made without a device at model.py:{sparse} has no "
            "meta kernel: made on the CPU from its values, then put on meta") in notes
    assert any(n.startswith(f"@torch.jit.script on fused_gelu at model.py:{_line(model, '@torch.jit.script')}")
               for n in notes)
    scripted = _line(model, "torch.jit.script(nn.LayerNorm")
    assert any(n.startswith(f"torch.jit.script of LayerNorm at model.py:{scripted} kept as Python") for n in notes)
    # The same fixture built on the CPU for real and run: every module's shapes as the meta pass found them.
    real = archviz.build(str(model), config=str(config), device="cpu").model
    assert real.alignment_heads.to_dense().sum().item() == (c["n_layer"] - c["n_layer"] // 2) * c["n_head"]
    got = {m["path"]: [{"inputs": k["inputs"], "outputs": k["outputs"]} for k in m["calls"]]
           for m in rec["modules"] if m.get("calls")}
    assert got == real_calls(real, torch.zeros(2, c["n_mels"], 12))


def test_drop_path_rates_and_cuda_queries_while_building():
    model = DATA / "backbone" / "model.py"
    c = {"in_chans": 3, "patch": 4, "mlp_ratio": 2, "num_classes": 10,
         **json.loads((DATA / "backbone" / "config.json").read_text())}
    built = archviz.build(str(model), config=str(DATA / "backbone" / "config.json"))
    net = built.model
    assert all(p.is_meta for p in net.parameters())
    rates = torch.linspace(0, c["drop_path_rate"], c["depth"]).tolist()  # the values, computed here on the CPU
    assert net.rates == rates
    assert net.rates64 == torch.linspace(0, c["drop_path_rate"], c["depth"]).to(torch.float64).tolist()
    assert [getattr(b.drop_path, "p", 0.0) for b in net.blocks] == rates
    assert (net.device_id, net.replicas) == ((torch.cuda.current_device(), torch.cuda.device_count())
                                             if torch.cuda.is_available() else (0, 1))
    d, h = c["embed_dim"], c["mlp_ratio"] * c["embed_dim"]
    block = 2 * d + _linear(d, h) + _linear(h, d)
    expected = (c["in_chans"] * d * c["patch"] ** 2 + d + d + c["depth"] * block + 2 * d
                + _linear(d, c["num_classes"]))
    assert sum(p.numel() for p in net.parameters()) == expected
    notes = built.notes
    assert any(n.startswith(f"item() of a tensor made without a device at model.py:{_line(model, 'x.item()')}")
               for n in notes)
    assert any(n.startswith(f"__float__() of a tensor made without a device at "
                            f"model.py:{_line(model, 'float(rates[i])')}") for n in notes)
    assert f".cuda() at model.py:{_line(model, '        self.cuda()')} neutralised: built on meta" in notes
    if not torch.cuda.is_available():
        for call in ("current_device", "device_count", "get_device_capability", "synchronize", "device", "Stream"):
            assert any(n.startswith(f"torch.cuda.{call}() at model.py:{_line(model, f'torch.cuda.{call}(')}")
                       for n in notes), call


def test_pretrained_downloads_are_skipped(monkeypatch, tmp_path):
    def no_network(*args, **kwargs):
        raise AssertionError("a meta build opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.chdir(DATA / "zoo")
    zoo = DATA / "zoo" / "zoo_pretrained.py"
    width, classes = 32, 10
    expected = 3 * width * 9 + width + 2 * width + _linear(width, classes)  # conv, batch norm, fc
    hub = archviz.build("zoo_pretrained:tiny_classifier")
    assert sum(p.numel() for p in hub.model.parameters()) == expected
    assert all(p.is_meta for p in hub.model.parameters())
    for what, needle in (("torch.hub.load_state_dict_from_url()", "torch.hub.load_state_dict_from_url("),
                         ("torch.hub.load_state_dict_from_url()", "state.update(load_state_dict_from_url("),
                         ("load_state_dict()", "model.load_state_dict(state)")):
        assert any(n.startswith(f"{what} at zoo_pretrained.py:{_line(zoo, needle)} skipped") for n in hub.notes), what
    file = archviz.build("zoo_pretrained:tiny_classifier_file")
    assert sum(p.numel() for p in file.model.parameters()) == expected
    for what, needle in (("urllib.request.urlretrieve()", "urlretrieve("), ("torch.load()", "torch.load(")):
        assert any(n.startswith(f"{what} at zoo_pretrained.py:{_line(zoo, needle)} skipped") for n in file.notes), what
    assert not (Path(sys.modules["zoo_pretrained"].tempfile.gettempdir()) / "archviz-never-written.pth").exists()


def test_numpy_weights_are_never_allocated():
    model = DATA / "numpyweights" / "model.py"
    config = DATA / "numpyweights" / "config.json"
    c = json.loads(config.read_text())
    n, m, h, k = c["rows"], c["dim"], c["hidden"], c["classes"] * 1024
    built = archviz.build(str(model), config=str(config))
    net = built.model
    assert all(p.is_meta for p in net.parameters())
    assert sum(p.numel() for p in net.parameters()) == n * m + m * h + h * k
    assert net.table.weight.requires_grad
    assert sorted(net.order.tolist()) == list(range(16))  # a small draw is made for real: the code reads it
    for what, needle in (("torch.tensor()", "torch.tensor(w"), ("torch.as_tensor()", "torch.as_tensor("),
                         ("torch.from_numpy()", "torch.from_numpy(np.random.randn")):
        assert any(note.startswith(f"{what} of a numpy array") and f"at model.py:{_line(model, needle)} made a meta"
                   in note for note in built.notes), what
    # The same constructor again on meta, its memory traced (numpy reports its buffers to tracemalloc): none of the
    # drawn arrays, nor their float32 copies, was made.
    drawn_bytes = 8 * (n * m + m * h) + 4 * h * k
    tracemalloc.start()
    try:
        with meta_build():
            type(net)(type(built.args)(**c))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < drawn_bytes / 32, (peak, drawn_bytes)


def test_native_code_at_import_is_answered(archviz_cli):
    model = DATA / "kernels" / "model.py"
    r = archviz_cli("summary", model, "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)  # stdout stays the JSON
    assert summary["parameters"] == _linear(24, 48) + _linear(48, 7, False)
    built = archviz.build(str(model))
    for name in ("fused_bias_act", "upfirdn2d", "numba", "triton"):
        assert name in built.stubbed_imports, name
    notes = built.notes
    assert any(n.startswith(f"CUDA_HOME (unset: no CUDA toolkit here) at model.py:{_line(model, 'import CUDA_HOME')}")
               for n in notes) or torch.utils.cpp_extension.CUDA_HOME is not None
    assert any(n.startswith(f"torch.utils.cpp_extension.load('fused_bias_act') of fused_bias_act.cpp, "
                            f"fused_bias_act_kernel.cu at model.py:{_line(model, 'fused = load(')} not compiled")
               for n in notes)
    for deco, fn in (("numba.jit", "backtrace"), ("numba.njit", "total"), ("numba.vectorize", "halve")):
        assert any(n.startswith(f"@{deco} on {fn} at model.py:") and "pip install numba" in n for n in notes), deco
    if not torch.cuda.is_available():
        for what, needle in (("torch.cuda.current_device()", "_DEVICE = "), (".cuda() while importing", "_LUT = ")):
            assert any(n.startswith(f"{what} at model.py:{_line(model, needle)}") for n in notes), what
        assert built.module._LUT.tolist() == list(range(16))
    # The helpers are the Python they were written as (numba.prange is range); nothing is left behind.
    assert built.module.total(5) == 10 and built.module.halve(3.0) == 1.5
    assert "numba" not in sys.modules and torch.utils.cpp_extension.load.__module__ == "torch.utils.cpp_extension"


def test_build_failures_name_their_cause(tmp_path):
    """"check the config" only where the config is the cause: the failing line reads a config field."""
    (tmp_path / "model.py").write_text(
        "from dataclasses import dataclass\n\nimport torch\nfrom torch import nn\n\n\n"
        "@dataclass\nclass Dims:\n    width: int = 10\n    heads: int = 3\n    broken: bool = False\n\n\n"
        "class Net(nn.Module):\n    def __init__(self, dims: Dims):\n        super().__init__()\n"
        "        if dims.broken:\n            raise RuntimeError('the tokenizer file is missing')\n"
        "        assert dims.width % dims.heads == 0, 'the width must divide into heads'\n"
        "        self.proj = nn.Linear(dims.width, dims.width)\n")
    (tmp_path / "config.json").write_text('{"width": 10, "heads": 3}')
    with pytest.raises(SourceError) as config_caused:
        archviz.build(str(tmp_path / "model.py"))
    assert "width=10" in config_caused.value.hint and "heads=3" in config_caused.value.hint
    (tmp_path / "config.json").write_text('{"width": 12, "heads": 3, "broken": true}')
    with pytest.raises(SourceError) as code_caused:
        archviz.build(str(tmp_path / "model.py"))
    assert "tokenizer file is missing" in code_caused.value.message and "config" not in code_caused.value.hint
    (tmp_path / "config.json").write_text('{"width": 12, "heads": 3}')
    (tmp_path / "model.py").write_text((tmp_path / "model.py").read_text().replace(
        "        self.proj", "        self.scale = torch.rand(1).item()\n        self.proj"))
    with pytest.raises(SourceError) as value_read:
        archviz.build(str(tmp_path / "model.py"))
    assert "reads the values of a tensor" in value_read.value.hint and "config" not in value_read.value.hint

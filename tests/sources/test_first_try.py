"""Real model code on the first try (issue 29): a model file inside its package (src/ layout, relative and absolute
imports), a config class of any name, a model built from its defaults (net.py, both as a file and as net:Net from
its own folder), GPU kernel packages stubbed with their submodules, a plain package that is missing named with its
pip command, a constructor that asks for a process group, a block_size limit, and stdout that stays the JSON.

Every count is worked out here from the fixture's config with the layers' own formulas."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import archviz
from archviz.cli import app
from archviz.cli.flags import cli_text
from archviz.errors import ArchvizError, SourceError
from archviz.render.views import summary_json

DATA = Path(__file__).resolve().parent.parent / "data" / "firsttry"


def _linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _params(record) -> int:
    return summary_json(record)["parameters"]


def _cli(*args: str):
    """The command in-process, never answered from the records cache (each run builds the model)."""
    cached = args[0] != "probe"  # probe never reads the cache
    return CliRunner().invoke(app, [*map(str, args), *(["--no-cache"] if cached else [])], catch_exceptions=False)


def test_package_in_src_layout_imports_as_its_package():
    """src/tinylm/model.py: `from .blocks.mlp import ...` (relative), `from tinylm.args import ...` (absolute, found
    through the pyproject root's src/), and the config class LMSettings read off the constructor's annotation."""
    cfg = json.loads((DATA / "srcrepo" / "config.json").read_text())
    record = archviz.load(str(DATA / "srcrepo" / "src" / "tinylm" / "model.py"),
                          config=str(DATA / "srcrepo" / "config.json"))
    v, d, h, n = cfg["vocab"], cfg["width"], cfg["hidden"], cfg["depth"]
    layer = 2 * d + _linear(d, h, False) + _linear(h, d, False)  # LayerNorm weight and bias, up, down
    assert _params(record) == v * d + n * layer + _linear(d, v, False)
    assert record.source.model_class == "tinylm.model.TinyLM"
    assert any("comment" in note for note in record.source.notes)  # the key LMSettings lacks, said


def test_gptconfig_named_config():
    """nanoGPT's style: GPT(config) unannotated, a GPTConfig dataclass; the tied head counted once."""
    cfg = json.loads((DATA / "gptstyle" / "config.json").read_text())

    def expected(c: dict) -> int:
        e = c["n_embd"]
        block = 4 * e + _linear(e, 3 * e) + _linear(e, e) + _linear(e, 4 * e) + _linear(4 * e, e)
        return c["vocab_size"] * e + c["block_size"] * e + c["n_layer"] * block + 2 * e

    record = archviz.load(str(DATA / "gptstyle" / "model.py"), config=str(DATA / "gptstyle" / "config.json"))
    assert _params(record) == expected(cfg)
    assert record.source.model_class == "model.GPT"


def test_gptstyle_without_config(tmp_path: Path):
    """With no config (a copy of the file alone), GPTConfig's own defaults."""
    shutil.copy(DATA / "gptstyle" / "model.py", tmp_path / "model.py")
    record = archviz.load(str(tmp_path / "model.py"))
    e, v, t, n = 32, 96, 64, 2  # GPTConfig's defaults in the fixture
    block = 4 * e + _linear(e, 3 * e) + _linear(e, e) + _linear(e, 4 * e) + _linear(4 * e, e)
    assert _params(record) == v * e + t * e + n * block + 2 * e
    assert any("GPTConfig's defaults" in note for note in record.source.notes)


NET = '''import torch.nn as nn


class Net(nn.Module):
    def __init__(self, hidden=64, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(self.fc1(x.flatten(1)).relu())
'''


def test_net_py_both_ways_from_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`archviz summary net.py` (no --config: Net builds from its defaults) and `archviz summary net:Net` (the
    current folder importable, as for python -m), run beside net.py."""
    (tmp_path / "net.py").write_text(NET)
    monkeypatch.chdir(tmp_path)
    want = _linear(28 * 28, 64) + _linear(64, 10)
    for source in ("net.py", "net:Net"):
        r = _cli("summary", source, "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["parameters"] == want, source
    r = _cli("summary", "net.py", "--set", "hidden=100", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["parameters"] == _linear(28 * 28, 100) + _linear(100, 10)
    # cost takes --input like the other commands: Net reads images, not token ids
    r = _cli("cost", "net.py", "--input", "x=B,784:float32", "--json")
    assert r.exit_code == 0, r.output
    prefill = json.loads(r.stdout)["prefill"]
    fc1 = next(m for m in prefill["modules"] if m["path"] == "fc1")
    assert fc1["flops"] == 2 * 1 * 784 * 64  # B = 1 row through a 784 x 64 matmul


def test_kernel_packages_stubbed_with_submodules():
    """`import triton.language as tl`, `import xformers.ops.fmha.attn_bias as ...`, `from
    fast_hadamard_transform.cuda import ...` and the model's own ImportErrors (`raise ImportError("Please install
    mlstm_kernels ...")`, one raised from the missing causal_conv1d): each a stub with its submodules, the model
    built."""
    cfg = json.loads((DATA / "kernels" / "config.json").read_text())
    record = archviz.load(str(DATA / "kernels" / "model.py"))
    d, n, v = cfg["dim"], cfg["layers"], cfg["vocab"]
    assert _params(record) == v * d + n * (_linear(d, 2 * d) + _linear(2 * d, d, False))
    stubbed = set(record.source.stubbed_imports)
    assert {"triton.language", "xformers.ops.fmha.attn_bias", "fast_hadamard_transform.cuda",
            "mlstm_kernels.torch.chunkwise.mlstm_chunkwise", "causal_conv1d.causal_conv1d_fn",
            "archviz_absent_helpers"} <= stubbed


def test_missing_plain_package_says_pip_install():
    """A package that is simply not installed is stubbed, but calling into it (at build or in the meta pass) is one
    line naming it and the pip command, exit 2, not a request for a shape rule."""
    with pytest.raises(ArchvizError) as e:
        archviz.load(str(DATA / "kernels" / "model.py"), overrides={"helper_at_build": True})
    assert "pip install archviz_absent_helpers" in e.value.line()
    r = _cli("walk", str(DATA / "kernels" / "model.py"), "--shapes", "--json")
    assert r.exit_code == 2
    error = json.loads(r.stdout)
    assert "archviz_absent_helpers.gelu" in error["error"] and "pip install archviz_absent_helpers" in error["hint"]
    assert "shape rule" not in error["error"] + error["hint"]


def _refused(**options) -> str:
    with pytest.raises(SourceError) as e:
        archviz.build(str(DATA / "choices" / "model.py"), **options)
    return cli_text(e.value.line())  # as the CLI prints it


def test_config_class_and_model_class_choose():
    line = _refused()  # two top models, each with its signature
    assert "Encoder(config)" in line and "Captioner(config" in line and "--model-class" in line
    line = _refused(model_class="Encoder")  # EncoderConfig and DecoderConfig both fit its config
    assert "EncoderConfig, DecoderConfig" in line and "--config-class" in line
    cfg = json.loads((DATA / "choices" / "config.json").read_text())
    record = archviz.load(str(DATA / "choices" / "model.py"), model_class="Encoder", config_class="EncoderConfig")
    assert _params(record) == cfg["depth"] * _linear(cfg["width"], cfg["width"])
    assert "'vision_tower'" in _refused(model_class="Captioner")  # what else the constructor needs, named


def test_model_prints_keep_stdout_json(tmp_path: Path):
    """GPT prints while constructing: with --json, stdout is the JSON alone for every command that builds it."""
    import importlib.util

    from safetensors.torch import save_file

    model = str(DATA / "gptstyle" / "model.py")
    spec = importlib.util.spec_from_file_location("gptstyle_for_checkpoint", model)
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    gpt = code.GPT(code.GPTConfig(**json.loads((DATA / "gptstyle" / "config.json").read_text())))
    weights = {k: v.contiguous() for k, v in gpt.state_dict().items() if k != "wte.weight"}  # tied: stored once
    save_file(weights, str(tmp_path / "model.safetensors"))
    for args in (("summary",), ("walk",), ("inspect", "--no-shapes"), ("cost",), ("diff", model), ("probe",),
                 ("check", "--checkpoint", tmp_path / "model.safetensors")):
        r = _cli(args[0], model, *args[1:], "--json")
        assert r.exit_code == 0, (args, r.output)
        json.loads(r.stdout)
        assert "number of parameters" in r.stderr, args


def test_cost_respects_block_size():
    """Default T (4096) and context (1M) exceed the fixture's block_size: T is taken at block_size, and the decode
    step (a recompute) at the context whose new token is the last of block_size positions, noted."""
    cfg = json.loads((DATA / "gptstyle" / "config.json").read_text())
    r = _cli("cost", str(DATA / "gptstyle" / "model.py"), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    t, e = cfg["block_size"], cfg["n_embd"]
    assert out["seq"] == t and out["context"] == t - 1
    assert sum("config's block_size" in n for n in out["notes"]) == 2
    c_attn = next(n for n in out["nodes"] if n["representative"] == "h.0.attn.c_attn")
    assert c_attn["prefill"]["per_call"] == 2 * t * e * 3 * e  # T rows through an e x 3e matmul


def test_process_group_started_for_code_that_insists(archviz_cli):
    """`dist.get_world_size()` in the constructor, unconditionally: archviz starts a one-process gloo group (its
    own process: the group lives as long as the process), the model is built at world size 1, and a note says so."""
    cfg = json.loads((DATA / "distgroup" / "config.json").read_text())
    p = archviz_cli("summary", DATA / "distgroup" / "model.py", "--json", "--no-cache")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["parameters"] == cfg["n_layers"] * 2 * cfg["dim"] * cfg["hidden"]
    assert any("gloo" in n for n in out["notes"])


def test_forward_of_1d_tokens():
    """gpt-oss's forward takes token ids [T]: the pass fails on [B, T] (the attention unpacks a 2-D activation) and
    runs on [T], noted; cost counts that pass."""
    model = str(DATA / "flat" / "model.py")
    cfg = json.loads((DATA / "flat" / "config.json").read_text())
    d = cfg["hidden_size"]
    r = _cli("inspect", model, "block.0", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["inputs"] == [["T", d]] and got["outputs"] == [["T", d]]
    r = _cli("cost", model, "--seq", "64", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert any(n.startswith("token ids [T]") for n in out["notes"])
    qkv = next(n for n in out["nodes"] if n["representative"] == "block.0.qkv")
    assert qkv["prefill"]["per_call"] == 2 * 64 * d * 3 * d  # 64 tokens (no batch dim) through a d x 3d matmul


def test_triton_kernels_configured_at_import():
    """Triton code configures its kernels when imported (`@triton.autotune(configs=[triton.Config(...)])`,
    `@triton.heuristics`, `@triton.jit`): the stubs answer those calls, the model builds from its defaults, and the
    kernel launched on a grid in forward is answered as a triton launch (it writes into the tensors it is given), or by
    the rule a --kernel-rules file gives under its own name (`model._scale_kernel`)."""
    model = DATA / "tritonkern" / "model.py"
    record = archviz.load(str(model))
    d, h = 24, 40  # Scaled's defaults
    assert _params(record) == _linear(d, h) + _linear(h, d, False)
    assert {"triton.autotune", "triton.Config", "triton.jit", "model._scale_kernel"} <= set(
        record.source.stubbed_imports)
    features = ("--input", f"x=B,T,{d}:float32")
    # a @triton.jit kernel's launch writes into the tensors it is given: answered as that without a rule of its own
    r = _cli("inspect", str(model), "down", *features, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["inputs"] == [["B", "T", h]], r.output
    r = _cli("inspect", str(model), "down", *features, "--kernel-rules", str(DATA / "tritonkern" / "rules.py"),
             "--json")
    assert r.exit_code == 0, r.output
    down = json.loads(r.stdout)
    assert down["inputs"] == [["B", "T", h]] and down["outputs"] == [["B", "T", d]]  # y keeps up's output shape

"""A model class whose base comes from a package that is not installed (training codebases: a LightningModule
model, a megatron-style `class Pipe(PipelineModule, nn.Module)`): built as the nn.Module it is, its base noted; a
class of that package without a forward (a callback) stays a plain class; a variant block nothing instantiates gives
way to the class that builds the file's tree; a name read from the missing base says what to install.

The fixtures (tests/data/missingbase) are written in that style; every count is worked out here from the fixture's
config with the layers' formulas."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import archviz
from archviz.errors import SourceError
from archviz.sources.stubs import StubRegistry, missing_base

DATA = Path(__file__).resolve().parent.parent / "data" / "missingbase"
ARGS = {"n_embd": 16, "dim_att": 24, "n_layer": 3, "vocab_size": 40}


@pytest.fixture(autouse=True)
def _forget_fixture_modules():
    yield
    for name in [n for n in sys.modules if n.split(".")[0] in {"litstyle", "pipestyle", "trainerkit_absent",
                                                                "pipekit_absent"}]:
        del sys.modules[name]


def _lm_params(a: dict) -> int:
    e, d = a["n_embd"], a["dim_att"]
    block = 2 * e + e + e * d + d * e  # LayerNorm, decay, key, value (no biases)
    return a["vocab_size"] * e + a["n_layer"] * block + 2 * e + e * a["vocab_size"]


def test_lightning_style_model_is_built_as_a_module(tmp_path: Path):
    (tmp_path / "args.json").write_text(json.dumps(ARGS))
    record = archviz.load(str(DATA / "litstyle.py"), config=str(tmp_path / "args.json"), shapes=True)
    assert record.source.model_class == "litstyle.TinyRNNLM"  # not MixVariant, which nothing instantiates
    assert record.summary.parameters == _lm_params(ARGS)
    assert any("trainerkit_absent.TrainableModule" in n and "torch.nn.Module" in n for n in record.source.notes)
    assert record.extra("shapes")["clean"]  # its forward ran on meta: logits [B, T, vocab_size]
    top = next(m for m in record.modules if m.path == "")
    assert [list(s) for s in top.calls[0].outputs] == [["B", "T", ARGS["vocab_size"]]]


def test_base_decides_by_forward():
    """A subclass that defines forward is an nn.Module; one without (a callback) stays a plain class."""
    base = missing_base("trainerkit_absent.TrainableModule", StubRegistry())
    model = type(base)("M", (base,), {"forward": lambda self, x: x, "__init__": lambda self: super(model, self)
                                      .__init__()})
    callback = type(base)("Cb", (base,), {"on_epoch_end": lambda self: None})
    assert issubclass(model, torch.nn.Module) and not issubclass(callback, torch.nn.Module)
    m = model()
    m.w = torch.nn.Linear(2, 3)
    assert sum(p.numel() for p in m.parameters()) == 2 * 3 + 3  # registered as a module's child


def test_missing_base_beside_a_mixin():
    """`class Model(pl.LightningModule, HubMixin)`: still an nn.Module, the mixin's methods kept."""
    stub = StubRegistry().function("trainerkit_absent.TrainableModule")

    class HubMixin:
        def push(self):
            return "pushed"

    class Model(stub, HubMixin):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 5)

        def forward(self, x):
            return self.proj(x)

    assert issubclass(Model, torch.nn.Module) and Model().push() == "pushed"
    assert sum(p.numel() for p in Model().parameters()) == 4 * 5 + 5


def test_missing_base_beside_nn_module_keeps_the_mro():
    """`class Pipe(PipelineModule, nn.Module)` imported (it raised TypeError: no consistent MRO) and built."""
    w, depth, vocab = 24, 3, 50  # Pipe's defaults
    record = archviz.load(str(DATA / "pipestyle.py"), model_class="Pipe")
    assert record.summary.parameters == vocab * w + depth * (w * w + w)


def test_name_read_from_missing_base_says_what_to_install():
    with pytest.raises(SourceError) as e:
        archviz.build(str(DATA / "pipestyle.py"), model_class="Remembering")
    assert "save_hyperparameters" in str(e.value) and "pip install pipekit_absent" in str(e.value)


def test_getattr_default_still_answers():
    """A name the missing base would hold: a default where a plain package's (module or not); a stub where a kernel
    package's (what an Autotuner subclass reads of its base)."""
    registry = StubRegistry()
    base = missing_base("pipekit_absent.PipelineModule", registry)
    module = type(base)("P", (base,), {"forward": lambda self, x: x})(1, 2, key=3)  # any arguments of the base
    plain = type(base)("Q", (base,), {})(1, 2, key=3)
    assert getattr(module, "trainer", None) is None and getattr(plain, "trainer", None) is None
    tuner = type(base)("T", (missing_base("triton.runtime.autotuner.Autotuner", registry),), {})()
    assert getattr(tuner, "restore_value", None) is not None


def test_kernel_library_on_triton_classes_imports_and_launches():
    """Its driver probe takes the CPU path, the Autotuner subclass is made, and its kernel launches on meta."""
    dim, hidden = 20, 36  # GatedMix's defaults
    record = archviz.load(str(DATA / "tunedkernel.py"), shapes=True)
    assert record.summary.parameters == dim * hidden + hidden + hidden * dim + dim
    up = next(m for m in record.modules if m.path == "up")
    assert [list(s) for s in up.calls[0].outputs] == [["B", "T", hidden]]
    assert record.extra("shapes")["clean"]
    assert "tunedkernel.gate_kernel" in record.source.stubbed_imports  # the launch answered as its own kernel
    from torch.utils import flop_counter  # imported after triton was stubbed: it must not have kept the stub

    assert isinstance(flop_counter._JITFunction, type)


EXT_ARGS = {"vocab_size": 96, "n_embd": 32, "n_layer": 3, "ctx_len": 48}


def test_extension_ops_compiled_at_import_and_the_dtype_they_assert(tmp_path: Path):
    """`cpp_extension.load(..., is_python_module=False)` at import: `torch.ops.toywkv.forward(..., y)` answered as a
    kernel writing into the `y` it is handed; its wrapper asserts bfloat16, the only dtype the file's code compares
    with: built and run in bfloat16 (tests/data/extensionops)."""
    (tmp_path / "args.json").write_text(json.dumps(EXT_ARGS))
    v, e, n = EXT_ARGS["vocab_size"], EXT_ARGS["n_embd"], EXT_ARGS["n_layer"]
    record = archviz.load(str(DATA.parent / "extensionops" / "model.py"), config=str(tmp_path / "args.json"),
                          shapes=True)
    params = v * e + n * 4 * e * e + 2 * e + e * v
    assert record.summary.parameters == params and record.summary.bytes == 2 * params  # bfloat16
    assert record.extra("shapes")["clean"]
    top = next(m for m in record.modules if m.path == "")
    assert [list(s) for s in top.calls[0].outputs] == [["B", "T", v]]
    assert any("torch.ops.toywkv" in note for note in record.source.notes)
    assert any("bfloat16" in note and "asserts" in note for note in record.source.notes)


def test_cost_keeps_to_ctx_len_of_an_attribute_bag(archviz_cli, tmp_path: Path):
    """The run's `args` take any key, the runtime limits the cost build adds too: the model's limit is still its
    `ctx_len` (its forward asserts it), so the prefill runs at T = ctx_len and the decode reruns ctx_len tokens."""
    (tmp_path / "args.json").write_text(json.dumps(EXT_ARGS))
    p = archviz_cli("cost", DATA.parent / "extensionops" / "model.py", "-c", tmp_path / "args.json", "--json",
                    "--no-cache")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    T, v, e, n = EXT_ARGS["ctx_len"], EXT_ARGS["vocab_size"], EXT_ARGS["n_embd"], EXT_ARGS["n_layer"]
    assert out["seq"] == T
    linears = 2 * T * (n * 4 * e * e + e * v)  # the wkv kernel's own FLOPs are unknown (said)
    assert out["prefill"]["flops"] == linears and out["decode"]["flops"] == linears  # matmuls, as torch counts

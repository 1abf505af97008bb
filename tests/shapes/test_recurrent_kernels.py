"""Rules for the kernels of recurrent models' packages (issue 42): mamba_ssm's triton norms (`layer_norm_fn`,
`rms_norm_fn`, the `RMSNorm` module) and mlstm_kernels (its chunkwise kernels and backend module), a launch of a
model's own `@triton.jit` kernel, and torch.cuda's types on meta. Each rule's CPU values agree with a plain-torch
formulation written here; models in each package's style count what their configs say and trace on meta to the
shapes a real CPU run of the same model (the packages replaced by plain-torch references written here) gives."""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib
import sys
import types

import pytest
import torch
import torch.nn.functional as F

import archviz
from archviz.shapes import kernels, trace_shapes
from archviz.sources.cuda_queries import cuda_answered
from archviz.walk import walk

FIX = pathlib.Path(__file__).parent.parent / "fixtures" / "recurrentkernels"
G = torch.Generator().manual_seed(0)


def _randn(*shape):
    return torch.randn(*shape, generator=G)


def _sig(o):
    if isinstance(o, torch.Tensor):
        return (tuple(o.shape), o.dtype)
    return None if o is None else tuple(_sig(t) for t in o)


def _on_meta(fn, *args, **kwargs):
    def meta(a):
        return a.to("meta") if isinstance(a, torch.Tensor) else a

    return fn(*map(meta, args), **{k: meta(v) for k, v in kwargs.items()})


def _rms(h, w, eps):
    return h / torch.sqrt((h * h).mean(-1, keepdim=True) + eps) * w


def test_mamba_layer_norm_fn_is_the_fused_add_and_norm():
    x, res, w, b = _randn(2, 3, 8), _randn(2, 3, 8), _randn(8), _randn(8)
    fn, _ = kernels.lookup("mamba_ssm.ops.triton.layer_norm.layer_norm_fn")
    y, residual = fn(x, w, None, residual=res, prenorm=True, residual_in_fp32=True, eps=1e-5, is_rms_norm=True)
    assert torch.allclose(y, _rms(x + res, w, 1e-5), atol=1e-5)
    assert torch.equal(residual, x + res) and residual.dtype == torch.float32
    ln = fn(x.double(), w, b, eps=1e-5)  # a layer norm, y in x's dtype
    assert ln.dtype == torch.float64 and torch.allclose(ln.float(), F.layer_norm(x, (8,), w, b, 1e-5), atol=1e-5)
    rms, _ = kernels.lookup("mamba_ssm.ops.triton.layernorm.rms_norm_fn")  # the older module's name
    assert torch.allclose(rms(x, w, None, eps=1e-5), _rms(x, w, 1e-5), atol=1e-5)
    assert _sig(_on_meta(fn, x, w, None, residual=res, prenorm=True, residual_in_fp32=True)) == _sig((y, residual))
    assert kernels.flops_formula("mamba_ssm.ops.triton.layer_norm.layer_norm_fn")(x, w, None) == 5 * x.numel()


def _parallel_mlstm(q, k, v, i, f, eps=1e-6):
    """The mLSTM's parallel (quadratic) form as the xLSTM paper writes it, stabilised by the row maximum."""
    s = q.shape[2]
    cum = torch.cumsum(F.logsigmoid(f), dim=-1)
    d = cum[..., :, None] - cum[..., None, :] + i[..., None, :]
    d = d.masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(), float("-inf"))
    m = d.amax(-1, keepdim=True)
    c = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) * torch.exp(d - m)
    n = torch.maximum(c.sum(-1, keepdim=True).abs(), torch.exp(-m)) + eps
    return (c / n) @ v


def test_mlstm_chunkwise_kernel_is_the_parallel_mlstm():
    q, k, v, i, f = _randn(2, 3, 6, 4), _randn(2, 3, 6, 4), _randn(2, 3, 6, 5), _randn(2, 3, 6), _randn(2, 3, 6)
    fn, _ = kernels.lookup("mlstm_kernels.torch.chunkwise.triton_xl_chunk.mlstm_chunkwise__xl_chunk")
    h, (c, n, m) = fn(q, k, v, i, f, return_last_states=True, chunk_size=4)
    assert torch.allclose(h, _parallel_mlstm(q, k, v, i, f), atol=1e-4)
    assert (c.shape, n.shape, m.shape) == ((2, 3, 4, 5), (2, 3, 4), (2, 3, 1))
    # the last states carry on: the second half after the first gives the whole sequence's second half
    first = fn(q[:, :, :3], k[:, :, :3], v[:, :, :3], i[..., :3], f[..., :3], return_last_states=True)[1]
    rest = fn(q[:, :, 3:], k[:, :, 3:], v[:, :, 3:], i[..., 3:], f[..., 3:], *first)
    assert torch.allclose(rest, h[:, :, 3:], atol=1e-4)
    assert _sig(_on_meta(fn, q, k, v, i, f, return_last_states=True)) == _sig((h, (c, n, m)))
    b, nh, s, dqk, dhv = 2, 3, 6, 4, 5
    assert kernels.flops_formula("mlstm_kernels.torch.chunkwise.triton_xl_chunk.mlstm_chunkwise__xl_chunk")(
        q, k, v, i, f, chunk_size=4) == b * nh * s * (4 * (dqk + dhv) + 4 * dqk * dhv)


def _load(name: str, references: dict[str, dict], monkeypatch) -> types.ModuleType:
    """The fixture `name` imported for real, its kernel packages the plain-torch `references` given here."""
    made: dict[str, types.ModuleType] = {}
    for module, attrs in references.items():
        parts = module.split(".")
        for package in (".".join(parts[:depth]) for depth in range(1, len(parts) + 1)):
            if package not in made:
                made[package] = types.ModuleType(package)
                monkeypatch.setitem(sys.modules, package, made[package])
        made[module].__dict__.update(attrs)
    spec = importlib.util.spec_from_file_location(f"_cpu_{name}", FIX / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _traced(name: str):
    built = archviz.build(str(FIX / f"{name}.py"), config=str(FIX / f"{name}.json"))
    record = trace_shapes(built, walk(built))
    return record, {m.path: m for m in record.modules}


def _concrete(shape, b, t):
    return tuple({"B": b, "T": t}.get(d, d) for d in shape)


class _RefRMSNorm(torch.nn.Module):
    def __init__(self, hidden_size, eps=1e-5, dropout_p=0.0, device=None, dtype=None):
        super().__init__()
        self.eps, self.weight = eps, torch.nn.Parameter(torch.ones(hidden_size))
        self.register_parameter("bias", None)

    def forward(self, x, residual=None, prenorm=False, residual_in_fp32=False):
        return _ref_layer_norm_fn(x, self.weight, None, residual=residual, prenorm=prenorm, eps=self.eps,
                                  is_rms_norm=True)


def _ref_layer_norm_fn(x, weight, bias, residual=None, eps=1e-6, prenorm=False, is_rms_norm=False, **kw):
    h = (x + residual if residual is not None else x).float()
    y = _rms(h, weight, eps) if is_rms_norm else F.layer_norm(h, h.shape[-1:], weight, bias, eps)
    return (y, h) if prenorm else y


def _ref_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    dt = F.softplus(delta + delta_bias[:, None]) if delta_softplus else delta
    state, ys = torch.zeros(u.shape[0], u.shape[1], A.shape[1]), []
    for t in range(u.shape[2]):
        state = torch.exp(dt[..., t, None] * A) * state + dt[..., t, None] * B[:, None, :, t] * u[..., t, None]
        ys.append((state * C[:, None, :, t]).sum(-1))
    return (torch.stack(ys, -1) + u * D[:, None]) * F.silu(z)


def test_a_mamba_style_model_counts_its_triton_norms_and_traces_on_meta(monkeypatch):
    cfg = json.loads((FIX / "mamba_lm.json").read_text())
    d, n_layer, n, w = cfg["d_model"], cfg["n_layer"], cfg["d_state"], cfg["d_conv"]
    vocab = math.ceil(cfg["vocab_size"] / cfg["pad_vocab_size_multiple"]) * cfg["pad_vocab_size_multiple"]
    inner, rank = cfg["expand"] * d, math.ceil(d / 16)
    per_layer = (d  # the RMSNorm's weight
                 + d * 2 * inner + inner * w + inner + inner * (rank + 2 * n) + rank * inner + inner
                 + inner * n + inner + inner * d)
    record, mods = _traced("mamba_lm")
    assert record.summary.parameters == vocab * d + n_layer * per_layer + d  # the head tied to the embedding
    assert [m.path for m in record.modules if m.path.endswith("norm")] == ["layers.0.norm", "layers.1.norm"]

    mod = _load("mamba_lm", {"mamba_ssm.ops.triton.layer_norm": {"RMSNorm": _RefRMSNorm,
                                                                   "layer_norm_fn": _ref_layer_norm_fn},
                             "mamba_ssm.ops.selective_scan_interface": {"selective_scan_fn": _ref_scan}},
                monkeypatch)
    model = mod.MambaLM(mod.MambaConfig(**cfg))
    seen = {}
    for path in ("layers.1", "layers.1.mixer", "norm_f"):
        model.get_submodule(path).register_forward_hook(lambda m, a, out, p=path: seen.setdefault(p, out))
    b, t = 2, 5
    logits = model(torch.randint(0, vocab, (b, t), generator=G))
    assert _concrete(mods[""].calls[0].outputs[0], b, t) == tuple(logits.shape)
    assert [_concrete(s, b, t) for s in mods["layers.1"].calls[0].outputs] == [tuple(o.shape) for o in seen["layers.1"]]
    assert _concrete(mods["layers.1.mixer"].calls[0].outputs[0], b, t) == tuple(seen["layers.1.mixer"].shape)
    assert _concrete(mods["norm_f"].calls[0].outputs[0], b, t) == tuple(seen["norm_f"].shape)
    assert "mamba_ssm.ops.triton.layer_norm.layer_norm_fn" in mods["layers.0"].kernels


class _RefBackendConfig(types.SimpleNamespace):
    def __init__(self, **kw):
        super().__init__(**{"mode": "train", "return_last_states": True, **kw})


class _RefBackend(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def forward(self, q, k, v, i, f, c_initial=None, n_initial=None, m_initial=None):
        h = _parallel_mlstm(q, k, v, i, f)
        b, nh, _, dqk = q.shape
        return h, (torch.zeros(b, nh, dqk, v.shape[-1]), torch.zeros(b, nh, dqk), torch.zeros(b, nh, 1))


def test_an_mlstm_model_calling_the_backend_module_counts_and_traces_on_meta(monkeypatch):
    cfg = json.loads((FIX / "mlstm_lm.json").read_text())
    d, heads, vocab = cfg["embedding_dim"], cfg["num_heads"], cfg["vocab_size"]
    qk = int(d * cfg["qk_dim_factor"])
    per_block = 2 * d * qk + d * d + 2 * (d * heads + heads) + d * d + 2 * d + d * d  # the backend holds none
    record, mods = _traced("mlstm_lm")
    assert record.summary.parameters == vocab * d + cfg["num_blocks"] * per_block + d * vocab
    assert mods["blocks.0.backend"].totals.parameters == 0

    mod = _load("mlstm_lm", {"mlstm_kernels.torch.backend_module": {"mLSTMBackend": _RefBackend,
                                                                     "mLSTMBackendConfig": _RefBackendConfig}},
                monkeypatch)
    model = mod.MLSTMLM(mod.MLSTMConfig(**cfg))
    seen = {}
    model.get_submodule("blocks.1.backend").register_forward_hook(lambda m, a, out: seen.setdefault("b", out))
    b, t = 2, 5
    logits = model(torch.randint(0, vocab, (b, t), generator=G))
    h, (c, n, m) = seen["b"]
    assert _concrete(mods[""].calls[0].outputs[0], b, t) == tuple(logits.shape)
    assert [_concrete(s, b, t) for s in mods["blocks.1.backend"].calls[0].outputs] == \
        [tuple(x.shape) for x in (h, c, n, m)]
    assert "mlstm_kernels.torch.chunkwise.triton_xl_chunk.mlstm_chunkwise__xl_chunk" in mods["blocks.1.backend"].kernels


def test_torch_cuda_types_stay_types_where_there_is_no_gpu():
    """Module code annotates with torch.cuda's classes (`torch.cuda.Stream | None`) and enters
    `torch.cuda.device(x.device.index)` (None on meta) in a forward: both work while queries are answered."""
    if torch.cuda.is_available():
        pytest.skip("the queries are the real ones where CUDA is")
    said = []
    with cuda_answered(lambda what, how: said.append(what)):
        assert isinstance(torch.cuda.Stream | None, types.UnionType)
        with torch.cuda.device(None):
            stream = torch.cuda.Stream()
        assert isinstance(stream, torch.cuda.Stream)
    assert said == ["torch.cuda.device()", "torch.cuda.Stream()"]
    assert isinstance(torch.cuda.Stream, type)


class _RefTritonKernel:
    """What the fixture's triton kernel computes, in plain torch: a launch writes the normed rows into Y."""

    def __getitem__(self, grid):
        def launch(X, W, Y, stride, N, eps, BLOCK_N):
            Y.copy_(_rms(X, W, eps))

        return launch


def test_a_launch_of_the_models_own_triton_kernel_traces_on_meta(monkeypatch):
    cfg = json.loads((FIX / "triton_norm.json").read_text())
    record, mods = _traced("triton_norm")
    assert record.summary.parameters == 2 * cfg["vocab_size"] * cfg["dim"] + cfg["dim"]
    fake = {"jit": lambda fn: _RefTritonKernel(), "next_power_of_2": lambda n: 1 << (n - 1).bit_length()}
    mod = _load("triton_norm", {"triton": fake, "triton.language": {"constexpr": int}}, monkeypatch)
    model = mod.NormLM(mod.NormConfig(**cfg))
    monkeypatch.setattr(torch.cuda, "device", lambda index: __import__("contextlib").nullcontext())
    x = torch.randint(0, cfg["vocab_size"], (2, 5), generator=G)
    normed = model.norm(model.embedding(x))
    assert torch.allclose(normed, _rms(model.embedding(x), model.norm.weight, 1e-6), atol=1e-5)  # the reference runs
    assert _concrete(mods["norm"].calls[0].outputs[0], 2, 5) == tuple(normed.shape)
    assert _concrete(mods[""].calls[0].outputs[0], 2, 5) == tuple(model(x).shape)
    assert "triton_norm._rms_fwd_kernel → triton.jit" in mods["norm"].kernels


def test_a_guarded_import_of_a_kernel_packages_cuda_extension_is_stubbed_and_its_scan_answered(monkeypatch):
    """`try: import selective_scan_cuda` / `except ImportError: ... = None` in the package's own wrapper, which has no
    path without it: the extension is stubbed all the same, and its `fwd` answered by its rule."""
    u, delta, A = _randn(2, 6, 5), _randn(2, 6, 5), -torch.rand(6, 3, generator=G)
    B, C, D, z, bias = _randn(2, 1, 3, 5), _randn(2, 1, 3, 5), _randn(6), _randn(2, 6, 5), _randn(6)
    fwd, _ = kernels.lookup("selective_scan_cuda.fwd")
    out, x, out_z = fwd(u, delta, A, B, C, D, z, bias, True)
    assert torch.allclose(out_z, _ref_scan(u, delta, A, B[:, 0], C[:, 0], D, z, bias, True), atol=1e-5)
    assert torch.allclose(out * F.silu(z), out_z, atol=1e-5) and x.shape == (2, 6, 1, 6)
    assert _sig(_on_meta(fwd, u, delta, A, B, C, D, z, bias, True)) == _sig([out, x, out_z])

    cfg = json.loads((FIX / "guarded_scan.json").read_text())
    record, mods = _traced("guarded_scan")
    assert "selective_scan_cuda" in record.source.stubbed_imports
    assert "selective_scan_cuda.fwd" in mods[""].kernels

    def ref_fwd(u, delta, A, B, C, D, z, delta_bias, softplus):
        y = _ref_scan(u, delta, A, B[:, 0] if B.dim() == 4 else B, C[:, 0] if C.dim() == 4 else C, D, z,
                      delta_bias, softplus)
        return y, torch.zeros(u.shape[0], u.shape[1], 1, 2 * A.shape[1]), y

    mod = _load("guarded_scan", {"selective_scan_cuda": {"fwd": ref_fwd}}, monkeypatch)
    logits, last = mod.ScanLM(mod.ScanConfig(**cfg))(torch.randint(0, cfg["vocab_size"], (2, 5), generator=G))
    assert [_concrete(s, 2, 5) for s in mods[""].calls[0].outputs] == [tuple(logits.shape), tuple(last.shape)]

"""`cost` of a model whose code launches its own triton kernels (issue 42, kernels still without rules): a layer norm
kernel counts a few FLOPs an element of its input, its backward none; a kernel with no formula, met in every layer
of both passes, is said once with its count of calls; a rotary table's `max_context_length`, held by a submodule's
config, caps the context, and the decode step that reruns the sequence stays within it.

Figures derived from the fixture's config: each Linear 2·T·in·out, each norm 5·T·dim (NORM_FLOPS_PER_ELEMENT)."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from archviz.shapes.kernels import NORM_FLOPS_PER_ELEMENT, flops_formula

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "ownkernels" / "model.py"


def _configs():
    """The fixture's config classes, read without triton (a stand-in module whose jit keeps the function)."""
    fake = types.ModuleType("triton")
    fake.jit = lambda fn: fn
    lang = types.ModuleType("triton.language")
    lang.constexpr = int
    saved = {k: sys.modules.get(k) for k in ("triton", "triton.language")}
    sys.modules.update({"triton": fake, "triton.language": lang})
    try:
        spec = importlib.util.spec_from_file_location("ownkernels_model", FIX)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod.KernelLMConfig(), mod.RopeConfig()


def _flops(cfg, T: int) -> int:
    d, v, n = cfg.dim, cfg.vocab_size, cfg.n_layers
    norm = NORM_FLOPS_PER_ELEMENT * T * d
    return n * (norm + 2 * T * d * d) + norm + 2 * T * d * v


@pytest.fixture(scope="module")
def costed(archviz_cli):
    text = archviz_cli("cost", FIX, "--seq", 8, "--no-cache", columns=80)
    data = archviz_cli("cost", FIX, "--seq", 8, "--no-cache", "--json")
    assert text.returncode == 0 and data.returncode == 0, text.stderr + data.stderr
    return text.stdout, json.loads(data.stdout)


def test_norm_kernel_flops_and_the_limit_of_a_rotary_table(costed):
    _, d = costed
    cfg, rope = _configs()
    assert d["prefill"]["flops"] == _flops(cfg, 8)
    # the decode step reruns the sequence: context + 1 tokens, at most the rotary table's rows
    assert d["decode"]["flops"] == _flops(cfg, rope.max_context_length)


def test_a_kernel_with_no_formula_is_said_once_with_its_calls(costed):
    text, _ = costed
    cfg, _ = _configs()
    flat = " ".join(text.split())
    assert flat.count("FLOPs unknown") == 1
    assert "model._token_shift_kernel" in flat
    assert f"{2 * cfg.n_layers} calls in {cfg.n_layers} modules" in flat  # every layer, prefill and decode


def test_only_a_forward_norm_kernel_has_a_formula_by_its_name():
    assert flops_formula("triton.jit(pkg._layer_norm_fwd_1pass_kernel)") is not None
    assert flops_formula("triton.jit(pkg._rmsnorm_kernel)") is not None
    assert flops_formula("triton.jit(pkg._layer_norm_bwd_kernel)") is None
    assert flops_formula("triton.jit(pkg._token_shift_kernel)") is None


def test_a_recurrent_cells_kernel_is_attention_like_work_in_the_split(archviz_cli):
    """An mLSTM layer's chunkwise kernel (a rule of mlstm_kernels) is attention in cost's split, however its module
    is named: B·NH·S·(min(S, chunk)·(DHQK + DHHV) + 4·DHQK·DHHV) a layer, from the fixture's config."""
    folder = FIX.parent.parent / "recurrentkernels"
    cfg = json.loads((folder / "mlstm_lm.json").read_text())
    T = 8
    r = archviz_cli("cost", folder / "mlstm_lm.py", "--config", folder / "mlstm_lm.json", "--seq", T, "--json",
                    "--no-cache")
    assert r.returncode == 0, r.stderr
    nh, d = cfg["num_heads"], cfg["embedding_dim"]
    dqk, dhv = int(d * cfg["qk_dim_factor"]) // nh, d // nh
    per_layer = nh * T * (min(T, cfg["chunk_size"]) * (dqk + dhv) + 4 * dqk * dhv)
    assert json.loads(r.stdout)["prefill"]["attention"] == cfg["num_blocks"] * per_layer

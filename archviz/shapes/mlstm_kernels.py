"""Rules for mlstm_kernels (the mLSTM kernels of xLSTM models; triton, so stubbed here): its chunkwise, parallel
and recurrent kernel functions, `get_mlstm_kernel(name)`, and its backend module and config (`mLSTMBackend`,
`mLSTMBackendConfig`), which build stand-ins with the package's documented signatures.

Every kernel takes q, k [B, NH, S, DHQK], v [B, NH, S, DHHV] and the input and forget gate pre-activations i, f
[B, NH, S] (with optional initial states c [B, NH, DHQK, DHHV], n [B, NH, DHQK], m [B, NH, 1]) and gives the hidden
states h [B, NH, S, DHHV] in q's dtype, with `return_last_states` also the last states (c, n, m) in float32. One
plain-torch function serves as the meta pass's shape rule (on meta it only makes the outputs) and as the probe's CPU
stand-in: the stabilised mLSTM recurrence of the xLSTM paper, step by step."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
import torch.nn.functional as F

from ..sources.stubs import stand_in, through_rule
from .kernels import shape_rule

_T = "mlstm_kernels.torch"
#: The kernels' public import paths, by the names `get_mlstm_kernel` takes ("chunkwise--triton_xl_chunk").
_KERNELS = {
    "chunkwise--native_autograd": f"{_T}.chunkwise.mlstm_chunkwise__native_autograd",
    "chunkwise--native_custbw": f"{_T}.chunkwise.mlstm_chunkwise__native_custbw",
    "chunkwise--triton_limit_chunk": f"{_T}.chunkwise.triton_limit_chunk.mlstm_chunkwise__limit_chunk",
    "chunkwise--triton_xl_chunk": f"{_T}.chunkwise.triton_xl_chunk.mlstm_chunkwise__xl_chunk",
    "parallel--native_autograd": f"{_T}.parallel.mlstm_parallel__native_autograd",
    "parallel--native_custbw": f"{_T}.parallel.mlstm_parallel__native_custbw",
    "parallel--native_stablef_autograd": f"{_T}.parallel.mlstm_parallel__native_stablef_autograd",
    "parallel--native_stablef_custbw": f"{_T}.parallel.mlstm_parallel__native_stablef_custbw",
    "parallel--triton_limit_headdim": f"{_T}.parallel.mlstm_parallel__limit_headdim",
}
_ALSO = (f"{_T}.chunkwise.mlstm_chunkwise__limit_chunk", f"{_T}.chunkwise.mlstm_chunkwise__xl_chunk",
         f"{_T}.chunkwise.triton_limit_chunk.mlstm_chunkwise__limit_chunk")


def _parallel_flops(q, k, v, *rest: Any, **kw: Any) -> int:
    """The quadratic (parallel) form: S²/2 causal (query, key) pairs of B·NH heads, 2·DHQK for the score and
    2·DHHV for the weighted value: B·NH·S²·(DHQK + DHHV)."""
    b, nh, s, dqk = q.shape
    return b * nh * s * s * (dqk + v.shape[-1])


def _chunkwise_flops(q, k, v, *rest: Any, chunk_size: int = 64, **kw: Any) -> int:
    """The chunkwise form, linear in S: the parallel form within chunks of L = min(S, chunk_size) tokens
    (B·NH·S·L·(DHQK + DHHV)), and per token 2·DHQK·DHHV to add k vᵀ to the state and 2·DHQK·DHHV to read it
    with q."""
    b, nh, s, dqk = q.shape
    dhv = v.shape[-1]
    return b * nh * s * (min(s, int(chunk_size)) * (dqk + dhv) + 4 * dqk * dhv)


@shape_rule(*(p for n, p in _KERNELS.items() if n.startswith("parallel")), flops=_parallel_flops, mixing=True)
@shape_rule(*(p for n, p in _KERNELS.items() if n.startswith("chunkwise")), *_ALSO, flops=_chunkwise_flops, mixing=True)
def mlstm_kernel(q, k, v, i, f, c_initial=None, n_initial=None, m_initial=None, return_last_states=False,
                 eps=1e-6, chunk_size=64, autocast_kernel_dtype=None, **kwargs):
    """h [B, NH, S, DHHV] (and the last states (c, n, m) where `return_last_states`) of the mLSTM: per step
    m = max(log σ(f) + m, i); C = e^(log σ(f) + m_prev - m)·C + e^(i - m)·k vᵀ/√DHQK (n likewise with k);
    h = Cᵀq / (max(|nᵀq|, e^(-m)) + eps)."""
    b, nh, s, dqk = q.shape
    dhv = v.shape[-1]
    if any(t.is_meta for t in (q, k, v, i, f)):
        h = torch.empty((b, nh, s, dhv), dtype=q.dtype, device=q.device)
        states = (torch.empty((b, nh, dqk, dhv), device=q.device), torch.empty((b, nh, dqk), device=q.device),
                  torch.empty((b, nh, 1), device=q.device))
        return (h, states) if return_last_states else h
    c = c_initial.float() if c_initial is not None else q.new_zeros((b, nh, dqk, dhv), dtype=torch.float32)
    n = n_initial.float() if n_initial is not None else q.new_zeros((b, nh, dqk), dtype=torch.float32)
    m = m_initial.float()[..., 0] if m_initial is not None else q.new_full((b, nh), float("-inf"),
                                                                          dtype=torch.float32)  # no state yet
    log_f = F.logsigmoid(f.float())
    hs = []
    for t in range(s):
        m_new = torch.maximum(log_f[..., t] + m, i.float()[..., t])
        decay, gain = torch.exp(log_f[..., t] + m - m_new), torch.exp(i.float()[..., t] - m_new)
        kt = k.float()[:, :, t] / math.sqrt(dqk)
        c = decay[..., None, None] * c + gain[..., None, None] * kt[..., :, None] * v.float()[:, :, t, None, :]
        n = decay[..., None] * n + gain[..., None] * kt
        qt = q.float()[:, :, t]
        num = torch.einsum("bhkv,bhk->bhv", c, qt)
        den = torch.maximum((n * qt).sum(-1).abs(), torch.exp(-m_new)) + eps
        hs.append(num / den[..., None])
        m = m_new
    h = torch.stack(hs, dim=2).to(q.dtype)
    return (h, (c, n, m[..., None])) if return_last_states else h


@stand_in(f"{_T}.get_mlstm_kernel", f"{_T}.backend_module.get_mlstm_kernel")
def get_mlstm_kernel(name: str) -> Any:
    """The kernel function `name` names ("chunkwise--triton_xl_chunk"): each is `mlstm_kernel`."""
    return mlstm_kernel


@stand_in(f"{_T}.backend_module.mLSTMBackendConfig")
@dataclasses.dataclass
class mLSTMBackendConfig:  # noqa: N801 - the package's own name
    """mlstm_kernels' backend config, its fields and defaults as the package documents them."""

    chunkwise_kernel: str = "chunkwise--native_autograd"
    sequence_kernel: str = "native_sequence__native"
    step_kernel: str = "native"
    mode: str = "train"
    chunk_size: int = 64
    return_last_states: bool = True
    autocast_kernel_dtype: str = "bfloat16"
    eps: float = 1e-6
    inference_state_dtype: str = "float32"
    normalize_siging: bool = True


@stand_in(f"{_T}.backend_module.mLSTMBackend")
class mLSTMBackend(torch.nn.Module):  # noqa: N801 - the package's own name
    """mlstm_kernels' backend (no parameters): forward(q, k, v, i, f, c_initial, n_initial, m_initial,
    return_last_states=None, mode=None) runs its chunkwise kernel; in "train" modes h (and the last states where
    `return_last_states`, the config's by default), in "inference" mode always (h, (c, n, m))."""

    def __init__(self, config: Any = None):
        super().__init__()
        self.config = config if config is not None else mLSTMBackendConfig()
        self.kernel = _KERNELS.get(self.config.chunkwise_kernel, _KERNELS["chunkwise--native_autograd"])

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i: torch.Tensor, f: torch.Tensor,
                c_initial: Any = None, n_initial: Any = None, m_initial: Any = None, **options: Any) -> Any:
        """`options`: the package's return_last_states and mode (the config's where not given)."""
        mode = options.get("mode") or self.config.mode
        given = options.get("return_last_states")
        last = True if "inference" in mode else (self.config.return_last_states if given is None else given)
        return through_rule(self.kernel, mlstm_kernel, q, k, v, i, f, c_initial, n_initial, m_initial,
                            return_last_states=last, eps=self.config.eps, chunk_size=self.config.chunk_size)

"""torch's recurrent layers (nn.LSTM, nn.GRU, nn.RNN) answered whole on meta.

Their kernels (`torch._VF.lstm`, `gru`, `rnn_tanh`, `rnn_relu`) have no meta implementation: on meta they decompose
into a few dozen ops per time step and layer, 80,000 ops for a two-layer LSTM over 2,048 steps, each one through the
pass's dispatch policy (a minute of an audio codec's pass). In the meta pass each is answered in one call, as a
stubbed kernel is, by a rule of its shapes (the output [.., D·H_out], the final states as the initial ones) and its
FLOPs (every weight matrix once per token: 2 × tokens × the layer's matrix elements, as torch's CPU kernel computes
them and FlopCounterMode counts them on a real run). Inputs on any other device run torch's own kernel.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch

from .kernels import shape_rule

_KERNELS = ("lstm", "gru", "rnn_tanh", "rnn_relu")
_PREFIX = "torch._VF."


def _parts(args: tuple) -> tuple[torch.Tensor, Any, list, bool]:
    """(input, hx, flat weights, packed): `_VF.lstm(input, hx, weights, bias, layers, dropout, train, bidir,
    batch_first)`, or with a PackedSequence `(data, batch_sizes, hx, weights, bias, layers, dropout, train, bidir)`."""
    packed = isinstance(args[1], torch.Tensor) and args[1].dim() == 1 and not args[1].dtype.is_floating_point
    return (args[0], args[2], list(args[3]), True) if packed else (args[0], args[1], list(args[2]), False)


def _bidirectional(args: tuple, packed: bool) -> bool:
    return bool(args[8] if packed else args[7])


def _tokens(x: torch.Tensor, packed: bool) -> int:
    """Time steps × sequences: a packed input's rows, else [T, N] of [T, N, I] (or [N, T, I])."""
    return x.shape[0] if packed else x.shape[0] * x.shape[1]


def _outputs(args: tuple) -> tuple:
    x, hx, _, packed = _parts(args)
    first = hx[0] if isinstance(hx, (list, tuple)) else hx
    width = first.shape[-1] * (2 if _bidirectional(args, packed) else 1)  # h's width (proj_size where it has one)
    out = x.new_empty((*x.shape[:-1], width))
    states = tuple(h.new_empty(h.shape) for h in hx) if isinstance(hx, (list, tuple)) else (hx.new_empty(hx.shape),)
    return (out, *states)


def recurrent_flops(*args: Any, **kwargs: Any) -> int:
    """2 × tokens × every weight matrix's elements (w_ih, w_hh, and LSTM's w_hr) of every layer and direction: each
    is applied once a token; biases and the gates' element-wise work count nothing, as for any layer."""
    x, _, weights, packed = _parts(args)
    return 2 * _tokens(x, packed) * sum(w.numel() for w in weights if w.dim() == 2)


@shape_rule(*(_PREFIX + k for k in _KERNELS), flops=recurrent_flops, mixing=True)
def recurrent_kernel(*args: Any, **kwargs: Any) -> tuple:
    """The outputs of `_VF.lstm` / `gru` / `rnn_tanh` / `rnn_relu` by shape (see the module's docstring)."""
    return _outputs(args)


@contextlib.contextmanager
def recurrent_on_meta(call: Callable[[str, tuple, dict], Any]) -> Iterator[None]:
    """While inside, torch's recurrent kernels called on a meta input go to `call(qualname, args, kwargs)` (the
    tracer's stub call: the rule above, its FLOPs reported as a kernel's); any other input runs torch's own."""
    vf = torch._VF
    saved = {k: vars(vf).get(k) for k in _KERNELS}

    def answered(name: str) -> Callable[..., Any]:
        real = getattr(torch._C._VariableFunctions, name)

        def kernel(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
                return call(_PREFIX + name, args, kwargs)
            return real(*args, **kwargs)

        return kernel

    try:
        for k in _KERNELS:
            setattr(vf, k, answered(k))
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                vars(vf).pop(k, None)
            else:
                setattr(vf, k, v)


__all__ = ["recurrent_flops", "recurrent_kernel", "recurrent_on_meta"]

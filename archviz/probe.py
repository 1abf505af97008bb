"""Execution: run a small copy of a model for real (random weights, real kernels or the torch implementations in
`archviz.kernels`) and compare every module call's shapes with the meta walk.

`real_calls()` runs a model built on CPU; `compare()` checks a meta record against those calls, with the symbols
(B, T, B·T) substituted and the routed-token dim R (data-dependent) accepted at any value.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch

from . import kernels, stubs
from .records import ModelRecord
from .sources import Built
from .shapes import ROUTED, Tracer

_NORM_HINTS = ("norm", "ln", "layernorm")


def init_random(model: torch.nn.Module, config: dict[str, Any], seed: int = 0) -> None:
    """Fill every parameter with deterministic random values suited to its kind: small normal weights, unit norm
    weights, fp8/fp4 codes with power-of-two scales, integer tables within the expert count."""
    g = torch.Generator().manual_seed(seed)
    experts = next((v for k in ("n_routed_experts", "num_local_experts", "num_experts")
                    if isinstance(v := config.get(k), int) and v > 0), 2)
    with torch.no_grad():
        for mname, mod in model.named_modules():
            lname = type(mod).__name__.lower()
            for name, p in list(mod._parameters.items()):
                if p is None or p.is_meta:
                    continue
                p.data = _random_like(p, name, lname, experts, g)


def _random_like(p: torch.Tensor, name: str, cls: str, experts: int, g: torch.Generator) -> torch.Tensor:
    shape, dtype = tuple(p.shape), p.dtype
    if dtype in (torch.int64, torch.int32, torch.int16):
        return torch.randint(0, experts, shape, generator=g, dtype=dtype)
    if dtype in (torch.int8, torch.uint8):
        return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8).view(dtype)
    if dtype == torch.float4_e2m1fn_x2:
        return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8).view(dtype)
    if dtype == torch.float8_e8m0fnu:
        return torch.full(shape, 2.0**-7).to(dtype)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return torch.randn(shape, generator=g).clamp(-4, 4).to(dtype)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool)
    if "scale" in name and p.dim() == 2 and dtype == torch.float32:
        return torch.full(shape, 2.0**-7, dtype=dtype)
    if p.dim() == 1 and any(h in cls for h in _NORM_HINTS) and name == "weight":
        return torch.ones(shape, dtype=dtype)
    return (torch.randn(shape, generator=g) * 0.02).to(dtype)


def real_calls(built: Built, B: int, T: int, *, seed: int = 0,
               progress: Callable[[int, int], None] | None = None) -> tuple[Tracer, dict[str, list[str]]]:
    """Run `built` (on CPU) on random token ids [B, T]; returns the tracer (calls per path) and the kernels run."""
    from .walk import _Spans

    spans = _Spans(built.display_roots)
    tracer = Tracer(built.model, spans.display)
    ran: dict[str, list[str]] = {}

    def stub_call(qualname: str, args: tuple, kwargs: dict) -> Any:
        hit = kernels.lookup(qualname, meta=False)
        if hit is None:
            from .errors import ShapeError

            raise ShapeError(f"{qualname} has no implementation to run", hint="declare one with "
                             "@archviz.kernels.shape_rule and --kernel-rules FILE")
        fn, impl = hit
        ran.setdefault(qualname, []).append(impl)
        tracer.kernel(qualname, impl)
        return fn(*args, **kwargs)

    vocab = _vocab(built)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, vocab, (B, T), generator=g)
    if built.kind == "hf":
        args: tuple = ()
        kwargs: dict[str, Any] = {"input_ids": ids}
        import inspect

        if "use_cache" in inspect.signature(built.model.forward).parameters:
            kwargs["use_cache"] = False
    else:
        import inspect

        names = list(inspect.signature(built.model.forward).parameters)
        args = (ids,)
        kwargs = {"start_pos": 0} if "start_pos" in names[1:] else {}
    tracer.install()
    tracer.progress = progress
    previous = stubs.set_call_handler(stub_call)
    saved = torch.get_default_dtype()
    try:
        if built.default_dtype:
            torch.set_default_dtype(getattr(torch, built.default_dtype))
        with torch.no_grad():
            built.model(*args, **kwargs)
    finally:
        stubs.set_call_handler(previous)
        tracer.remove()
        torch.set_default_dtype(saved)
    return tracer, ran


def _vocab(built: Built) -> int:
    for k in ("vocab_size", "n_vocab"):
        v = built.config.get(k)
        if isinstance(v, int) and v > 0:
            return v
    return 2


@dataclasses.dataclass(frozen=True)
class Disagreement:
    path: str
    meta: str
    real: str

    def line(self) -> str:
        return f"{self.path}: meta {self.meta} vs real {self.real}"


def _substitute(dims: tuple, B: int, T: int) -> tuple:
    env = {"B": B, "T": T, "B·T": B * T}
    return tuple(env.get(d, d) if isinstance(d, str) else d for d in dims)


def _matches(meta: tuple, real: tuple, B: int, T: int) -> bool:
    if len(meta) != len(real):
        return False
    for m, r in zip(meta, real):
        m = _substitute(m, B, T)
        if len(m) != len(r):
            return False
        for a, b in zip(m, r):
            if a == ROUTED:
                continue
            if a != b:
                return False
    return True


def compare(record: ModelRecord, tracer: Tracer, B: int, T: int) -> tuple[dict[str, bool], list[Disagreement],
                                                                         list[str]]:
    """Per called module: confirmed (True) or not. Returns (confirmed, disagreements, not exercised)."""
    confirmed: dict[str, bool] = {}
    bad: list[Disagreement] = []
    skipped: list[str] = []
    for m in record.modules:
        if not m.calls:
            continue
        real = tracer.calls.get(m.path)
        data_dependent = any(ROUTED in s for c in m.calls for s in (*c.inputs, *c.outputs))
        if not real:
            if data_dependent:
                skipped.append(m.path)  # routing sent no tokens here in the real run
                continue
            confirmed[m.path] = False
            bad.append(Disagreement(m.path, _fmt(m.calls[0].inputs, m.calls[0].outputs), "not called"))
            continue
        real_sigs = [(tuple(s for s, _ in ins), tuple(s for s, _ in outs)) for ins, outs in real]
        ok = True
        for c in m.calls:
            if not any(_matches(c.inputs, ri, B, T) and _matches(c.outputs, ro, B, T) for ri, ro in real_sigs):
                ok = False
                ri, ro = real_sigs[0]
                bad.append(Disagreement(m.path, _fmt(c.inputs, c.outputs), _fmt(ri, ro)))
                break
        if ok:
            for ri, ro in real_sigs:
                if not any(_matches(c.inputs, ri, B, T) and _matches(c.outputs, ro, B, T) for c in m.calls):
                    if len(m.calls) >= 8:
                        break  # meta kept only the first distinct calls
                    ok = False
                    bad.append(Disagreement(m.path, _fmt(m.calls[0].inputs, m.calls[0].outputs), _fmt(ri, ro)))
                    break
        confirmed[m.path] = ok
    return confirmed, bad, skipped


def _fmt(ins: Any, outs: Any) -> str:
    def one(s: Any) -> str:
        return "[" + ", ".join(str(d) for d in s) + "]"

    return ", ".join(one(s) for s in ins) + " → " + ", ".join(one(s) for s in outs)


def routed_bound(B: int, T: int, k: int) -> int:
    return math.ceil(B * T * k)

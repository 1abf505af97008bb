"""The reduced copy run for real: random small weights by their bits, real inputs, every module call's shapes, and
the kernels it ran (the model's own, or `archviz.kernels`' torch implementations)."""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..errors import ShapeError, option
from ..shapes import ImportsInForward, Tracer, cache_off, kernels
from ..shapes.inputs import image_default, sequence_lengths
from ..shapes.collectives import collectives_answered
from ..sources import Built, stubs
from ..sources.meta import warnings_noted

_NORM_HINTS = ("norm", "ln", "layernorm")


def init_random(model: torch.nn.Module, config: dict[str, Any], seed: int = 0, *, share: bool = True) -> None:
    """Fill every parameter with deterministic random values suited to its kind: small weights in the parameter's
    own dtype (random sign and mantissa, exponent fixed near 2⁻⁷; fp8/fp4 codes with power-of-two scales), unit norm
    weights, integer tables within the expert count.

    With `share`, parameters of the same shape, dtype and kind share one random tensor: values never decide a shape,
    and a reduced copy of a large model then costs the memory and time of its distinct shapes only."""
    g = torch.Generator().manual_seed(seed)
    experts = next((v for k in ("n_routed_experts", "num_local_experts", "num_experts")
                    if isinstance(v := config.get(k), int) and v > 0), 2)
    pool: dict[tuple, torch.Tensor] = {}
    with torch.no_grad():
        for mname, mod in model.named_modules():
            lname = type(mod).__name__.lower()
            for name, p in list(mod._parameters.items()):
                if p is None or p.is_meta:
                    continue
                key = (tuple(p.shape), p.dtype, p.device, _role(p, name, lname))
                t = pool.get(key) if share else None
                if t is None:
                    t = _random_like(p, name, lname, experts, g).to(p.device)
                    if share:
                        pool[key] = t
                p.data = t


def _role(p: torch.Tensor, name: str, cls: str) -> str:
    if not (p.dtype.is_floating_point or p.dtype.is_complex):
        return "int"
    if "scale" in name and p.dim() == 2 and p.dtype == torch.float32:
        return "scale"
    if p.dim() == 1 and any(h in cls for h in _NORM_HINTS) and name == "weight":
        return "norm"
    return "weight"


def _random_bytes(n: int, g: torch.Generator) -> torch.Tensor:
    words = torch.empty(((n + 7) // 8,), dtype=torch.int64).random_(generator=g)
    return words.view(torch.uint8)[:n]


# Random small values by their bits: (mask keeping sign and mantissa, exponent bits set). Every value is then
# ±[2⁻⁷, 2⁻⁶) (fp8: ±[⅛, ¼), with 2⁻⁷ block scales): never NaN or inf, and no float32 detour.
_BITS = {
    torch.float8_e4m3fn: (torch.uint8, 0x87, 4 << 3),
    torch.float8_e5m2: (torch.uint8, 0x83, 13 << 2),
    torch.bfloat16: (torch.int16, 0x807F - 0x10000, 120 << 7),
    torch.float16: (torch.int16, 0x83FF - 0x10000, 8 << 10),
    torch.float32: (torch.int32, 0x807FFFFF - 0x100000000, 120 << 23),
}


def _random_like(p: torch.Tensor, name: str, cls: str, experts: int, g: torch.Generator) -> torch.Tensor:
    shape, dtype = tuple(p.shape), p.dtype
    if dtype in (torch.int64, torch.int32, torch.int16):
        return torch.randint(0, experts, shape, generator=g, dtype=dtype)
    if dtype in (torch.int8, torch.uint8):
        return _random_bytes(math.prod(shape), g).view(dtype).reshape(shape)
    if dtype == torch.float4_e2m1fn_x2:
        return _random_bytes(math.prod(shape), g).view(dtype).reshape(shape)
    if dtype == torch.float8_e8m0fnu:
        return torch.full(shape, 2.0**-7).to(dtype)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool)
    if "scale" in name and p.dim() == 2 and dtype == torch.float32:
        return torch.full(shape, 2.0**-7, dtype=dtype)
    if p.dim() == 1 and any(h in cls for h in _NORM_HINTS) and name == "weight":
        return torch.ones(shape, dtype=dtype)
    bits = _BITS.get(dtype)
    if bits is not None:
        view, mask, exponent = bits
        n = math.prod(shape)
        w = _random_bytes(n * torch.empty((), dtype=view).element_size(), g).view(view)
        w.bitwise_and_(mask).bitwise_or_(exponent)
        return w.view(dtype).reshape(shape)
    return (torch.randn(shape, generator=g) * 0.02).to(dtype)


@dataclass(frozen=True)
class RealPassOptions:
    """How the real pass runs, beside its batch and length: `seed` for the token ids and images; on `device`; with
    `input_specs` (`input`, as the meta pass took them); in training mode (`train`) or eval; `sizes`: the meta
    pass's sizes of the dims input specs named without one (`x=B,3,H,W`); `tokens_1d`: the meta pass took token ids [T]
    (`archviz.shapes.token_rank`)."""
    seed: int = 0
    device: str = "cpu"
    input_specs: list[str] | None = None
    train: bool = False
    sizes: dict[str, int] | None = None
    tokens_1d: bool = False


def real_calls(built: Built, B: int, T: int, options: RealPassOptions = RealPassOptions(), *,
               progress: Callable[[int, int], None] | None = None,
               note: Callable[[str], None] | None = None) -> tuple[Tracer, dict[str, list[str]]]:
    """Run `built` (built on `options.device`) on random token ids [B, T] (and the input values, as the meta pass
    took them), or on the image batch the meta pass took by default (a vision model), in eval mode or training mode;
    returns the tracer (calls per path) and the kernels run (qualname -> the implementation of each call). Stubbed
    kernels run the torch implementations in `archviz.kernels`; modules imported inside forward that are not
    installed are stubbed the same way. Warnings the model's code raises go to `note` (with the module that raised
    them), never to stderr."""
    from ..walk.spans import Spans

    spans = Spans(built.display_roots)
    tracer = Tracer(built.model, spans.display)
    ran: dict[str, list[str]] = {}
    kernel_calls: dict[tuple[str, str], list[tuple]] = {}
    tracer.kernel_calls = kernel_calls  # type: ignore[attr-defined]  # (path, kernel) -> distinct call shapes

    def stub_call(qualname: str, args: tuple, kwargs: dict) -> Any:
        hit = kernels.lookup(qualname, meta=False)
        if hit is None:
            raise ShapeError(f"{qualname} has no implementation to run", hint="declare one with "
                             f"@archviz.kernels.shape_rule and {option('kernel-rules')} FILE")
        fn, impl = hit
        ran.setdefault(qualname, []).append(impl)
        tracer.kernel(qualname, impl)
        result = fn(*args, **kwargs)
        _log_kernel_call(kernel_calls, tracer.stack[-1] if tracer.stack else "", qualname, args, kwargs, result)
        return result

    args, kwargs = _real_inputs(built, B, T, options)
    registry = built.stubs or stubs.StubRegistry()
    modes = [(m, m.training) for m in built.model.modules()]
    built.model.train(options.train)
    tracer.install()
    tracer.progress = progress
    previous = stubs.set_call_handler(stub_call)
    saved = torch.get_default_dtype()
    try:
        if built.default_dtype:
            torch.set_default_dtype(getattr(torch, built.default_dtype))
        def warned(text: str) -> None:
            if note is not None:
                note(f"warning from {(tracer.stack[-1] if tracer.stack else '') or 'the model'} in the real pass: "
                     f"{text}")

        with warnings_noted(warned), torch.no_grad(), cache_off(built.model) if built.kind == "hf" else nullcontext(), \
                ImportsInForward(registry, built.roots if built.kind != "hf" else ()), kernels.dequantized_once(), \
                collectives_answered(built.world_size, built.rank, tracer.assume):
            built.model(*args, **kwargs)
    finally:
        stubs.set_call_handler(previous)
        tracer.remove()
        torch.set_default_dtype(saved)
        for m, mode in modes:
            m.training = mode
    return tracer, ran


def _real_inputs(built: Built, B: int, T: int, options: RealPassOptions) -> tuple[tuple, dict[str, Any]]:
    """The forward's arguments as the meta pass took them, made real: random token ids [B, T] (or [T]), or an image
    batch; the input values random floats, zero integers, true masks."""
    import inspect

    device = options.device
    vocab = _vocab(built)
    g = torch.Generator().manual_seed(options.seed + 1)
    ids = torch.randint(0, vocab, (B, T), generator=g).to(device)
    if built.kind == "hf":
        args: tuple = ()
        params = inspect.signature(built.model.forward).parameters
        named = [p.name for p in params.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        # as the meta pass: token ids unless the forward names other inputs first (a vision model, its input)
        kwargs: dict[str, Any] = {"input_ids": ids} if not named or "input_ids" in named else {}
        image = image_default(built) if named and named[0] == "pixel_values" else None
        if image is not None:  # as the meta pass: pixel_values [B, C, H, W] from the config
            kwargs["pixel_values"] = torch.randn((B, *image[0]), generator=g).to(device)
        if "use_cache" in params:
            kwargs["use_cache"] = False
    else:
        names = list(inspect.signature(built.model.forward).parameters)
        image = image_default(built)
        # as the meta pass: token ids [T] where it took them so, and the sequences' lengths a forward asks for
        args = (torch.randn((B, *image[0]), generator=g).to(device),) if image is not None else \
            (ids[0] if options.tokens_1d else ids,)
        kwargs = {"start_pos": 0} if "start_pos" in names[1:] else {}
        if image is None:
            kwargs.update(sequence_lengths(built.model, B, T, options.tokens_1d))
    if options.input_specs:  # the meta pass's input, made real: random floats, zero integers, true masks
        from ..shapes import merge_inputs, parse_inputs

        given = {k: _real_input(v, g, device)
                 for k, v in parse_inputs(options.input_specs, B, T, options.sizes)[1].items()}
        args, kwargs = merge_inputs(built.model, (args, kwargs), given)
    return args, kwargs


def _real_input(value: Any, g: torch.Generator, device: str) -> Any:
    """An input spec's value (a meta tensor of its shape and dtype, or a number / None) as a real one."""
    if not isinstance(value, torch.Tensor):
        return value
    shape, dtype = tuple(value.shape), value.dtype
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype).to(device)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=dtype, device=device)
    return torch.zeros(shape, dtype=dtype, device=device)  # indices and ids: 0 is valid in every table


def tensor_leaves(obj: Any, out: list | None = None, depth: int = 0) -> list:
    """The tensors in a call's arguments or result (tuples, lists, dicts, three levels deep), in order."""
    out = [] if out is None else out
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)) and depth < 3:
        for x in obj:
            tensor_leaves(x, out, depth + 1)
    elif isinstance(obj, dict) and depth < 3:
        for x in obj.values():
            tensor_leaves(x, out, depth + 1)
    return out


def _shapes_of(obj: Any, out: list) -> list:
    out.extend(tuple(int(d) for d in t.shape) for t in tensor_leaves(obj))
    return out


def _log_kernel_call(log: dict[tuple[str, str], list[tuple]], path: str, qualname: str, args: tuple, kwargs: dict,
                     result: Any) -> None:
    sig = (tuple(_shapes_of((args, kwargs), [])), tuple(_shapes_of(result, [])))
    calls = log.setdefault((path, qualname), [])
    if sig not in calls and len(calls) < 8:
        calls.append(sig)


def kernel_call_logger(log: dict[tuple[str, str], list[tuple]]) -> Callable[[str, str, tuple, dict, Any], None]:
    """A `trace_shapes(run=PassRun(on_kernel=...))` hook recording the shapes of every stubbed kernel call (answered
    by its shape rule) by the module path that made it: the probe compares them with the real calls, so a wrong
    shape rule is caught even where the module's own shapes come out right."""

    def on_kernel(path: str, qualname: str, args: tuple, kwargs: dict, result: Any) -> None:
        _log_kernel_call(log, path, qualname, args, kwargs, result)

    return on_kernel


def _vocab(built: Built) -> int:
    for k in ("vocab_size", "n_vocab"):
        v = built.config.get(k)
        if isinstance(v, int) and v > 0:
            return v
    return 2

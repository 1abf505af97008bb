"""Execution: run a small copy of a model for real (random weights, real kernels or the torch implementations in
`archviz.kernels`) and compare every module call's shapes with the meta walk.

`run_probe()` is `archviz probe`: the full model is built on meta, walked and traced; a reduced copy (every width and
every kind of layer kept, see `archviz.reduce`) is built on the device with random weights (`init_random`) and run on
random token ids (`real_calls`); `compare_mapped()` checks every meta module call, and every stubbed kernel call, of
the full model against the real calls of the module at the mapped path, with the symbols (B, T, B·T) substituted, the
routed-token dim R (data-dependent) accepted at any value and cut dims mapped back to their full values. The verdicts
land in the records as `extra("probe")["modules"][path]["confirmed"]`. A memory guard refuses, before allocating,
a copy that would not fit.
"""

from __future__ import annotations

import dataclasses
import gc
import math
from contextlib import nullcontext
from typing import Any, Callable

import torch

from ..shapes import kernels
from ..sources import stubs
from ..errors import EXIT_USAGE, ArchvizError, ShapeError
from ..sources.meta import warnings_noted
from ..records import ModelRecord
from ..sources import Built
from ..shapes import ROUTED, ImportsInForward, Tracer, cache_off

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


def real_calls(built: Built, B: int, T: int, *, seed: int = 0,
               progress: Callable[[int, int], None] | None = None,
               device: str = "cpu", note: Callable[[str], None] | None = None,
               input_specs: list[str] | None = None) -> tuple[Tracer, dict[str, list[str]]]:
    """Run `built` (built on `device`) on random token ids [B, T] (and `input_specs`, as the meta pass took them);
    returns the tracer (calls per path) and the kernels run (qualname -> the implementation of each call). Stubbed
    kernels run the torch implementations in `archviz.kernels`; modules imported inside forward that are not
    installed are stubbed the same way. Warnings the model's code raises go to `note` (with the module that raised
    them), never to stderr."""
    from ..walk.walker import _Spans

    spans = _Spans(built.display_roots)
    tracer = Tracer(built.model, spans.display)
    ran: dict[str, list[str]] = {}

    def stub_call(qualname: str, args: tuple, kwargs: dict) -> Any:
        hit = kernels.lookup(qualname, meta=False)
        if hit is None:
            raise ShapeError(f"{qualname} has no implementation to run", hint="declare one with "
                             "@archviz.kernels.shape_rule and --kernel-rules FILE")
        fn, impl = hit
        ran.setdefault(qualname, []).append(impl)
        tracer.kernel(qualname, impl)
        result = fn(*args, **kwargs)
        _log_kernel_call(kernel_calls, tracer.stack[-1] if tracer.stack else "", qualname, args, kwargs, result)
        return result

    kernel_calls: dict[tuple[str, str], list[tuple]] = {}
    tracer.kernel_calls = kernel_calls  # type: ignore[attr-defined]  # (path, kernel) -> distinct call shapes
    vocab = _vocab(built)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, vocab, (B, T), generator=g).to(device)
    import inspect

    if built.kind == "hf":
        args: tuple = ()
        params = inspect.signature(built.model.forward).parameters
        named = [p.name for p in params.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        # as the meta pass: token ids unless the forward names other inputs first (a vision model, its --input)
        kwargs: dict[str, Any] = {"input_ids": ids} if not named or "input_ids" in named else {}
        if "use_cache" in params:
            kwargs["use_cache"] = False
    else:
        names = list(inspect.signature(built.model.forward).parameters)
        args = (ids,)
        kwargs = {"start_pos": 0} if "start_pos" in names[1:] else {}
    if input_specs:  # the meta pass's --input, made real: random floats, zero integers, true masks
        from ..shapes import merge_inputs, parse_inputs

        given = {k: _real_input(v, g, device) for k, v in parse_inputs(input_specs, B, T)[1].items()}
        args, kwargs = merge_inputs(built.model, (args, kwargs), given)
    registry = built.stubs or stubs.StubRegistry()
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
                ImportsInForward(registry, built.roots if built.kind != "hf" else ()), kernels.dequantized_once():
            built.model(*args, **kwargs)
    finally:
        stubs.set_call_handler(previous)
        tracer.remove()
        torch.set_default_dtype(saved)
    return tracer, ran


def _real_input(value: Any, g: torch.Generator, device: str) -> Any:
    """A `--input` value (a meta tensor of its shape and dtype, or a number / None) as a real one."""
    if not isinstance(value, torch.Tensor):
        return value
    shape, dtype = tuple(value.shape), value.dtype
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype).to(device)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=dtype, device=device)
    return torch.zeros(shape, dtype=dtype, device=device)  # indices and ids: 0 is valid in every table


def _shapes_of(obj: Any, out: list, depth: int = 0) -> list:
    if isinstance(obj, torch.Tensor):
        out.append(tuple(int(d) for d in obj.shape))
    elif isinstance(obj, (tuple, list)) and depth < 3:
        for x in obj:
            _shapes_of(x, out, depth + 1)
    elif isinstance(obj, dict) and depth < 3:
        for x in obj.values():
            _shapes_of(x, out, depth + 1)
    return out


def _log_kernel_call(log: dict[tuple[str, str], list[tuple]], path: str, qualname: str, args: tuple, kwargs: dict,
                     result: Any) -> None:
    sig = (tuple(_shapes_of((args, kwargs), [])), tuple(_shapes_of(result, [])))
    calls = log.setdefault((path, qualname), [])
    if sig not in calls and len(calls) < 8:
        calls.append(sig)


def kernel_call_logger(log: dict[tuple[str, str], list[tuple]]) -> Callable[[str, str, tuple, dict, Any], None]:
    """A `trace_shapes(on_kernel=...)` hook recording the shapes of every stubbed kernel call (answered by its shape
    rule) by the module path that made it: the probe compares them with the real calls, so a wrong shape rule is
    caught even where the module's own shapes come out right."""

    def on_kernel(path: str, qualname: str, args: tuple, kwargs: dict, result: Any) -> None:
        _log_kernel_call(log, path, qualname, args, kwargs, result)

    return on_kernel


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
    kernel: str | None = None  # a stubbed kernel called by this module, when its call is what disagrees

    def line(self) -> str:
        what = f" (its call of {self.kernel})" if self.kernel else ""
        return f"{self.path or '(model)'}{what}: meta {self.meta} vs real {self.real}"


def _substitute(dims: tuple, B: int, T: int) -> tuple:
    env = {"B": B, "T": T, "B·T": B * T}
    return tuple(env.get(d, d) if isinstance(d, str) else d for d in dims)


def _matches(meta: tuple, real: tuple, B: int, T: int, pairs: frozenset = frozenset()) -> bool:
    """Shapes agree: symbols substituted, R (routed tokens, data-dependent) any value, and a real dim equal to a
    reduced value standing for the full value it was cut from (`pairs`: (full, reduced))."""
    if len(meta) != len(real):
        return False
    for m, r in zip(meta, real):
        m = _substitute(m, B, T)
        if len(m) != len(r):
            return False
        for a, b in zip(m, r):
            if a == ROUTED or a == b:
                continue
            if (a, b) in pairs:
                continue
            return False
    return True


@dataclasses.dataclass
class Comparison:
    confirmed: dict[str, bool]  # full-model path -> every call agrees
    disagreements: list[Disagreement]
    skipped: list[str]  # routing sent no tokens to this module in the real run (data-dependent calls only)
    absent: dict[str, str]  # full-model path -> why the reduced copy has no such module (not exercised)


def compare(record: ModelRecord, tracer: Tracer, B: int, T: int) -> tuple[dict[str, bool], list[Disagreement],
                                                                         list[str]]:
    """Per called module: confirmed (True) or not. Returns (confirmed, disagreements, not exercised)."""
    c = compare_mapped(record, tracer, B, T)
    return c.confirmed, c.disagreements, c.skipped


def compare_mapped(record: ModelRecord, tracer: Tracer, B: int, T: int, plan: Any = None,
                   meta_kernels: dict[tuple[str, str], list[tuple]] | None = None) -> Comparison:
    """Compare every meta call of `record` (the full model) with the real calls of the module at the mapped path of
    a reduced copy (`plan`: an `archviz.reduce.Plan`; None: the same model); with `meta_kernels` (see
    `kernel_call_logger`), every stubbed kernel call too, as part of the module that made it."""
    pairs = plan.pairs if plan is not None else frozenset()
    confirmed: dict[str, bool] = {}
    bad: list[Disagreement] = []
    skipped: list[str] = []
    absent: dict[str, str] = {}
    for m in record.modules:
        if not m.calls:
            continue
        rp = m.path
        if plan is not None:
            reason = plan.absent_reason(m.path)
            if reason is not None:
                absent[m.path] = reason
                continue
            rp = plan.map_path(m.path) or m.path
        real = tracer.calls.get(rp)
        data_dependent = any(ROUTED in s for c in m.calls for s in (*c.inputs, *c.outputs))
        if not real:
            if data_dependent:
                skipped.append(m.path)  # routing sent no tokens here in the real run
                continue
            confirmed[m.path] = False
            bad.append(Disagreement(m.path, _fmt(m.calls[0].inputs, m.calls[0].outputs), "not called"))
            continue
        real_sigs = [(tuple(s for s, _ in ins), tuple(s for s, _ in outs)) for ins, outs in real]

        def agree(c: Any, ri: tuple, ro: tuple) -> bool:
            return _matches(c.inputs, ri, B, T, pairs) and _matches(c.outputs, ro, B, T, pairs)

        ok = True
        for c in m.calls:
            if not any(agree(c, ri, ro) for ri, ro in real_sigs):
                ok = False
                ri, ro = real_sigs[0]
                bad.append(Disagreement(m.path, _fmt(c.inputs, c.outputs), _fmt(ri, ro)))
                break
        if ok:
            for ri, ro in real_sigs:
                if not any(agree(c, ri, ro) for c in m.calls):
                    if len(m.calls) >= 8:
                        break  # meta kept only the first distinct calls
                    ok = False
                    bad.append(Disagreement(m.path, _fmt(m.calls[0].inputs, m.calls[0].outputs), _fmt(ri, ro)))
                    break
        confirmed[m.path] = ok
    if meta_kernels:
        _compare_kernels(record, tracer, B, T, plan, meta_kernels, confirmed, bad, absent)
    return Comparison(confirmed, bad, skipped, absent)


def _compare_kernels(record: ModelRecord, tracer: Tracer, B: int, T: int, plan: Any,
                     meta_kernels: dict[tuple[str, str], list[tuple]], confirmed: dict[str, bool],
                     bad: list[Disagreement], absent: dict[str, str]) -> None:
    from ..shapes import name_dims

    pairs = plan.pairs if plan is not None else frozenset()
    shapes = record.extra("shapes") or {}
    routed = set(shapes.get("routed_sizes") or ()) - {B, T, B * T}
    real_log: dict[tuple[str, str], list[tuple]] = getattr(tracer, "kernel_calls", {})

    def named(sig: tuple) -> tuple:
        return tuple(tuple(name_dims(s, B, T, routed) for s in part) for part in sig)

    for (path, qualname), metas in meta_kernels.items():
        if plan is not None and plan.absent_reason(path) is not None:
            absent.setdefault(path, plan.absent_reason(path) or "")
            continue
        rp = (plan.map_path(path) if plan is not None else path) or path
        reals = real_log.get((rp, qualname))
        named_metas = [named(m) for m in metas]
        data_dependent = any(ROUTED in s for m in named_metas for part in m for s in part)
        if not reals:
            if data_dependent or rp not in tracer.calls:
                continue  # the module itself did not run (told at the module's level)
            confirmed[path] = False
            bad.append(Disagreement(path, _fmt(*named_metas[0]), "not called", kernel=qualname))
            continue
        for m in named_metas:
            if not any(_matches(m[0], ri, B, T, pairs) and _matches(m[1], ro, B, T, pairs) for ri, ro in reals):
                confirmed[path] = False
                bad.append(Disagreement(path, _fmt(*m), _fmt(*reals[0]), kernel=qualname))
                break
        else:
            confirmed.setdefault(path, True)


def _fmt(ins: Any, outs: Any) -> str:
    def one(s: Any) -> str:
        return "[" + ", ".join(str(d) for d in s) + "]"

    return ", ".join(one(s) for s in ins) + " → " + ", ".join(one(s) for s in outs)


def routed_bound(B: int, T: int, k: int) -> int:
    return math.ceil(B * T * k)


# ---------------------------------------------------------------------------------------------------------------------
# The probe: meta walk of the full model, a reduced copy run for real, every call compared


class ProbeError(ArchvizError):
    """The probe cannot run (memory guard, no such device) or the real forward pass failed."""


_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}


def parse_size(text: str) -> int:
    """'8GB', '512MiB', '1.5g', '1000000' -> bytes (binary units: 1 GB = 1024³ bytes)."""
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ProbeError(f"--max-memory {text!r}: not a size", hint="write e.g. 8GB, 512MB or a number of bytes",
                         exit_code=EXIT_USAGE)
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def default_max_memory(device: str = "cpu") -> int:
    """Half the memory of the device the copy runs on: the machine's (MemTotal in /proc/meminfo, else 8 GB), or the
    GPU's."""
    if device.startswith("cuda") and torch.cuda.is_available():
        index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        return int(torch.cuda.get_device_properties(index).total_memory) // 2
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 8 * 1024**3


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


_QUANTIZED = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn_x2", "int8",
              "uint8")


def estimate_bytes(record: ModelRecord) -> tuple[int, int]:
    """(bytes of the copy's tensors, parameters and buffers; working space). The working space is what the largest
    tensor costs beyond itself: a quantized weight is dequantized to float32 copies in the torch GEMMs (16 bytes per
    value), any other tensor is copied a few times at most (its random init, a cast)."""
    tensors = record.modules[0].totals.bytes if record.modules else 0
    work = 0
    for m in record.modules:
        for t in m.tensors:
            work = max(work, 16 * t.elements if t.dtype in _QUANTIZED else 3 * t.bytes)
    return tensors, work + 64 * 1024**2


@dataclasses.dataclass
class ProbeResult:
    record: ModelRecord  # the full model's records: shapes, grouping, extra("probe")
    plan: Any  # archviz.reduce.Plan
    B: int
    T: int
    comparison: Comparison
    kernels: dict[str, dict[str, Any]]  # qualname -> {"implementation", "calls", "modules"}
    kinds: list[dict[str, Any]]  # per layer kind: layers, probed, compared, confirmed, disagreements
    estimate: int
    max_memory: int
    device: str
    seconds: dict[str, float]
    notes: list[str]
    stubbed: tuple[str, ...] = ()

    @property
    def disagreements(self) -> list[Disagreement]:
        return self.comparison.disagreements

    @property
    def compared(self) -> int:
        return len(self.comparison.confirmed)

    @property
    def confirmed(self) -> int:
        return sum(1 for v in self.comparison.confirmed.values() if v)

    @property
    def agreement(self) -> float:
        return self.confirmed / self.compared if self.compared else 0.0

    @property
    def ok(self) -> bool:
        return not self.disagreements and self.compared > 0

    def as_json(self) -> dict[str, Any]:
        import resource

        c = self.comparison
        return {
            "source": self.record.source.spec,
            "device": self.device,
            "ok": self.ok,
            "agreement": self.agreement,
            "modules_compared": self.compared,
            "modules_confirmed": self.confirmed,
            "disagreements": [{"path": d.path, "kernel": d.kernel, "meta": d.meta, "real": d.real}
                              for d in c.disagreements],
            "not_exercised": len(c.absent),
            "not_exercised_by_reason": _count(c.absent.values()),
            "routed_nothing": c.skipped,
            "kinds": self.kinds,
            "kernels": self.kernels,
            "reduced": self.plan.as_json(),
            "B": self.B,
            "T": self.T,
            "estimate_bytes": self.estimate,
            "max_memory_bytes": self.max_memory,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "stubbed": list(self.stubbed),
            "notes": self.notes,
        }


def _count(xs: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


Stage = Callable[[str, int, int], None]


def run_probe(spec: str, *, config: str | None = None, overrides: dict[str, Any] | None = None,
              model_class: str | None = None, tokenizer: str | None = None, world_size: int | None = None,
              rank: int | None = None, default_dtype: str | None = None, device: str = "cpu",
              max_memory: int | None = None, batch: int | None = None, seq: int | None = None, seed: int = 0,
              limits: Any = None, progress: Stage | None = None, trust_remote_code: bool = False,
              input_specs: list[str] | None = None) -> ProbeResult:
    """Build SOURCE on meta, walk it and trace its shapes; build a reduced copy (see `archviz.reduce`) on `device`
    with random weights, run it on random token ids (and `input_specs`), and compare every module call's shapes with
    the meta walk.

    `progress(stage, done, total)` is told each stage (total 0: no count). Raises `ProbeError` (exit 2) when the
    reduced copy would not fit in `max_memory` bytes (default: half the machine's memory), before allocating it."""
    import time

    from . import reduce
    from ..shapes import trace_shapes
    from ..sources import BuildOptions, build
    from ..walk import walk

    limits = limits or reduce.Limits()
    if seq and seq > limits.seq:
        limits = dataclasses.replace(limits, seq=seq)
    _check_device(device)
    max_memory = max_memory if max_memory is not None else default_max_memory(device)
    report: Stage = progress or (lambda stage, done, total: None)
    seconds: dict[str, float] = {}
    clock = [time.perf_counter(), ""]

    def stage(name: str) -> Callable[[int, int], None]:
        now = time.perf_counter()
        if clock[1]:
            seconds[str(clock[1])] = seconds.get(str(clock[1]), 0.0) + now - float(clock[0])
        clock[0], clock[1] = now, name
        report(name, 0, 0)
        return lambda done, total: report(name, done, total)

    user = dict(overrides or {})
    opts = BuildOptions(config=config, overrides=tuple(user.items()), model_class=model_class, tokenizer=tokenizer,
                        world_size=world_size, rank=rank, default_dtype=default_dtype,
                        trust_remote_code=trust_remote_code)
    stage("building on meta")
    built = build(spec, opts)
    record = walk(built, progress=stage("walking modules"))

    stage("planning the reduced copy")
    notes: list[str] = []
    with _Workdir() as tmp:
        kinds = reduce.layer_kinds(record)
        chosen = None
        reduced_record = record
        for plan in reduce.plans(record, built.config, limits=limits, kinds=kinds):
            if plan.method == "none":
                chosen = plan
                break
            try:
                rbuilt = build(*_reduced_source(spec, built, opts, plan, "meta", tmp, notes))
                rrec = walk(rbuilt)
            except ArchvizError as e:
                notes.append(f"plan '{plan.method}' does not build: {e.line()[:300]}")
                continue
            finally:
                rbuilt = None
            problems = reduce.check_structure(record, rrec, plan)
            if problems:
                notes.append(f"plan '{plan.method}' does not keep the model's structure: {problems[0]}")
                continue
            chosen, reduced_record = plan, rrec
            break
        assert chosen is not None
        tensors, work = estimate_bytes(reduced_record)
        estimate = tensors + work
        if estimate > max_memory:
            why = f" ({notes[-1]})" if chosen.method == "none" and notes else ""
            raise ProbeError(
                f"the reduced copy ({chosen.method}{why}) needs about {human_bytes(estimate)} ({human_bytes(tensors)}"
                f" of tensors + {human_bytes(work)} working space), more than --max-memory {human_bytes(max_memory)}",
                hint="raise --max-memory, or cut the model further with --set (e.g. fewer layers)",
                exit_code=EXIT_USAGE)
        reduced_record = None

        batch, seq = probe_dims(record, batch, seq)
        meta_kernels: dict[tuple[str, str], list[tuple]] = {}
        record = trace_shapes(built, record, batch=batch, seq=seq, on_kernel=kernel_call_logger(meta_kernels),
                              progress=stage("meta forward pass"), input_specs=input_specs)
        shapes = record.extra("shapes")
        B, T = shapes["B"], shapes["T"]
        eager = built.kind == "hf" and any("experts_implementation='eager'" in n for n in shapes.get("notes", ()))
        built = None  # the full meta model is no longer needed
        gc.collect()

        stage(f"building the reduced copy on {device}")
        real = build(*_reduced_source(spec, None, opts, chosen, device, tmp, notes, record=record))
        if eager and hasattr(real.model, "set_experts_implementation"):
            try:
                real.model.set_experts_implementation("eager")
            except Exception:  # noqa: BLE001 - as in the meta pass
                pass
        stage("random weights")
        init_random(real.model, real.config, seed=seed)
        try:
            tracer, ran = real_calls(real, B, T, seed=seed, progress=stage("real forward pass"), device=device,
                                     note=notes.append, input_specs=input_specs)
        except ArchvizError:
            raise
        except Exception as e:  # noqa: BLE001 - the model's own code raised on real tensors
            raise _real_failure(e, real) from e
        stubbed = tuple(sorted(set(real.stubbed_imports) | set(real.stubs.taken() if real.stubs else ())))
        meta_stubbed = {n for n in record.source.stubbed_imports if "." not in n}
        own = sorted(meta_stubbed - {n for n in stubbed if "." not in n})
        if own:
            notes.append(f"the model's own {', '.join(own)} imported on {device}: its kernels ran as written")
        real = None
        gc.collect()

    stage("comparing")
    comparison = compare_mapped(record, tracer, B, T, chosen, meta_kernels)
    kernel_report = _kernel_report(tracer, ran, chosen)
    record = _with_grouping(record)
    kinds_report = _kinds_report(record, comparison, chosen)
    modules: dict[str, dict[str, Any]] = {}
    real_kernels = tracer.kernels
    for path, ok in comparison.confirmed.items():
        entry: dict[str, Any] = {"confirmed": ok}
        rp = chosen.map_path(path) or path
        if rp != path:
            entry["probed_as"] = rp
        ks = real_kernels.get(rp)
        if ks:
            entry["kernels"] = list(ks)
        modules[path] = entry
    for d in comparison.disagreements:
        modules.setdefault(d.path, {"confirmed": False}).update({"meta": d.meta, "real": d.real})
    stage("")
    result = ProbeResult(record=record, plan=chosen, B=B, T=T, comparison=comparison, kernels=kernel_report,
                         kinds=kinds_report, estimate=estimate, max_memory=max_memory, device=device,
                         seconds=seconds, notes=notes + list(chosen.notes), stubbed=stubbed)
    extra = {"device": device, "agreement": result.agreement, "ok": result.ok, "B": B, "T": T,
             "modules": modules, "not_exercised": len(comparison.absent), "kernels": kernel_report,
             "reductions": [r.as_json() for r in chosen.reductions], "method": chosen.method,
             "layers_kept": list(chosen.kept_layers) if chosen.kept_layers is not None else None,
             "kinds": kinds_report}
    result.record = record.with_extra("probe", extra)
    return result


_SMALL_DIMS = [(b, t) for b in (2, 3, 5) for t in (5, 7, 11, 13, 17, 19, 23)]


def probe_dims(record: ModelRecord, batch: int | None, seq: int | None) -> tuple[int | None, int | None]:
    """Few tokens (the real pass costs tokens × weights): the smallest B, T that collide with no width of the model,
    unless the user chose them."""
    from ..shapes import choose_dims

    if batch and seq:
        return batch, seq
    for b, t in sorted(_SMALL_DIMS, key=lambda bt: (bt[0] * bt[1], bt)):
        if (batch and b != batch) or (seq and t != seq):
            continue
        B, T, clean = choose_dims(record, b, t)
        config = dict(record.source.config)
        too_big = any(isinstance(config.get(k), int) and config[k] < lim for k, lim in
                      (("max_batch_size", B), ("max_seq_len", T)))
        if clean and not too_big:
            return B, T
    if batch and seq:
        return batch, seq
    B, T, _ = choose_dims(record, batch, seq, routed=False)  # few tokens rather than a routed count apart
    return B, T


def _check_device(device: str) -> None:
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ProbeError(f"--device {device}: not a device the probe runs on", hint="use cpu or cuda",
                         exit_code=EXIT_USAGE)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeError(f"--device {device}: no CUDA device here", hint="use --device cpu (the kernels fall back to "
                         "plain torch implementations)", exit_code=EXIT_USAGE)


class _Workdir:
    def __enter__(self) -> str:
        import tempfile

        self._tmp = tempfile.TemporaryDirectory(prefix="archviz-probe-")
        return self._tmp.name

    def __exit__(self, *exc: Any) -> None:
        self._tmp.cleanup()


def _reduced_source(spec: str, built: Built | None, opts: Any, plan: Any, device: str, tmp: str,
                    notes: list[str], record: ModelRecord | None = None) -> tuple[str, Any]:
    """(spec, BuildOptions) of the reduced copy: transformers configs are written out whole (reductions applied),
    references get the reductions as overrides on top of the user's."""
    import json
    import os

    if plan.method == "none" or not plan.overrides:
        return spec, dataclasses.replace(opts, device=device)
    kind = built.kind if built is not None else (record.source.kind if record is not None else "reference")
    if kind == "hf":
        cfg = dict(built.config if built is not None else record.source.config)  # type: ignore[union-attr]
        cfg.update(plan.overrides)
        name = f"config-{plan.method.replace(' ', '-')}.json"
        if cfg.get("auto_map") and opts.trust_remote_code:  # the folder's own code goes beside the reduced config
            import shutil

            src = os.path.dirname(os.path.abspath(os.path.join(spec, "config.json") if os.path.isdir(spec) else spec))
            tmp = os.path.join(tmp, plan.method.replace(" ", "-"))
            os.makedirs(tmp, exist_ok=True)
            for file in os.listdir(src):
                if file.endswith(".py"):
                    shutil.copy2(os.path.join(src, file), os.path.join(tmp, file))
            name = "config.json"
        path = os.path.join(tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        return path, dataclasses.replace(opts, overrides=(), device=device)
    tokenizer = opts.tokenizer
    if tokenizer and any(r.field == "vocab_size" for r in plan.reductions):
        if "tokenizer: a stand-in" not in " ".join(notes):
            notes.append("tokenizer: a stand-in sized to the cut vocabulary (values only depend on the real one)")
        tokenizer = None
    merged = {**dict(opts.overrides), **plan.overrides}
    return spec, dataclasses.replace(opts, overrides=tuple(merged.items()), tokenizer=tokenizer, device=device)


def _real_failure(e: BaseException, real: Built) -> ProbeError:
    from ..sources.meta import user_frame

    where = user_frame(e, real.roots) or "the model"
    return ProbeError(f"the real forward pass of the reduced copy failed at {where}: {type(e).__name__}: "
                      f"{str(e)[:300]}", hint="the meta walk ran this code without error: rerun with --debug for "
                      "the traceback", exit_code=1)


def _kernel_report(tracer: Tracer, ran: dict[str, list[str]], plan: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for qualname, impls in sorted(ran.items()):
        mods = sorted(p for p, ks in tracer.kernels.items() if any(k == qualname or k.startswith(qualname + " ")
                                                                    for k in ks))
        out[qualname] = {"implementation": sorted(set(impls)), "calls": len(impls), "modules": len(mods),
                         "examples": [plan.unmap_path(p) for p in mods[:4]]}
    return out


def _with_grouping(record: ModelRecord) -> ModelRecord:
    try:
        from ..group import group
    except ImportError:
        return record
    return group(record)


def _kinds_report(record: ModelRecord, comparison: Comparison, plan: Any) -> list[dict[str, Any]]:
    """Per layer kind (and the modules outside the layer list): which layers ran, modules compared and confirmed."""
    from .reduce import layer_kinds

    path, kinds = layer_kinds(record)
    names: list[str] = []
    g = record.extra("grouping")
    if g and g.get("layers"):
        names = [k["name"] for k in g["layers"]["kinds"]]
    prefix = f"{path}." if path else ""
    rows: list[dict[str, Any]] = []
    by_layer: dict[int, list[str]] = {}
    outside: list[str] = []
    for p in comparison.confirmed:
        if path is not None and p.startswith(prefix) and p[len(prefix):].split(".", 1)[0].isdigit():
            by_layer.setdefault(int(p[len(prefix):].split(".", 1)[0]), []).append(p)
        else:
            outside.append(p)
    bad = {d.path for d in comparison.disagreements}
    for i, layers in enumerate(kinds):
        probed = [n for n in layers if n in by_layer]
        paths = [p for n in probed for p in by_layer[n]]
        rows.append({"kind": names[i] if i < len(names) else f"kind {i + 1}", "layers": len(layers),
                     "first": layers[0], "probed": probed, "compared": len(paths),
                     "confirmed": sum(1 for p in paths if comparison.confirmed[p]),
                     "disagreements": sum(1 for p in paths if p in bad)})
    rows.append({"kind": "outside the layer list" if path is not None else "all modules", "layers": 0, "first": None,
                 "probed": [], "compared": len(outside),
                 "confirmed": sum(1 for p in outside if comparison.confirmed[p]),
                 "disagreements": sum(1 for p in outside if p in bad)})
    return rows

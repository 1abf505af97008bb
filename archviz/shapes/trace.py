"""The meta forward pass: every module call's input and output shapes, symbolic dims and call sites.

The model runs on the meta device with hooks on every module. What meta cannot answer (a tensor's value: `.item()`,
`.tolist()`, a boolean test, `nonzero`, `bincount`, masked indexing) is answered by a deterministic policy, and every
answer is recorded as an assumption on the module where it was made:

- a boolean test on a tensor takes the common path: it holds (e.g. "the attention mask is all ones");
- routing: `topk` indices over E choices are spread evenly, so a test `indices == e` holds for 1/E of them,
  `bincount` gives every bin numel/E, and `nonzero`/`where`/masked indexing return ceil(numel · fraction) rows:
  every expert receives ceil(B·T·k/E) tokens (dim symbol `R`); a k-hot `scatter` of top-k indices holds k/E;
- counts read with `.tolist()` that must add up (sizes for `split`, JetMoE) keep their whole total: B·T·k spread
  as evenly as possible, the first counts one larger where it does not divide (both sizes are `R`);
- a mask with no known fraction is all true, so its negation holds none, and masks concatenated hold the share
  of their parts; an integer read from a tensor with no known value is 1; a float, 0.0; integers of unknown value
  summed count 1 each (so a total of durations agrees with repeat_interleave's 1 each), and the max or min of equal
  values is that value.

Stubbed kernels (modules that could not import) are answered by the rules in `archviz.kernels`; a kernel without a
rule stops the pass with a message that names it and says how to declare one.

Dims are named after the pass: B (batch) and T (positions) are run at values chosen to collide with no width of the
model, and only the symbols the inputs were sized by name anything (with every input given in ints, none). A name
takes evidence: a second pass runs at another B and T (and a user-named dim, `input x=B,3,H=224,W=224`, at
another size), and a dim keeps its name only where it followed the input, so a 7x7 feature map at B = 7 stays 7.
The second pass does only what that needs (see `evidence.py`: it records only the modules a symbol's size appears
in, and reuses the first pass's set-up). Every other dim is a fixed int. The pass runs the model in eval mode
unless asked for training mode (`forward.py`: the mode is set once for both passes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import inspect
import os
import re
from contextlib import nullcontext
from typing import Any, Callable, Sequence

import torch

from ..errors import FLOAT32_FIX, ShapeError, option
from ..gcpause import collector_paused
from ..input_specs import check_input_specs
from ..records import Call, CallSite, Flow, FlowFunction, FlowStep, ModelRecord, ModuleRecord
from ..sources import Built, stubs
from ..walk.provenance import file_facts
from ..sources.meta import strays_to_meta
from .evidence import PassGiven, Second, concerned, second_pass, symbol_multiples, symbol_values
from .evidence import named as named_by_evidence
from .forward import ForwardRun, pass_mode, run_forward
from .gathers import Gathers, adjust
from .structured import fixed_context, records_note, scalar_defaults, scalar_note
from .inputs import (
    default_inputs,
    default_sizes,
    forward_arguments,
    conditioning,
    input_tensors,
    structured_forms,
    records_first,
    consumer_default,
    list_notes,
    merge_inputs,
    missing_input_hint,
    named_sizes,
    none_hint,
    parse_inputs,
    spec_symbols,
)
from .memo import ALL_FIELDS, CALLS_FIELD, BlockMemo, weight_uses
from .policy import ROUTED
from .arguments import not_given_hint
from .streams import Stream, further_streams
from .symbols import choose_dims
from .token_rank import decide_rank, may_take_1d
from .tracer import ARCHVIZ_DIR, TORCH_DIR, Tracer

# ---------------------------------------------------------------------------------------------------------------------
# Inputs and dims


# ---------------------------------------------------------------------------------------------------------------------
# Entry point


@dataclass(frozen=True)
class PassRun:
    """How the meta pass runs, beside its inputs: with the block memo (`memo`: identical blocks answered from the
    first) or every block run; in eval mode or training mode (`train`: auxiliary heads, batch statistics); and who
    it reports to: `on_kernel(path, qualname, args, kwargs, out)` every stubbed kernel call, `progress(done, total)`,
    `op_observer(func, args, kwargs, out, module path)` every aten op (archviz.cost counts FLOPs with it) and
    `on_memo(source, target)` every block answered from the memo; `tensor_tag(tensor)` what the observer knows a
    tensor holds beyond its shape (a mask's layout), which the memo keys a block's inputs by."""
    memo: bool = True
    train: bool = False
    on_kernel: Callable[[str, str, tuple, dict, Any], None] | None = None
    progress: Callable[[int, int], None] | None = None
    op_observer: Callable[..., None] | None = None
    on_memo: Callable[[str, str], None] | None = None
    tensor_tag: Callable[[Any], Any] | None = None


def trace_shapes(built: Built, record: ModelRecord, *, batch: int | None = None, seq: int | None = None,
                 inputs: tuple[tuple, dict] | None = None, input_specs: list[str] | None = None,
                 run: PassRun = PassRun()) -> ModelRecord:
    """Run the model's forward on meta and return `record` with calls, call sites, assumptions and kernels filled.

    The pass runs the model in eval mode, or in training mode with `run.train`; every module's own mode is put back
    afterwards. The mode is recorded in the shapes extra ("mode"). An observed pass (`run.op_observer`) runs once: the
    second pass, which gathers the evidence for the dims' names, would run the module hooks of whoever observes
    again, so its dims are named by value (and noted so)."""
    op_observer = run.op_observer
    # The pass makes many short-lived meta tensors and records, but no cycles worth a rescan of the model's heap.
    # quantized: its modules call kernels meta cannot run; the unquantized ones they replaced are put back for it.
    with collector_paused(), built.unquantized() if built.unquantized is not None else nullcontext():
        def one_pass() -> ModelRecord:
            return _trace_shapes(built, record, (batch, seq), (inputs, input_specs), run)

        if op_observer is not None or not may_take_1d(built, inputs, input_specs):
            traced = one_pass()  # an observed pass is counted: its caller decides with fresh counters (archviz.cost)
        else:
            traced, note = decide_rank(built, one_pass)
            if note:
                info = traced.extra("shapes")
                traced = traced.with_extra("shapes", {**info, "notes": [*info["notes"], note]})
    if built.unquantized is not None:
        info = traced.extra("shapes")
        traced = traced.with_extra("shapes", {**info, "notes": [
            *info["notes"], f"traced through the unquantized modules that {option('quantized')} replaced (a quantized "
                            "linear "
            "or expert block computes the same shapes)"]})
    return traced


def run_steps(built: Built, record: ModelRecord, steps: Sequence[Callable[[], tuple[tuple, dict]]], *,
              run: PassRun = PassRun(), shared: dict[str, Any] | None = None) -> None:
    """Forwards of the model on meta one after another under one tracer, set up once (archviz.cost's decode steps
    at several context lengths, after a `trace_shapes` pass): each of `steps` returns its forward's (args, kwargs)
    and may swap what the callbacks report to; the block memo starts empty at each. Only ops, kernels and memo
    answers are reported (`run`'s callbacks; its `train` and `progress` are not used): no record is made. `shared`: a dict the caller passes to each run_steps of one model and
    record, in which this one leaves its tracer and memo for the next to take their module paths and block kinds
    from. Raises ShapeError where a forward fails."""
    from ..walk.spans import Spans

    if not steps:
        return
    with collector_paused(), built.unquantized() if built.unquantized is not None else nullcontext():
        # nothing is recorded: no call sites (a walk up the stack per module call), no calls (`only` empty), and a
        # memo answer copies nothing but still reports itself (`copied` None) to on_memo
        prior = shared or {}
        tracer = Tracer(built.model, Spans(built.display_roots).display, sites=False, only=frozenset(),
                        like=prior.get("tracer"))
        tracer.copied = None
        tracer.on_kernel = run.on_kernel
        tracer.on_memo = run.on_memo
        tracer.tensor_tag = run.tensor_tag
        args, kwargs = steps[0]()
        with pass_mode(built.model, False):
            experts, error = run_forward(built, record, tracer, (args, kwargs), built.stubs or stubs.StubRegistry(),
                                         ForwardRun(memo=run.memo, notes=[], observer=run.op_observer,
                                                    like=prior.get("memo")), steps=steps[1:])
        if shared is not None:
            shared.update(tracer=tracer, memo=experts or prior.get("memo"))
    if error is not None:
        where = tracer.stack[-1] if tracer.stack else "(model)"
        raise ShapeError(f"the meta forward pass failed in {where or 'the model'}: {type(error).__name__}: "
                         f"{str(error)[:300]}", hint=f"run with {option('debug')} for the traceback") from error


def _trace_shapes(built: Built, record: ModelRecord, sizes: tuple[int | None, int | None],
                  given: tuple[tuple[tuple, dict] | None, list[str] | None], run: PassRun) -> ModelRecord:
    """The pass (``trace_shapes``' parameters: `sizes` its (batch, seq), `given` its (inputs, input_specs))."""
    from ..walk.spans import Spans

    batch, seq = sizes
    inputs, input_specs = given
    on_kernel, memo, train, progress, op_observer, on_memo = (run.on_kernel, run.memo, run.train, run.progress,
                                                              run.op_observer, run.on_memo)

    fixed = fixed_context(built.model) if inputs is None and not input_specs else None
    B, T, clean = choose_dims(record, batch, fixed[0] if fixed else seq)
    spans = Spans(built.display_roots)
    tracer = Tracer(built.model, spans.display, flow=True)
    tracer.on_kernel = on_kernel
    gathers = tracer.policy.gathers = Gathers(tracer.paths, tracer.objects_by_id)

    def memo_answered(source: str, target: str) -> None:
        gathers.copy(source, target)
        if on_memo is not None:
            on_memo(source, target)

    tracer.on_memo = memo_answered
    tracer.tensor_tag = run.tensor_tag
    streams = further_streams(built, input_specs) if inputs is None else []  # text beside image tokens: T_txt
    input_specs = [*(input_specs or ()), *(spec for s in streams for _, spec in s.specs)] if streams else input_specs
    args, kwargs, user, used, notes = _pass_inputs(built, inputs, input_specs, B, T, streams)
    if fixed:
        notes.append(f"T = {fixed[0]:,}{f' (not the {seq:,} asked)' if seq and seq != fixed[0] else ''}: {fixed[1]}")
    _ready_for_the_pass(built, record, tracer, notes)
    registry = built.stubs or stubs.StubRegistry()
    ids = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor) and not v.dtype.is_floating_point]
    gathers.tokens = ids[0].numel() if ids else B * T  # the token ids' count ([B, T] or gpt-oss's [T])
    with pass_mode(built.model, train):
        experts, error, second = _passes(built, record, tracer, (args, kwargs), registry,
                                         PassGiven(B, T, used, user, input_specs, fixed_t=fixed is not None),
                                         ForwardRun(memo=memo, notes=notes, progress=progress, observer=op_observer),
                                         bool(used) and inputs is None)
    if error is not None:
        raise _pass_error(built, tracer, error, {**_by_name(built.model, args), **kwargs}, input_specs, train) \
            from error
    if progress is not None:
        progress(tracer.total, tracer.total)
    routed = set(tracer.policy.policy_sizes) - {B, T, B * T}
    namer = _CallNamer(tracer, second, (B, T, routed, used, second, {v: k for k, v in reversed(user.items())}))
    modules = weight_uses(_module_records(record, tracer, namer, second), spans)
    source = _source_after(record, spans, registry)
    notes.extend(_pass_notes(experts, second, used, inputs))
    shapes_info = {"B": B, "T": T, "used": sorted(used), **({"named": user} if user else {}),
                   **({"streams": {s.dim: s.note() for s in streams}} if streams else {}),
                   **({"fixed_T": True} if fixed else {}), "clean": clean,
                   "mode": "train" if train else "eval", "notes": notes, "routed_symbol": ROUTED,
                   "routed_sizes": sorted(routed),
                   "policy": "see archviz/shapes/trace.py: boolean tests hold; routing spreads B·T·k tokens evenly "
                             "over E experts (R = ceil(B·T·k/E))"}
    record, tables = adjust(dataclasses.replace(record, modules=tuple(modules), source=source), gathers)
    if tables:
        shapes_info["gathered"] = tables
    return record.with_extra("shapes", shapes_info)


def _pass_inputs(built: Built, inputs: tuple[tuple, dict] | None, input_specs: list[str] | None, B: int, T: int,
                 streams: list[Stream] | None = None) -> tuple[tuple, dict, dict[str, int], set[str], list[str]]:
    """The pass's (args, kwargs): the caller's ``inputs`` or the model's defaults, merged with ``inputs`` specs; the
    dims the user named ({name: size}); the symbols the inputs are sized by (only those name dims, and the pass line
    shows only those); and the notes begun (a default image batch, lists made up beside the token ids, the further
    sequences `streams` that take a length of their own: their specs are in `input_specs`)."""
    if inputs is not None:
        base = inputs
    else:
        try:
            base = default_inputs(built, B, T)
        except ShapeError:
            if not input_specs:
                raise
            base = ((), {})
    fill = default_sizes(built, input_specs, B, T)  # dims named without a size (x=B,3,H,W): the default's
    args, kwargs = merge_inputs(built.model, base, parse_inputs(input_specs, B, T, fill)[1]) if input_specs \
        else base
    user = named_sizes(input_specs, fill)  # dims the user named: {name: size}
    notes: list[str] = []
    if inputs is not None:
        return args, kwargs, user, {"B", "T"}, notes  # inputs made by the caller (the probe): sized by B and T
    defaults = input_tensors((*base[0], *base[1].values()))
    kept = any(v is d for d in defaults for v in input_tensors((*args, *kwargs.values())))
    records = records_first(built) if kept and inputs is None else None
    first = consumer_default(built) if kept and not records and (built.kind != "hf" or "pixel_values" in base[1]) \
        else None
    ids = {"T"} if built.tokens_1d else {"B", "T"}  # token ids [T] (gpt-oss, packed sequences) have no B
    extra = conditioning(built.model, B, T, built.config)[1] if built.kind != "hf" and first is not None else []
    used = ({"B"} | ({"T"} if "T" in first.dims or any("[B, T]" in e for e in extra) else set()) if first else
            {"B"} if records else ids if kept else set()) | spec_symbols(input_specs)
    if records is not None:
        notes.append(records_note(built.model, records))
    if first is not None:
        where = "pixel_values" if built.kind == "hf" else \
            f"the first argument of {forward_arguments(built.model) or 'forward'}"
        notes.append(f"default input: {first.what} [B, {', '.join(map(str, first.dims))}] (float32) from "
                     f"{first.where}, passed as {where}; {option('input')} NAME=... gives another")
        dims = {arg: s.dim for s in streams or () for arg, _ in s.specs}
        extra = [e.replace("[B, T", f"[B, {dims[e.partition('=')[0]]}", 1) if e.partition("=")[0] in dims else e
                 for e in extra]
        if extra:
            notes.append(f"default inputs beside it: {', '.join(extra)}; {option('input')} NAME=... gives others")
        notes.extend(s.note() for s in streams or ())
    if built.kind != "hf":  # seqlens: List[int] made up beside the token ids; a required bool given False
        given = {name for name, _, _ in check_input_specs(input_specs)}
        notes.extend(list_notes(built, kwargs, given))
        try:
            names = list(inspect.signature(built.model.forward).parameters)
        except (TypeError, ValueError):
            names = []
        plain = [s for s in scalar_defaults(built.model, set(names[:len(base[0])])) if s.name not in given and
                 type(kwargs.get(s.name)) is type(s.value) and kwargs[s.name] == s.value]
        notes.extend([scalar_note(built.model, plain)] if plain else [])
    return args, kwargs, user, used, notes


def _ready_for_the_pass(built: Built, record: ModelRecord, tracer: Tracer, notes: list[str]) -> None:
    """Tensors the build left on the CPU moved to meta, and transformers' experts set to an implementation meta
    runs; each noted."""
    moved = strays_to_meta(tracer.objects_by_id.values())
    if moved:
        notes.append(f"{moved:,} tensors the build left on the CPU (legacy constructors such as "
                     "torch.FloatTensor(...)) moved to meta for the pass")
    if built.kind == "hf" and hasattr(built.model, "set_experts_implementation"):
        # grouped_mm has no float32 meta kernel; batched_mm computes every expert for every token without a
        # data-dependent loop (shapes are the same; 2x faster than the eager loop on meta).
        for impl in ("batched_mm", "eager"):
            try:
                built.model.set_experts_implementation(impl)
                if record.summary.moe or impl != "batched_mm":  # every transformers model takes it; say it for MoE
                    notes.append(f"transformers experts traced with experts_implementation={impl!r}")
                break
            except Exception:  # noqa: BLE001 - models without fused experts refuse; nothing to change then
                continue


def _pass_error(built: Built, tracer: Tracer, error: BaseException, kwargs: dict, input_specs: list[str] | None,
                train: bool) -> ShapeError:
    """The one line for a pass that failed: where, the user's frame, the error, and what to do."""
    where = tracer.stack[-1] if tracer.stack else "(model)"
    frame = _user_frame(error)
    return ShapeError(f"the meta forward pass failed in {where or 'the model'}"
                      f"{' at ' + frame if frame else ''}: {type(error).__name__}: {str(error)[:300]}",
                      hint=(train and "when training" in str(error) and
                            f"the pass ran in training mode ({option('train')}): drop {option('train')} to trace eval "
                            "mode, or give inputs whose batch statistics exist (a batch above 1)") or
                      missing_input_hint(built, kwargs, error) or
                      (_died_on_none(error) and not_given_hint(built.model, where, kwargs)) or
                      none_hint(error, built) or
                      _dtype_hint(built, error) or
                      f"give a missing forward input with {option('input')} name=B,T (repeatable)" +
                      (_arguments_hint(built, input_specs) or "") + f", run with {option('debug')} for the traceback")


def _by_name(model: Any, args: tuple) -> dict[str, Any]:
    """The positional inputs of the pass by the forward's parameter names (none for `*args`)."""
    try:
        params = [p for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return {}
    return {p.name: a for p, a in zip(params, args)}


def _died_on_none(error: BaseException) -> bool:
    return isinstance(error, (TypeError, AttributeError)) and "NoneType" in str(error)


# What torch says when two operands of one op differ in dtype (matmul, addmm, index_put, sdpa...).
_MIXED_DTYPES = re.compile(r"expected scalar type \S+ but found|to have the same dtype|same dtype, but got|"
                           r"dtype mismatch|must have the same dtype")


def _dtype_hint(built: Built, error: BaseException) -> str | None:
    """For a pass that died on two dtypes meeting in one op, in a model built in a 16-bit dtype (some of its weights
    at least): its code makes tensors of its own in float32 (states, positions, `torch.FloatTensor` weights) and
    multiplies them with the 16-bit ones, which torch refuses
    on any device (transformers' xLSTM without its cache, XLNet's relative positions): the fix is to build it in
    float32."""
    if not isinstance(error, RuntimeError) or not _MIXED_DTYPES.search(str(error)):
        return None
    dtype = next((p.dtype for p in built.model.parameters() if p.dtype in (torch.bfloat16, torch.float16)), None)
    if dtype is None:
        return None
    name = str(dtype).removeprefix("torch.")
    return (f"the model's code mixes its own float32 tensors with the {name} it was built in, which torch refuses on "
            f"any device: {FLOAT32_FIX}")


class _CallNamer:
    """The pass's raw call entries as ``Call`` records with named dims: each (shape, the second pass's shape) named
    once by evidence (``evidence`` holds ``named_by_evidence``'s B, T, routed sizes, used symbols, second pass and
    user sizes by size), identical calls (every expert, every norm) sharing one record."""

    def __init__(self, tracer: Tracer, second: Second | str | None, evidence: tuple) -> None:
        self.tracer, self.second, self.evidence = tracer, second, evidence
        self.named: dict[tuple, tuple] = {}
        self.made: dict[tuple, Call] = {}
        # The memo copies a call entry as it is to every block it answers: a pair of entries (this pass's, the
        # second's) is one Call, found by the entries' ids (tracer.calls and second.calls keep them) before their
        # shapes are keyed.
        self.by_entries: dict[tuple[int, int], Call] = {}

    def dims(self, shape: tuple, other: tuple | None) -> tuple:
        hit = self.named.get((shape, other))
        if hit is None:
            hit = self.named[(shape, other)] = named_by_evidence(shape, other, *self.evidence)
        return hit

    def call(self, ins: tuple, outs: tuple, other: tuple | None) -> Call:
        key = (ins, outs, other)
        c = self.made.get(key)
        if c is None:
            ins2, outs2 = other if other is not None and len(other[0]) == len(ins) and \
                len(other[1]) == len(outs) else ((None,) * len(ins), (None,) * len(outs))
            dims = self.dims
            c = self.made[key] = Call(inputs=tuple(dims(s, o and o[0]) for (s, _), o in zip(ins, ins2)),
                                      outputs=tuple(dims(s, o and o[0]) for (s, _), o in zip(outs, outs2)),
                                      input_dtypes=tuple(d for _, d in ins), output_dtypes=tuple(d for _, d in outs))
        return c

    def calls_at(self, path: str) -> tuple[Call, ...]:
        first = self.tracer.calls.get(path)
        if not first:
            return ()
        other = self.second.calls_of(path) if isinstance(self.second, Second) else ()
        if len(other) != len(first):  # no evidence for this module: its calls differ between the passes
            other = (None,) * len(first)
        out = []
        by_entries = self.by_entries
        for entry, o in zip(first, other):
            c = by_entries.get((id(entry), id(o)))
            if c is None:
                ins, outs = entry
                c = by_entries[(id(entry), id(o))] = self.call(tuple(ins), tuple(outs),
                                                                None if o is None else (tuple(o[0]), tuple(o[1])))
            out.append(c)
        return tuple(out)


def _module_records(record: ModelRecord, tracer: Tracer, namer: _CallNamer, second: Second | str | None
                    ) -> list[ModuleRecord]:
    """Every module's record with its calls, call sites, assumptions, kernels and flow from the pass."""
    modules = []
    site_of: dict[tuple, CallSite] = {}
    calls_of: dict[str, tuple] = {m.path: namer.calls_at(m.path) for m in record.modules}
    # A flow's shapes take the names its module's and children's calls have for the same raw shape (named by the
    # second pass's evidence); a shape no call has (an op's own) is named by value.
    flow_of = _flows(tracer.flows, calls_of, tracer.calls, namer.dims,
                     second.flow_of if isinstance(second, Second) else lambda path: None)
    flow_field = [f.name for f in dataclasses.fields(ModuleRecord)].index("flow")
    for m in record.modules:
        path = m.path
        calls = calls_of[path]
        sites = []
        for s in tracer.sites.get(path, ()):
            cs = site_of.get(s)
            if cs is None:
                cs = site_of[s] = CallSite(*s)
            sites.append(cs)
        fields = list(ALL_FIELDS(m))  # dataclasses.replace, without its per-call introspection
        fields[CALLS_FIELD:CALLS_FIELD + 5] = (calls, tuple(sites), bool(calls) or path in tracer.calls,
                                     tuple(tracer.assumptions.get(path, ())), tuple(tracer.kernels.get(path, ())))
        fields[flow_field] = flow_of(path)
        modules.append(ModuleRecord(*fields))
    return modules


def _source_after(record: ModelRecord, spans: Any, registry: stubs.StubRegistry) -> Any:
    """The record's source with the files the pass ran through and the imports it stubbed."""
    files = dict(record.source.files)
    files.update(spans.files)
    stubbed = tuple(sorted(set(record.source.stubbed_imports) | set(registry.taken())))
    return dataclasses.replace(record.source, files=tuple(sorted(files.items())), stubbed_imports=stubbed,
                               file_facts=file_facts(files, dict(record.source.file_facts)))


def _pass_notes(experts: BlockMemo | None, second: Second | str | None, used: set[str],
                inputs: tuple[tuple, dict] | None) -> list[str]:
    """What the pass notes last: blocks the memo answered, and how the dims were named."""
    notes = []
    if experts is not None and experts.hits:
        notes.append(f"{experts.hits:,} call{'' if experts.hits == 1 else 's'} of repeated blocks (layers, MoE blocks, "
                     "experts) answered from an identical one's shapes (taken as pure functions of their input shapes)")
    if experts is not None and experts.unkeyed:
        n, why = len(experts.unkeyed), sorted(set(experts.unkeyed.values()))
        notes.append(f"{n:,} repeated block{'' if n == 1 else 's'} run every time, none answered from an identical "
                     f"one: {'its' if n == 1 else 'their'} code reads what no memo key holds ({'; '.join(why[:3])}"
                     f"{'; ...' if len(why) > 3 else ''})")
    if isinstance(second, Second):
        notes.append(f"dims named by evidence: a second pass at {second.sizes_text()} kept a name only where the "
                     "dim followed the input")
    elif second == "nothing":
        notes.append("no dim of the pass has the size of an input dim: none named, and no second pass")
    elif used and inputs is None:
        notes.append("dims named by value (B, T equal to a dim): the second pass for evidence could not run")
    return notes


def _passes(built: Built, record: ModelRecord, tracer: Tracer, inputs: tuple[tuple, dict],
            registry: stubs.StubRegistry, given: PassGiven, run: ForwardRun,
            evidence: bool) -> tuple[BlockMemo | None, BaseException | None, "Second | str | None"]:
    """The pass, then the second pass for the names' evidence (see evidence.py), in the mode set once for both:
    (the memo, the first pass's error, the second pass -- "nothing" where no dim could take a name, None where it
    could not run). An observed pass (cost) runs once: the second would run the observer's hooks again."""
    experts, error = run_forward(built, record, tracer, inputs, registry, run)
    if error is not None or not evidence or run.observer is not None:
        return experts, error, None
    only = concerned(tracer.calls, symbol_values(given.B, given.T, given.used, given.user),
                     symbol_multiples(given.B, given.T, given.used))
    if not only:
        return experts, None, "nothing"
    return experts, None, second_pass(built, record, tracer, experts, given, registry, run.memo, only)


def _flows(raw: dict[str, tuple], calls_of: dict[str, tuple], raw_calls: dict[str, list],
           by_value: Callable[[tuple, tuple | None], tuple],
           other_of: Callable[[str], tuple | None]) -> Callable[[str], Flow | None]:
    """path -> its Flow (archviz.shapes.flow's raw steps with named shapes); identical flows (every layer of a kind)
    share one record. An op's shape no call has is named by value, with the second pass's same step (`other_of`,
    where its steps are the same) as evidence: [B·32, T, T], not [224, T, T]."""
    made: dict[tuple, Flow] = {}
    keep: list[tuple] = []

    def flow_of(path: str) -> Flow | None:
        got = raw.get(path)
        if got is None:
            return None
        steps, outputs, truncated, functions, *arg_names = got
        prefix = f"{path}." if path else ""
        paths = (path, *(prefix + name for kind, name, *_ in steps if kind == "call" and not name.startswith("/")))
        # memo answers share the raw flow and the Call records: the same pair is the same Flow
        other = other_of(path)
        key = (id(got), tuple(id(c) for p in paths for c in calls_of.get(p, ())), id(other))
        hit = made.get(key)
        if hit is None:
            names: dict[tuple, tuple] = {}
            for p in paths:
                for (ins, outs), c in zip(raw_calls.get(p, ()), calls_of.get(p, ())):
                    for (s, _), named in zip((*ins, *outs), (*c.inputs, *c.outputs)):
                        names.setdefault(s, named)
            others = other[0] if other is not None and len(other[0]) == len(steps) and \
                all(a[:2] == b[:2] and len(a[2]) == len(b[2]) for a, b in zip(steps, other[0])) else None
            hit = made[key] = Flow(tuple(FlowStep(kind, name, tuple(
                names.get(s) or by_value(s, others[k][2][i] if others is not None else None)
                for i, s in enumerate(shapes)), ins, count, fn)
                for k, (kind, name, shapes, ins, count, fn) in enumerate(steps)),
                                   outputs, truncated, arg_names[0] if arg_names else (),
                                   tuple(FlowFunction(*f) for f in functions))
            keep.append((got, other))  # the ids in the key stay these tuples
        return hit

    return flow_of


def _arguments_hint(built: Built, input_specs: list[str] | None) -> str | None:
    """For a factory or reference model run on the default token ids: its forward's arguments, and what inputs
    each tensor needs."""
    if built.kind == "hf" or input_specs:
        return None
    args = forward_arguments(built.model)
    if args is None:
        return None
    structured = structured_forms(built.model)
    first = consumer_default(built)
    fed = f"{first.what} [B, {', '.join(map(str, first.dims))}]" if first is not None else "token ids [B, T]"
    return (f"; the pass fed {fed} to {args}: give each tensor argument as NAME=dims[:dtype] (dims "
            "are ints, B, T; e.g. an image NAME=B,3,224,224, features NAME=B,T,64:float32)" +
            (f"; {structured}" if structured else ""))


def _user_frame(e: BaseException) -> str | None:
    import traceback

    hit = None
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        fn = frame.f_code.co_filename
        if not fn.startswith(TORCH_DIR) and not fn.startswith(ARCHVIZ_DIR):
            hit = f"{os.path.basename(fn)}:{lineno}"
    return hit


__all__ = ["trace_shapes", "run_steps"]

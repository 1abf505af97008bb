"""`archviz cost`: build the model on meta, run the prefill pass at (B, T) and a decode step at context L with the
FLOPs counter and activation tracker on, read the KV cache the code keeps, and attach it all to the records
(`extras["cost"]`, JSON-able, read by archviz.cost.report and the renderers).

Decode at context L: a reference model runs `forward(tokens[B, 1], start_pos=L)`, built with `max_seq_len` and
`max_batch_size` large enough (its caches are meta buffers: no memory, whatever L); a transformers model runs
`forward(input_ids[B, 1], past_key_values=cache, use_cache=True)` with the cache its own code filled on meta in a
short prefill, each layer's tensors then stretched to L tokens along the dims that grew between two prefills. Meta
shapes cost the same at L = 1M as at L = 128: nothing here loops over positions.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from ..errors import ArchvizError, ShapeError, option
from ..sources.options import BuildOptions
from .flops import FlopCounter, exact_routing, module_paths
from .kv import attribute_entries, cache_entries, reference_entries, step_arguments, stretch
from .built_limits import KEPT, built_with_limits, distinct, file_config
from .activations import ActivationPeak
from .curve import curve_contexts, decoded_at, max_positions, point
from .position_limit import model_limit
from .options import CostOptions

CONTEXT_DEFAULT = 1 << 20
SEQ_DEFAULT = 4096


def _lengths(context: int | None, contexts: Sequence[int]) -> tuple[int, list[int]]:
    """(the decode step's context: `context`, else the longest of `contexts`; the other lengths, ascending)."""
    if context is None:
        context = max(contexts) if contexts else CONTEXT_DEFAULT
    return context, sorted({int(L) for L in contexts if int(L) != context and int(L) >= 0})




def _pass(built: Any, record: Any, *, batch: int | None = None, seq: int | None = None, memo: bool = True,
          peak: bool = False, paths: dict[int, str] | None = None,
          input_specs: list[str] | None = None) -> tuple[Any, FlopCounter, ActivationPeak | None]:
    from ..shapes import PassRun, trace_shapes

    fc = FlopCounter(built.model, paths)
    act = ActivationPeak() if peak else None

    def observe(func: Any, args: tuple, kwargs: dict, out: Any, path: str) -> None:
        fc.observe(func, args, kwargs, out, path)
        if act is not None:
            act.observe(func, args, kwargs, out, path)

    with fc:
        traced = trace_shapes(built, record, batch=batch, seq=seq, input_specs=input_specs,
                              run=PassRun(memo=memo, op_observer=observe, on_kernel=fc.kernel, on_memo=fc.memo,
                                          tensor_tag=fc.masks.tag))
    return traced, fc, act


def _steps(built: Any, record: Any, steps: list[tuple[int, Callable[[], tuple[tuple, dict]]]], memo: bool,
           paths: dict[int, str], shared: dict[str, Any] | None = None) -> dict[int, FlopCounter]:
    """Decode steps one after another under one tracer (`run_steps`), each counted by its own FlopCounter
    (`shared`: run_steps')."""
    from ..shapes import PassRun, run_steps

    counters: dict[int, FlopCounter] = {}
    current: list[FlopCounter] = []

    def step(L: int, inputs: Callable[[], tuple[tuple, dict]]) -> Callable[[], tuple[tuple, dict]]:
        def start() -> tuple[tuple, dict]:
            if current:
                current.pop().remove()
            fc = counters[L] = FlopCounter(built.model, paths)
            fc.install()
            current.append(fc)
            return inputs()
        return start

    try:
        run_steps(built, record, [step(L, f) for L, f in steps], shared=shared, run=PassRun(
            memo=memo, op_observer=lambda *a: current[-1].observe(*a), on_kernel=lambda *a: current[-1].kernel(*a),
            on_memo=lambda source, target: current[-1].memo(source, target),
            tensor_tag=lambda t: current[-1].masks.tag(t)))
    finally:
        while current:
            current.pop().remove()
    return counters


def _flops_json(fc: FlopCounter, record: Any, batch: int, tokens: int, start: int) -> dict[str, Any]:
    flops, calls, unknown = fc.by_path()
    flops, notes = exact_routing(flops, fc.rows(), record, batch * tokens)
    masked = fc.masked()
    return {"B": batch, "T": tokens, "start": start, "flops": flops, "calls": calls,
            "unknown": {p: list(w) for p, w in unknown.items()}, "unknown_calls": fc.unknown_calls(),
            "notes": [*notes, *fc.notes],
            "attended_flops": sum(flops.values()) - sum(masked.values()), "masked_flops": masked,
            "mixing_flops": {p: min(n, flops[p]) for p, n in fc.mixing().items() if flops.get(p)}}


def _layer_kinds(record: Any) -> tuple[str | None, dict[int, str]]:
    layers = (record.extra("grouping") or {}).get("layers") or {}
    kinds: dict[int, str] = {}
    for k in layers.get("kinds", ()):
        for n in k.get("layers", ()):
            if isinstance(n, int):
                kinds[n] = k["name"]
    return layers.get("path"), kinds


def measure(source: str, build: BuildOptions = BuildOptions(), options: CostOptions = CostOptions(), *,
            progress: Callable[[str], None] | None = None) -> Any:
    """The records of SOURCE (shapes from the prefill pass, grouped) with `extras["cost"]` filled; `contexts`: more
    lengths a decode step runs at, summed to `extras["cost"]["curve"]` (archviz.cost.curve), the step at `context`
    kept whole; "auto": the standard lengths up to the config's max positions (context None: the longest). `seq`,
    `context` not given: SEQ_DEFAULT, CONTEXT_DEFAULT, or the model's own limit where shorter (nanoGPT's block_size),
    noted. `inputs`: input specs for the prefill pass. Built as `build` says, with the runtime limits of its caches."""
    from ..group import group
    from ..sources.dispatch import classify
    from ..walk import walk

    batch, seq, context, every_block = options.batch, options.seq, options.context, options.every_block
    contexts, input_specs = options.contexts, list(options.inputs) or None
    config, seq_given = build.config, seq
    seq = SEQ_DEFAULT if seq is None else seq
    if batch < 1 or seq < 1 or (context is not None and context < 0):
        raise ArchvizError(f"{option('batch')} {batch}, {option('seq')} {seq}, {option('context')} {context}: batch "
                           "and seq must be ≥ 1, context ≥ 0",
                           hint=f"e.g. {option('batch')} 1 {option('seq')} 4096 {option('context')} 1M")
    say, overrides, given, kind = progress or (lambda text: None), dict(build.overrides), context, classify(source, build)
    auto = contexts == "auto"
    if auto and kind == "reference":  # its caches are sized by the longest length: known before the build
        contexts = curve_contexts(max_positions({**file_config(config), **overrides}))
    context, more = _lengths(context, () if isinstance(contexts, str) else contexts)
    notes: list[str] = []
    say(f"building {source} on meta")
    built, limits, taken, setup = built_with_limits(source, build, kind, (context, *more), (batch, seq))
    say("walking modules")
    record = walk(built)
    if auto and kind != "reference":  # the config as built, its defaults filled
        context, more = _lengths(None if given is None else context,
                                 curve_contexts(max_positions(record.source.config)))
    limit = model_limit(_without_bag_limits(dict(record.source.config), built.model, limits), built.model)
    if limit is not None and not input_specs and seq > limit[0]:
        notes.append(f"prefill at T = {limit[0]:,}, the longest sequence the model takes ({limit[1]}); " +
                     (f"{option('seq')} sets another" if seq_given is None else f"not at the {seq_given:,} asked"))
        seq = limit[0]
    if limit is not None and given is None and not auto and context > limit[0]:
        notes.append(f"decode and KV cache at context {limit[0]:,}, the model's limit ({limit[1]}); "
                     f"{option('context')} sets another")
        context = limit[0]

    say(f"prefill pass at B={batch}, T={seq:,}")
    paths = module_paths(built.model)
    from ..shapes.token_rank import decide_rank, may_take_1d

    def prefill() -> tuple[Any, FlopCounter, ActivationPeak | None]:  # fresh counters each try
        return _pass(built, record, batch=batch, seq=seq, memo=not every_block, peak=True, paths=paths,
                     input_specs=input_specs)

    if may_take_1d(built, None, input_specs):
        (traced, fc, act), note = decide_rank(built, prefill)
        notes.extend([note] if note else [])
    else:
        traced, fc, act = prefill()
    from ..shapes.unit import pass_unit

    unit = pass_unit(built, traced, input_specs, batch, seq)  # an image, a denoising step...: no decode
    notes.extend((traced.extra("shapes") or {}).get("streams", {}).values())  # text beside image tokens: T_txt
    prefill = _flops_json(fc, traced, batch, 1 if unit else seq, 0)
    traced = group(traced)
    layer_list, kinds = _layer_kinds(traced)

    run = _Prefilled(built, record, traced, paths, layer_list, not every_block, limit and limit[0],
                     tuple(options.inputs))
    if unit is not None:  # an image, a denoising step...: no tokens to decode, no cache
        decode, kv, curve = None, {"entries": [], "source": None}, []
        notes.append(_no_decode(run, unit, seq))
    else:
        decode, kv, curve = _decode(run, batch, (context, *more), limits, taken, say, notes)
    context = context if decode is None else min(context, decoded_at(decode))  # a step at the model's limit
    if decode is not None and more:
        curve = sorted([*curve, point(decode, layer_list)], key=lambda p: p["L"])
    cost = {"batch": batch, "seq": seq, "context": context, "prefill": prefill, "decode": decode, "kv": kv,
            **({"curve": curve} if curve else {}), "notes": (setup.notes(kv) if unit is None else []) + notes,
            "layer_list": layer_list, "layer_kinds": {str(k): v for k, v in sorted(kinds.items())},
            "activation_peak": act.peak if act is not None else None, **({"unit": unit} if unit else {})}
    return traced.with_extra("cost", cost)


def _without_bag_limits(config: dict[str, Any], model: Any, limits: tuple[int, int] | None) -> dict[str, Any]:
    """`config` less the runtime limits the build gave that the model's config object holds only as attributes of
    its own (an attribute bag takes any key; a config class declaring `max_seq_len` is sized by it): never the
    model's limit."""
    held = next((c for c in (getattr(model, a, None) for a in ("args", "config", "params")) if c is not None), None)
    added = {} if held is None or not limits else \
        {k: v for k, v in zip(("max_batch_size", "max_seq_len"), limits) if not hasattr(type(held), k)}
    return {k: v for k, v in config.items() if added.get(k) != v}


def _no_decode(run: "_Prefilled", unit: dict[str, str], seq: int) -> str:
    """What a pass with a unit other than the token is: one image, one denoising step (over T where it has one)."""
    shapes = run.traced.extra("shapes") or {}
    uses_t, named = "T" in shapes.get("used", ()), shapes.get("named", {})
    if shapes.get("fixed_T"):  # the one length the model takes (a fixed context)
        sizes, sets = [f"T = {shapes['T']:,} positions, the one length it takes"], []
    else:
        sizes = [f"T = {seq:,} positions"] * uses_t
        sets = [f"{option('seq')} sets T"] * uses_t
    sizes += [f"{name} = {n:,}" for name, n in named.items()]
    sets += [f"{option('input')} sets {', '.join(named)}"] * bool(named)
    said = f" ({', '.join(sets)})" if sets else ""
    over = f" over {' and '.join(sizes)}{said}" if sizes else ""
    return f"one pass of {type(run.built.model).__name__} is one {unit['name']}{over}: no decode step"


@dataclass(frozen=True)
class _Prefilled:
    """What the decode steps read of the build and the prefill pass."""

    built: Any
    record: Any  # the walk's records
    traced: Any  # after the prefill pass, grouped
    paths: dict[int, str]
    layer_list: str | None
    memo: bool
    limit: int | None = None  # the longest sequence the model takes (`model_limit`)
    inputs: tuple[str, ...] = ()  # the prefill's input specs


def _decode(run: _Prefilled, batch: int, lengths: tuple[int, ...], limits: tuple[int, int] | None, taken: set[int],
            say: Callable[[str], None], notes: list[str]) -> tuple[dict[str, Any] | None, dict[str, Any], list]:
    """(the decode step at lengths[0], the KV cache entries, the curve's points at the other lengths): a reference
    model's steps at start_pos L, a transformers model's with its own cache; none for a factory (said in `notes`)."""
    built, traced, layer_list = run.built, run.traced, run.layer_list
    context, more = lengths[0], list(lengths[1:])
    decode: dict[str, Any] | None = None
    curve: list[dict[str, Any]] = []
    kv: dict[str, Any] = {"entries": [], "source": None}
    ids = torch.zeros((batch, 1), dtype=torch.long, device="meta")
    if built.kind == "reference" or limits is not None:
        entries = reference_entries(traced, *limits, layer_list, taken) if limits else []
        kept = attribute_entries(built.model, run.paths, *limits, layer_list, taken) if limits else []
        kv = {"source": KEPT + (" and tensor attributes" if kept else ""), "entries": entries + kept}
        stepping = step_arguments(built.model, batch)
        if stepping is not None:
            at, how = stepping
            context = context if how is None else _within_limit(run, context, notes)
            say(f"decode step{'s' if more else ''} at context {', '.join(f'{L:,}' for L in [context, *more])}")
            try:  # one tracer for every length (a meta buffer's slots cost nothing, whatever L)
                counters = _steps(built, run.record, [(L, lambda L=L: ((ids,), at(L))) for L in [context, *more]],
                                  run.memo, run.paths)
                decode = _flops_json(counters[context], traced, batch, 1, context)
                curve = [point(_flops_json(counters[L], traced, batch, 1, L), layer_list) for L in more]
                notes.extend([f"decode step at context L: {how}"] if how else [])
            except ShapeError as e:
                notes.append(f"no decode step: {e.line()}")
        else:
            decode, kv = _object_or_recompute(run, batch, context, kv, notes)
    elif built.kind == "hf":
        try:
            decode, kv, curve = _hf_decode(run, batch, (context, *more), say)
        except ShapeError as e:
            notes.append(f"no decode step: {e.line()}")
    else:
        decode, kv = _object_or_recompute(run, batch, context, kv, notes)
    return decode, kv, curve


def _object_or_recompute(run: _Prefilled, batch: int, context: int, kv: dict[str, Any], notes: list[str]
                         ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The decode step with the cache object the forward takes, made as its generate makes it; else the whole
    sequence rerun (`_recompute`)."""
    context = _within_limit(run, context, notes)
    made = _kept(lambda: _object_decode(run, batch, context, notes), notes) or \
        _kept(lambda: _fed_back_decode(run, batch, context, notes), notes) or _hooked_decode(run, batch, context, notes)
    if made is not None:
        return made
    return _recompute(run, batch, context, notes), kv if kv["entries"] else {"entries": [], "source": None}


def _kept(steps: Callable[[], Any], notes: list[str]) -> Any:
    """`steps()` (a cache's construction, fill and decode step) with the small integer tensors of the code's
    bookkeeping keeping their values (`sources.kept_values`: how full a cache is, kept in a tensor, decides the keys
    a step attends over); where the code read them, said in `notes`."""
    from ..sources.kept_values import values_kept

    with values_kept() as kept:
        made = steps()
    if made is not None and kept.items:
        read = [item.split(" answered with")[0] for item in kept.items]
        notes.append("the small integer tensors of its bookkeeping kept their values (on the CPU, beside meta), so "
                     f"the code read what a device holds: {'; '.join(read[:3])}{'; ...' if len(read) > 3 else ''}")
    return made


def _within_limit(run: _Prefilled, context: int, notes: list[str]) -> int:
    """The context a decode step runs at: its new token must fit the model's positions (said in `notes`)."""
    if run.limit is None or context + 1 <= run.limit:
        return context
    notes.append(f"decode step at context {run.limit - 1:,}: its new token is the last of the {run.limit:,} "
                 "positions the model takes")
    return run.limit - 1


def _object_decode(run: _Prefilled, batch: int, context: int, notes: list[str]
                   ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A decode step at `context` with the cache object of the forward (`cache_object`): made on meta with room
    for context + 1 tokens as the code's generate makes it, filled by a prefill of `context` tokens on meta, then
    one token counted; its KV entries from the tensors it holds (a dim that grows with its room: a slot a token).
    None where the forward takes no such object or it cannot be made (said in `notes`)."""
    from ..shapes.inputs import default_inputs
    from .cache_object import cache_tensors, find_recipe, held_entries, make_cache

    built = run.built
    recipe = find_recipe(built.model, tuple(built.roots or ()))
    if recipe is None:
        return None
    what = f"{type(built.model).__name__}.forward's {recipe.argument} ({recipe.cls.__name__})"
    try:
        cache, used = make_cache(recipe, built.model, batch, context + 1)
        larger, _ = make_cache(recipe, built.model, batch, context + 2)
    except ValueError as e:
        notes.append(f"{what}: its generate makes it at {recipe.where}, but archviz cannot make {e}")
        return None
    except Exception as e:  # noqa: BLE001 - the model's own cache code
        notes.append(f"{what}: made as its generate does ({recipe.where}), it raised {type(e).__name__}: "
                     f"{str(e)[:160]}")
        return None

    def inputs(T: int, made: Any, offset: int | None = None) -> Callable[[], tuple[tuple, dict]]:
        def start() -> tuple[tuple, dict]:
            for name in recipe.sets if offset is not None else ():  # what generate sets on it before a step
                if isinstance(getattr(made, name, None), int) and not isinstance(getattr(made, name), bool):
                    setattr(made, name, offset)
            a, k = default_inputs(built, batch, T)
            return a, {**k, recipe.argument: made}
        return start

    try:  # a fill (uncounted: key -1, -2) and one token, at context and at context + 1 (the second cache's room)
        counters = _steps(built, run.record, [(-1, inputs(context, cache)), (context, inputs(1, cache, context)),
                                              (-2, inputs(context + 1, larger)),
                                              (context + 1, inputs(1, larger, context + 1))],
                          run.memo, run.paths)
    except ShapeError as e:
        notes.append(f"{what}: made as its generate does ({recipe.where}), the decode step failed: {e.line()}")
        return None
    batch_value = next((v for k, v in used.items() if "batch" in k.lower() and isinstance(v, int)), None)
    entries = held_entries(what, _grew(counters, context), (cache_tensors(cache), cache_tensors(larger), batch_value),
                           notes)
    made = ", ".join(f"{k}={v if not isinstance(v, torch.dtype) else str(v).replace('torch.', '')}"
                     for k, v in used.items())
    notes.append(f"{what} made as its generate makes it ({recipe.where}): {recipe.cls.__name__}({made}), room for "
                 f"context + 1 tokens, on meta; then {', '.join(f'.{m}()' for m, _ in recipe.then) or 'nothing'} "
                 f"as generate calls{''.join(f', .{a} = {context:,}' for a in recipe.sets)}; filled by a prefill of "
                 f"{context:,} tokens, then one token counted")
    kv = {"source": f"{recipe.cls.__name__} made as at {recipe.where}", "entries": entries}
    return _flops_json(counters[context], run.traced, batch, 1, context), kv


def _grew(counters: dict[int, FlopCounter], context: int) -> bool:
    """The step at context + 1 counted more FLOPs than the one at context."""
    return sum(counters[context].by_path()[0].values()) != sum(counters[context + 1].by_path()[0].values())


def _fed_back_decode(run: _Prefilled, batch: int, context: int, notes: list[str]
                     ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A decode step of a model whose forward returns its state and takes it back (`fed_back_argument`: `logits,
    state = forward(token, state)` in the code's generate loop): a fill of `context` tokens given none, then one
    token given the state the fill returned, counted (and the same at context + 1). None where the code has no such
    loop or the step fails (said in `notes`)."""
    from types import SimpleNamespace

    from ..shapes.inputs import default_inputs
    from .cache_object import cache_tensors, fed_back_argument, held_entries

    found = fed_back_argument(run.built.model)
    if found is None:
        return None
    argument, index, where = found
    outs: list[Any] = []

    def inputs(T: int, given: int | None) -> Callable[[], tuple[tuple, dict]]:
        def start() -> tuple[tuple, dict]:
            a, k = default_inputs(run.built, batch, T)
            if given is not None and not (isinstance(outs[given], (tuple, list)) and len(outs[given]) > index):
                raise ValueError(f"the forward returned no item {index} to feed back as {argument}")
            return a, {**k, argument: None if given is None else outs[given][index]}
        return start

    what = f"{type(run.built.model).__name__}.forward's {argument} (returned by it and fed back, {where})"
    handle = run.built.model.register_forward_hook(lambda m, a, out: outs.append(out))
    try:
        counters = _steps(run.built, run.record, [(-1, inputs(context, None)), (context, inputs(1, 0)),
                                                  (-2, inputs(context + 1, None)), (context + 1, inputs(1, 2))],
                          run.memo, run.paths)
    except ShapeError as e:
        notes.append(f"{what}: the decode step failed: {e.line()}")
        return None
    finally:
        handle.remove()
    held = [cache_tensors(SimpleNamespace(**{argument: outs[i][index]})) for i in (0, 2)]
    entries = held_entries(what, _grew(counters, context), (*held, batch), notes)
    notes.append(f"{what}: a prefill of {context:,} tokens given none, then one token given the {argument} it "
                 "returned, counted")
    return _flops_json(counters[context], run.traced, batch, 1, context), {
        "source": f"{argument} returned by forward", "entries": entries}


def _hooked_decode(run: _Prefilled, batch: int, context: int, notes: list[str]
                   ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A decode step of a model whose submodule's forward takes a cache that a method of the model fills through
    forward hooks (`hooked_cache`: whisper's `install_kv_cache_hooks`, the decoder's `kv_cache`), run as the code's
    decoding runs it: that submodule alone, its other inputs as the prefill pass gave them, on a fill of `context`
    tokens, then one token counted; the hooks removed after. None where the model has no such method."""
    from .cache_object import hooked_cache, hooked_entries

    built = run.built
    found = hooked_cache(built.model)
    if found is None:
        return None
    method, sub_path, argument = found
    sub = built.model.get_submodule(sub_path)
    call = next((m.calls[0] for m in run.traced.modules if m.path == sub_path and m.calls), None)
    if call is None or not call.inputs or (call.input_dtypes[:1] or ("",))[0] not in ("int64", "int32"):
        return None  # its first input is not token ids
    others = [torch.zeros([batch if d == "B" else d for d in shape], device="meta",
                          dtype=getattr(torch, (call.input_dtypes[k + 1:k + 2] or ("float32",))[0], torch.float32))
              for k, shape in enumerate(call.inputs[1:]) if all(isinstance(d, int) or d == "B" for d in shape)]
    caches: list[Any] = []
    current: dict[str, Any] = {}

    def make() -> None:
        for h in caches[-1][1] if caches else ():  # one cache's hooks at a time: each returns its output
            getattr(h, "remove", lambda: None)()
        with torch.device("meta"):
            made = getattr(built.model, method)()
        cache, hooks = (made[0], made[1:]) if isinstance(made, tuple) and made else (made, ())
        caches.append((cache, [h for group in hooks for h in (group if isinstance(group, list) else [group])]))

    try:  # the method must hand back the dict its hooks fill
        make()
    except Exception as e:  # noqa: BLE001 - the model's own code
        notes.append(f"{type(built.model).__name__}.{method}() raised {type(e).__name__} on meta: no decode step "
                     "with its cache")
        return None
    for h in caches[0][1]:
        getattr(h, "remove", lambda: None)()
    if not isinstance(caches.pop()[0], dict):
        return None

    def inputs(T: int, fresh: bool) -> Callable[[], tuple[tuple, dict]]:
        def start() -> tuple[tuple, dict]:
            if fresh:
                make()
            current["cache"] = caches[-1][0]
            return (torch.zeros((batch, T), dtype=torch.long, device="meta"),), {}
        return start

    built.model.forward = lambda tokens: sub(tokens, *others, **{argument: current["cache"]})
    try:
        shorter = max(context - 1, 1)  # a second fill, one token shorter: the cache's slots and FLOPs grow
        counters = _steps(built, run.record, [(-1, inputs(shorter, True)), (shorter, inputs(1, False)),
                                              (-2, inputs(context, True)), (context, inputs(1, False))],
                          False, run.paths)
    except ShapeError as e:
        notes.append(f"{type(built.model).__name__}.{method}() made {sub_path}.forward's {argument}, but the decode "
                     f"step with it failed: {e.line()}")
        return None
    finally:
        del built.model.forward
        for _, hooks in caches:
            for h in hooks:
                getattr(h, "remove", lambda: None)()
    if sum(counters[context].by_path()[0].values()) == sum(counters[shorter].by_path()[0].values()):
        notes.append(f"{sub_path}: the decode step's FLOPs do not grow with the context: attention over the cached "
                     "tokens is not counted (a lower bound)")
    entries = hooked_entries(caches[0][0], caches[1][0], run.paths, run.layer_list)
    notes.append(f"{type(built.model).__name__}.{method}() makes the cache its decoding passes to {sub_path}.forward "
                 f"({argument}), filled through forward hooks: a decode step runs {sub_path} alone, as the code's "
                 f"decoding does, on a fill of {context:,} tokens, then one token counted; the other inputs as the "
                 f"prefill pass gave them ({', '.join(str(list(t.shape)) for t in others)})")
    kv = {"source": f"{type(built.model).__name__}.{method}() filled through forward hooks", "entries": entries}
    return _flops_json(counters[context], run.traced, batch, 1, context), kv


def _recompute(run: _Prefilled, batch: int, context: int, notes: list[str]) -> dict[str, Any] | None:
    """The decode step of a model that keeps no cache (no start_pos, no past_key_values): a new token after
    `context` reruns its forward over the whole sequence, context + 1 tokens, as its own generate loop does; None
    where its pass takes no sequence of tokens (said in `notes`)."""
    name = type(run.built.model).__name__
    shapes = run.traced.extra("shapes") or {}
    if "T" not in shapes.get("used", ()):
        notes.append(f"{name}.forward takes no start_pos and no sequence of tokens: no decode step")
        return None
    target = _decoded_stream(run.built)
    limit = model_limit(dict(run.record.source.config), run.built.model) if target is None else \
        (target.most, target.where.partition(":")[0]) if target.most else None
    if limit is not None and context + 1 > limit[0]:  # the rerun holds the new token too: within the limit
        context = limit[0] - 1
    seq, specs = (context + 1, None) if target is None else (shapes["T"], [  # the other inputs as the prefill's
        *(s for s in run.inputs if s.partition("=")[0] not in target.arguments),
        target.example.replace(f"{target.dim}=N", f"{target.dim}={context + 1}")])
    try:
        _, fc, _ = _pass(run.built, run.record, batch=batch, seq=seq, memo=run.memo, paths=run.paths,
                         input_specs=specs)
    except ShapeError as e:
        notes.append(f"no decode step: {e.line()}")
        return None
    import inspect

    try:
        params = list(inspect.signature(run.built.model.forward).parameters)
    except (TypeError, ValueError):
        params = []
    given = [p for p in params if "cache" in p.lower() or p in ("past", "inference_params", "state", "states")]
    from .cache_object import inner_cache_argument

    inner = inner_cache_argument(run.built.model) if not given else None
    how = (f"its forward takes a cache object ({', '.join(given)}) that archviz does not make: measured without it"
           if given else f"its forward passes no cache, though {inner[0]}.forward takes one ({inner[1]}), which the "
           "code's own decoding fills outside forward: measured without it" if inner else
           "it keeps no cache (its forward takes no start_pos or past_key_values)")
    whole = f"the whole sequence, {context + 1:,} tokens" if target is None else \
        f"{target.arguments[0]}'s {context + 1:,} tokens ({target.dim}" + \
        (f"; at most {limit[0]:,}, {limit[1]}" if limit else "") + f") beside {target.beside}'s T = {seq:,}"
    notes.append(f"{name}: {how}; a decode step at context {context:,} reruns {whole}, " +
                 ("the most its decoding runs" if inner else "as the code then does") + "; no KV cache figures")
    return _flops_json(fc, run.traced, batch, context + 1, 0)


def _decoded_stream(built: Any) -> Any:
    """The sequence a model decodes where it is not its first input: the last further sequence of token ids
    (`further_streams`: an encoder-decoder's `tgt` beside its source's T), whose length a decode step grows; None
    where the first input is what it decodes."""
    from ..shapes.streams import further_streams

    return next((s for s in reversed(further_streams(built, None)) if s.example.endswith(":int64")), None)


def _hf_decode(run: _Prefilled, batch: int, lengths: tuple[int, ...],
               say: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """A prefill on meta with the model's own cache, its layers stretched to `context` (lengths[0]) slots, then one
    token; at each of the other lengths again from a copy of the filled cache (the two prefills run once), summed to
    points."""
    built, record, traced, layer_list, memo, paths = run.built, run.record, run.traced, run.layer_list, run.memo, \
        run.paths
    context, more = lengths[0], lengths[1:]
    try:
        from transformers import DynamicCache
    except ImportError as e:  # pragma: no cover - hf sources need transformers
        raise ShapeError("transformers is not installed", hint="pip install transformers") from e
    model = built.model
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    config = dict(record.source.config)
    windows = [v for k, v in config.items() if isinstance(v, int) and not isinstance(v, bool) and
               ("window" in k or "chunk" in k)]
    from ..shapes.symbols import _taken

    t0 = distinct(max([17, *(w + 1 for w in windows)]), _taken(record) | {batch})
    # a step that every compression rate divides: 4096 and the config's rates that do not divide it
    step = 4096
    for k, v in config.items():
        if any(w in k for w in ("compress", "rate", "ratio")):
            for x in (v if isinstance(v, list) else v.values() if isinstance(v, dict) else [v]):
                if isinstance(x, int) and not isinstance(x, bool) and 0 < x <= 4096 and step % x:
                    step = step * x // math.gcd(step, x)
    t1 = t0 + step
    try:
        caches = [DynamicCache(config=cfg), DynamicCache(config=cfg)]
    except Exception as e:  # noqa: BLE001 - transformers' own cache code, on the model's config
        raise ShapeError(f"transformers cannot make {type(model).__name__}'s cache: DynamicCache(config="
                         f"{type(cfg).__name__}) raised {type(e).__name__}: {str(e)[:200]}",
                         hint="the model's forward makes its cache so when use_cache is on, and fails the same: "
                         f"no decode or KV cache figures (archviz walk {option('shapes')} traces the prefill)") from e
    say(f"filling the model's cache on meta ({t0} and {t1} tokens)")

    def fill(cache: Any, n: int) -> Callable[[], tuple[tuple, dict]]:
        ids = torch.zeros((batch, n), dtype=torch.long, device="meta")
        return lambda: ((), {"input_ids": ids, "past_key_values": cache, "use_cache": True})

    from ..shapes import PassRun, run_steps

    shared: dict[str, Any] = {}  # the decode steps' tracer takes the fills' module paths and block kinds
    run_steps(built, record, [fill(caches[0], t0), fill(caches[1], t1)], run=PassRun(memo=memo), shared=shared)
    cache, longer = caches
    entries = cache_entries(cache, longer, t0, t1, lambda i: f"{layer_list}.{i}" if layer_list else str(i))
    if not entries:
        raise ShapeError(f"{type(model).__name__} filled no cache layer on meta", hint="its cache is not a "
                         "DynamicCache: KV and decode figures are not available")
    kv = {"source": f"{type(cache).__name__} layers after prefills of {t0} and {t1} tokens on meta", "entries": entries}
    ids = torch.zeros((batch, 1), dtype=torch.long, device="meta")
    steps = {}
    for L in [context, *more]:  # a copy each: a step appends to the cache it is given
        filled = copy.deepcopy(cache) if more else cache
        stretch(filled, longer, t0, t1, L)
        steps[L] = {"input_ids": ids, "past_key_values": filled, "use_cache": True}
    say(f"decode step{'s' if more else ''} at context {', '.join(f'{L:,}' for L in steps)}")
    counters = _steps(built, record, [(L, lambda k=k: ((), k)) for L, k in steps.items()], memo, paths, shared)
    points = [point(_flops_json(counters[L], traced, batch, 1, L), layer_list) for L in more]
    return _flops_json(counters[context], traced, batch, 1, context), kv, points


__all__ = ["measure", "CONTEXT_DEFAULT", "SEQ_DEFAULT"]

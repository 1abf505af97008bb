"""Execution: run a small copy of a model for real (random weights, real kernels or the torch implementations in
`archviz.kernels`) and compare every module call's shapes with the meta walk.

`run_probe()` is `archviz probe`: the full model is built on meta, walked and traced; a reduced copy (every width and
every kind of layer kept, see `archviz.probe.reduce`) is built on the device with random weights (`init_random`) and
run on random token ids (`real_calls`); `compare_mapped()` checks every meta module call, and every stubbed kernel
call, of the full model against the real calls of the module at the mapped path, with the symbols (B, T, B·T) substituted, the
routed-token dim R (data-dependent) accepted at any value and cut dims mapped back to their full values. The verdicts
land in the records as `extra("probe")["modules"][path]["confirmed"]`. A memory guard refuses, before allocating,
a copy that would not fit.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from typing import Any, Callable

import torch

from ..errors import EXIT_USAGE, ArchvizError, option
from ..records import ModelRecord
from ..shapes import Tracer
from ..sources import Built
from .agreement import Comparison, Disagreement, compare_mapped
from .memory import ProbeError, default_max_memory, estimate_bytes, human_bytes
from .real import RealPassOptions, init_random, kernel_call_logger, real_calls

# ---------------------------------------------------------------------------------------------------------------------
# The probe: meta walk of the full model, a reduced copy run for real, every call compared


@dataclasses.dataclass
class ProbeResult:
    record: ModelRecord  # the full model's records: shapes, grouping, extra("probe")
    plan: Any  # archviz.probe.reduce.Plan
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
    mode: str = "eval"  # both passes': "eval", or "train" (the train option)

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
            "mode": self.mode,
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


@dataclasses.dataclass(frozen=True)
class ProbeOptions:
    """How the probe runs, beside how the model is built (``BuildOptions``): on which device, within how many bytes
    (``max_memory``; default half the machine's memory), cut how far (``limits``: ``archviz.probe.reduce.Limits``),
    on which inputs (``batch``, ``seq``, ``input_specs`` as ``input`` gives them, ``seed`` for the random weights
    and token ids) and in which mode (``train``: training mode for both passes, else eval)."""

    device: str = "cpu"
    max_memory: int | None = None
    batch: int | None = None
    seq: int | None = None
    seed: int = 0
    limits: Any = None
    input_specs: list[str] | None = None
    train: bool = False


class _Stages:
    """The probe's stages told to ``progress(stage, done, total)`` (total 0: no count), and the seconds each took."""

    def __init__(self, progress: Stage | None) -> None:
        self.report: Stage = progress or (lambda stage, done, total: None)
        self.seconds: dict[str, float] = {}
        self._since, self._name = 0.0, ""

    def __call__(self, name: str) -> Callable[[int, int], None]:
        """Begin stage ``name``; returns its progress callback (done, total)."""
        now = time.perf_counter()
        if self._name:
            self.seconds[self._name] = self.seconds.get(self._name, 0.0) + now - self._since
        self._since, self._name = now, name
        report = self.report
        report(name, 0, 0)
        return lambda done, total: report(name, done, total)


def run_probe(spec: str, build_options: Any = None, options: ProbeOptions | None = None, *,
              progress: Stage | None = None, tp: Any = None) -> ProbeResult:
    """Build SOURCE on meta (``build_options``: ``BuildOptions``, on meta), walk it and trace its shapes; build a
    reduced copy (see `archviz.probe.reduce`) on the options' device with random weights, run it on random token ids
    (and the input specs), and compare every module call's shapes with the meta walk. `tp`: one rank's
    `archviz.probe.tensor_parallel.Sharded`, given the rank's copy and the single-process one before the real pass.

    `progress(stage, done, total)` is told each stage (total 0: no count). Raises `ProbeError` (exit 2) when the
    reduced copy would not fit in `max_memory` bytes, before allocating it."""
    from ..shapes import PassRun, trace_shapes
    from ..sources import BuildOptions
    from ..sources.dispatch import build
    from ..walk import walk
    from . import reduce

    o = options or ProbeOptions()
    limits = o.limits or reduce.Limits()
    if o.seq and o.seq > limits.seq:
        limits = dataclasses.replace(limits, seq=o.seq)
    _check_device(o.device)
    max_memory = o.max_memory if o.max_memory is not None else default_max_memory(o.device)
    stage = _Stages(progress)
    opts = build_options or BuildOptions()
    stage("building on meta")
    built = build(spec, opts)
    record = walk(built, progress=stage("walking modules"))

    stage("planning the reduced copy")
    notes: list[str] = []
    with _Workdir() as tmp:
        chosen, reduced_record = _choose_plan(spec, built, record, opts, limits, tmp, notes)
        estimate = _fitting(reduced_record, chosen, notes, max_memory)
        reduced_record = None

        batch, seq = probe_dims(record, o.batch, o.seq)
        meta_kernels: dict[tuple[str, str], list[tuple]] = {}
        record = trace_shapes(built, record, batch=batch, seq=seq, input_specs=o.input_specs,
                              run=PassRun(train=o.train, on_kernel=kernel_call_logger(meta_kernels),
                                          progress=stage("meta forward pass")))
        shapes = record.extra("shapes")
        eager = built.kind == "hf" and any("experts_implementation='eager'" in n for n in shapes.get("notes", ()))
        copy = _ReducedCopy(spec, opts, chosen, record, tmp, notes, o, built.tokens_1d)
        built = None  # the full meta model is no longer needed
        gc.collect()
        tracer, ran, stubbed = copy.run(stage, eager, tp)

    stage("comparing")
    comparison = compare_mapped(record, tracer, shapes["B"], shapes["T"], chosen, meta_kernels)
    kernel_report = _kernel_report(tracer, ran, chosen)
    record = _with_grouping(record)
    kinds_report = _kinds_report(record, comparison, chosen)
    modules = _module_verdicts(comparison, chosen, tracer)
    stage("")
    result = ProbeResult(record=record, plan=chosen, B=shapes["B"], T=shapes["T"], comparison=comparison,
                         kernels=kernel_report, kinds=kinds_report, estimate=estimate, max_memory=max_memory,
                         device=o.device, seconds=stage.seconds, notes=notes + list(chosen.notes), stubbed=stubbed,
                         mode="train" if o.train else "eval")
    result.record = record.with_extra("probe", _probe_extra(result, modules))
    return result


def _choose_plan(spec: str, built: Built, record: ModelRecord, opts: Any, limits: Any, tmp: str,
                 notes: list[str]) -> tuple[Any, ModelRecord]:
    """The first plan of `reduce.plans` whose copy builds (on meta) and keeps the model's structure, and that copy's
    records (the full model's for the plan "none"); each plan passed over noted."""
    from ..sources.dispatch import build
    from ..walk import walk
    from . import reduce

    kinds = reduce.layer_kinds(record)
    for plan in reduce.plans(record, built.config, limits=limits, kinds=kinds, world_size=built.world_size or 1):
        if plan.method == "none":
            return plan, record
        try:
            rbuilt = build(*_reduced_source(spec, built, opts, plan, "meta", tmp, notes))
            rrec = walk(rbuilt)
        except ArchvizError as e:
            notes.append(f"plan '{plan.method}' does not build: {e.line()[:300]}")
            continue
        finally:
            rbuilt = None
        plan = plan.share(record, rrec)  # a rank's experts (world_size) pair by their place in its share
        problems = reduce.check_structure(record, rrec, plan)
        if problems:
            notes.append(f"plan '{plan.method}' does not keep the model's structure: {problems[0]}")
            continue
        return plan, rrec
    raise AssertionError("reduce.plans ends with the plan 'none'")


def _fitting(reduced_record: ModelRecord, chosen: Any, notes: list[str], max_memory: int) -> int:
    """The reduced copy's estimated bytes (tensors and working space); `ProbeError` where over `max_memory`."""
    tensors, work = estimate_bytes(reduced_record)
    estimate = tensors + work
    if estimate > max_memory:
        why = f" ({notes[-1]})" if chosen.method == "none" and notes else ""
        raise ProbeError(
            f"the reduced copy ({chosen.method}{why}) needs about {human_bytes(estimate)} ({human_bytes(tensors)}"
            f" of tensors + {human_bytes(work)} working space), more than {option('max-memory')} "
            f"{human_bytes(max_memory)}",
            hint=f"raise {option('max-memory')}, or cut the model further with {option('set')} (e.g. fewer layers)",
            exit_code=EXIT_USAGE)
    return estimate


@dataclasses.dataclass
class _ReducedCopy:
    """The chosen plan's copy, built on the device with random weights and run for real."""

    spec: str
    opts: Any  # BuildOptions of the full model
    chosen: Any  # the plan
    record: ModelRecord  # the full model's, traced
    tmp: str
    notes: list[str]
    o: ProbeOptions
    tokens_1d: bool  # token ids [T]: the real pass takes them as the meta pass did

    def build(self, opts: Any) -> Built:
        from ..sources.dispatch import build

        return build(*_reduced_source(self.spec, None, opts, self.chosen, self.o.device, self.tmp, self.notes,
                                      record=self.record))

    def calls(self, real: Built, **kw: Any) -> tuple[Tracer, dict[str, list[str]]]:
        shapes = self.record.extra("shapes")
        o = self.o
        return real_calls(real, shapes["B"], shapes["T"],
                          RealPassOptions(seed=o.seed, device=o.device, input_specs=o.input_specs, train=o.train,
                                          sizes=shapes.get("named"), tokens_1d=self.tokens_1d), **kw)

    def run(self, stage: _Stages, eager: bool, tp: Any) -> tuple[Tracer, dict[str, list[str]], tuple[str, ...]]:
        """(the real pass's tracer, the kernels it ran, the imports stubbed on the device)."""
        o = self.o
        stage(f"building the reduced copy on {o.device}")
        real = self.build(self.opts)
        if eager and hasattr(real.model, "set_experts_implementation"):
            try:
                real.model.set_experts_implementation("eager")
            except Exception:  # noqa: BLE001 - as in the meta pass
                pass
        stage("random weights")
        init_random(real.model, real.config, seed=o.seed)
        if tp is not None:
            whole = dataclasses.replace(self.opts, world_size=1, rank=0)
            tp.prepare(real, lambda: self.build(whole), self.calls, self.chosen, self.record,
                       lambda b: init_random(b.model, b.config, seed=o.seed))
        try:
            tracer, ran = self.calls(real, progress=stage("real forward pass"), note=self.notes.append)
        except ArchvizError:
            raise
        except Exception as e:  # noqa: BLE001 - the model's own code raised on real tensors
            raise _real_failure(e, real) from e
        stubbed = tuple(sorted(set(real.stubbed_imports) | set(real.stubs.taken() if real.stubs else ())))
        meta_stubbed = {n for n in self.record.source.stubbed_imports if "." not in n}
        own = sorted(meta_stubbed - {n for n in stubbed if "." not in n})
        if own:
            self.notes.append(f"the model's own {', '.join(own)} imported on {o.device}: its kernels ran as written")
        real = None
        gc.collect()
        return tracer, ran, stubbed


def _module_verdicts(comparison: Comparison, chosen: Any, tracer: Tracer) -> dict[str, dict[str, Any]]:
    """Each module's verdict (the path it was probed as, the kernels it ran), with the disagreements' shapes."""
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
    return modules


def _probe_extra(result: ProbeResult, modules: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``probe`` extra: the module verdicts and what was compared, with what plan."""
    comparison, chosen = result.comparison, result.plan
    return {"device": result.device, "agreement": result.agreement, "ok": result.ok, "B": result.B, "T": result.T,
            "mode": result.mode,
            "modules": modules, "not_exercised": len(comparison.absent), "kernels": result.kernels,
            "reductions": [r.as_json() for r in chosen.reductions], "method": chosen.method,
            "layers_kept": list(chosen.kept_layers) if chosen.kept_layers is not None else None,
            "kinds": result.kinds}


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
        raise ProbeError(f"{option('device')} {device}: not a device the probe runs on", hint="use cpu or cuda",
                         exit_code=EXIT_USAGE)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeError(f"{option('device')} {device}: no CUDA device here", hint=f"use {option('device')} cpu (the "
                                                                                   "kernels fall back to "
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
                      f"{str(e)[:300]}", hint="the meta walk ran this code without error: rerun with "
                                              f"{option('debug')} for "
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

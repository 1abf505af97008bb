"""Meta against real: every module call's shapes from the reduced copy's run compared with the meta pass, dims
mapped from the reduced sizes to the full model's."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..records import ModelRecord
from ..shapes import ROUTED, Tracer
from ..shapes.symbols import evaluate


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
    """Symbols and derived dims (T/4, B·32) at (B, T); other symbols as they are."""
    out = []
    for d in dims:
        v = evaluate(d, B, T)
        out.append(d if v is None else v)
    return tuple(out)


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
            if a == ROUTED or a == b or (isinstance(a, str) and " at " in a):  # data- or size-dependent: any
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
    a reduced copy (`plan`: an `archviz.probe.reduce.Plan`; None: the same model); with `meta_kernels` (see
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

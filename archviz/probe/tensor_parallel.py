"""The probe under tensor parallelism (`archviz probe` of world_size N): the reduced copy run as N processes
under torch.distributed, each rank built with the model's own parallel layers and run with real collectives.

Each rank runs `run_probe` with `BuildOptions(world_size=N, rank=r)`: the full model laid out for rank r on meta (its records are
world_size=N, rank=r's), the reduced copy built for rank r for real. Before the real pass, `Sharded.prepare`
builds the same reduced copy unsharded (world size 1), fills it with the probe's random weights and runs it on the
same tokens (the single-process run); the rank's weights are then cut from it (a tensor whose one dim is N times
smaller is that dim's r-th part, as the parallel layers split it; a routed expert is the expert of the same index),
so the sharded forward computes the same function. What is compared, per rank:

- every tensor of the rank's copy with the meta records of that rank (dims cut by the reduction mapped back);
- every module call's shapes with the meta walk (as `archviz probe` does);
- every module's output with the single-process run's (whole, or its r-th part where the rank holds a part), in
  the order the modules finished: the first one that differs beyond the tolerance is where the sharding goes wrong
  (a row-parallel layer without its all-reduce returns a partial sum of the right shape); the model's output (the
  logits, gathered on every rank) is the last of them.
"""

from __future__ import annotations

import dataclasses
import math
import resource
import time
from typing import Any, Callable

import torch

from ..records import ModelRecord
from ..sources import Built
from .real import tensor_leaves
from ..errors import option

TOLERANCE = 0.15  # ‖sharded − single‖ / ‖single‖: float rounding of split sums, far from a missing sum


@dataclasses.dataclass
class ValueMismatch:
    rank: int
    path: str
    call: int
    shape: tuple  # the rank's output
    single_shape: tuple  # the single-process run's output (whole)
    error: float  # ‖rank's − single's‖ / ‖single's‖
    part: str = ""  # "" (whole), or which part of the single output the rank's is ("dim 1, part 0 of 2")
    leaf: int = 0  # which tensor of the module's output

    def line(self) -> str:
        part = f" ({self.part})" if self.part else ""
        return (f"rank {self.rank}: {self.path or '(model)'}: output {list(self.shape)} differs from the "
                f"single-process run's {list(self.single_shape)}{part} by {self.error:.3g} of its norm")

    def as_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "path": self.path, "call": self.call, "shape": list(self.shape),
                "single_shape": list(self.single_shape), "error": self.error, "part": self.part}


class OutputCapture:
    """Every module's outputs (tensor leaves) by path, in the order the calls finished; and the modules whose own
    forward (not a submodule's) called `torch.distributed.all_reduce` or `reduce_scatter` (`reducers`)."""

    _SUMMING = ("all_reduce", "reduce_scatter", "reduce_scatter_tensor")

    def __init__(self, model: torch.nn.Module) -> None:
        import torch.distributed as dist

        self.calls: dict[str, list[list[torch.Tensor]]] = {}
        self.order: list[tuple[str, int]] = []
        self.stack: list[str] = []
        self.reducers: set[str] = set()
        self.handles = [m.register_forward_hook(self._hook(path)) for path, m in model.named_modules()]
        self.handles += [m.register_forward_pre_hook(self._enter(path)) for path, m in model.named_modules()]
        self.saved = {name: getattr(dist, name) for name in self._SUMMING if hasattr(dist, name)}
        for name, fn in self.saved.items():
            setattr(dist, name, self._noting(fn))

    def _noting(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def summing(*args: Any, **kwargs: Any) -> Any:
            if self.stack:
                self.reducers.add(self.stack[-1])
            return fn(*args, **kwargs)

        return summing

    def _enter(self, path: str) -> Callable[..., None]:
        def pre(module: Any, args: Any) -> None:
            self.stack.append(path)

        return pre

    def _hook(self, path: str) -> Callable[..., None]:
        def hook(module: Any, args: Any, output: Any) -> None:
            if self.stack and self.stack[-1] == path:
                self.stack.pop()
            leaves = [(t.to_local() if hasattr(t, "to_local") else t).detach().clone() for t in tensor_leaves(output)]
            calls = self.calls.setdefault(path, [])
            self.order.append((path, len(calls)))
            calls.append(leaves)

        return hook

    def remove(self) -> None:
        import torch.distributed as dist

        for h in self.handles:
            h.remove()
        self.handles = []
        for name, fn in self.saved.items():
            setattr(dist, name, fn)
        self.saved = {}


def shard_of(full: torch.Tensor, shape: tuple, rank: int, world_size: int) -> tuple[torch.Tensor, str] | None:
    """The rank's part of `full` for a tensor of `shape`: `full` itself when the shapes agree, else its r-th part
    along the one dim that is `world_size` times smaller; None when neither holds."""
    if tuple(full.shape) == tuple(shape):
        return full, ""
    if len(full.shape) != len(shape):
        return None
    differ = [d for d, (a, b) in enumerate(zip(full.shape, shape)) if a != b]
    if len(differ) != 1 or full.shape[differ[0]] != shape[differ[0]] * world_size:
        return None
    d = differ[0]
    return full.narrow(d, rank * shape[d], shape[d]), f"dim {d}, part {rank} of {world_size}"


class Sharded:
    """The tensor-parallel side of one rank's probe: the single-process run, the rank's weights cut from it, the
    rank's tensors checked against its meta records, and every module's output compared."""

    def __init__(self, rank: int, world_size: int, tolerance: float = TOLERANCE) -> None:
        self.rank, self.world_size, self.tolerance = rank, world_size, tolerance
        self.single: OutputCapture | None = None
        self.sharded: OutputCapture | None = None
        self.tensor_problems: list[str] = []
        self.tensors_checked = 0
        self.shapes: dict[str, list[int]] = {}  # the rank's real tensors, by the full model's path
        self.uncut: list[str] = []
        self.seconds = 0.0
        self.worst = 0.0  # the largest error among the outputs that agree
        self.partial: list[str] = []  # outputs that are partial sums a caller reduces (see _partial_sums)

    def prepare(self, real: Built, single: Callable[[], Built], run: Callable[[Built], Any], plan: Any,
                record: ModelRecord, init: Callable[[Built], None]) -> None:
        """Called by `run_probe` with the rank's reduced copy (random weights), before its real pass: build and run
        the single-process copy, give the rank its part of those weights, and capture the rank's outputs."""
        start = time.perf_counter()
        self._same_plan(plan)
        whole = single()
        init(whole)
        self.single = OutputCapture(whole.model)
        try:
            run(whole)
        finally:
            self.single.remove()
        weights = dict(whole.model.named_parameters())
        with torch.no_grad():
            for name, p in real.model.named_parameters():
                w = weights.get(name)
                cut = shard_of(w, tuple(p.shape), self.rank, self.world_size) if w is not None else None
                if cut is None:
                    self.uncut.append(f"{name} {list(p.shape)}" + (f" (single {list(w.shape)})" if w is not None
                                                                  else " (not in the single-process copy)"))
                    continue
                p.data = cut[0].to(p.dtype).clone()
        whole = None
        self._check_tensors(real, plan, record)
        self.sharded = OutputCapture(real.model)
        self.seconds += time.perf_counter() - start

    def _same_plan(self, plan: Any) -> None:
        """Every rank must run the same reduced copy, or their collectives would not pair up."""
        import torch.distributed as dist

        mine = (plan.method, sorted(plan.overrides.items()))
        plans: list[Any] = [None] * self.world_size
        dist.all_gather_object(plans, mine)
        if any(p != plans[0] for p in plans):
            from .errors import ProbeError

            which = "; ".join(f"rank {r}: {p[0]} {dict(p[1])}" for r, p in enumerate(plans))
            raise ProbeError(f"the ranks chose different reduced copies ({which})", exit_code=1,
                             hint=f"cut the model with {option('set')} until every rank's copy keeps its structure")

    def _check_tensors(self, real: Built, plan: Any, record: ModelRecord) -> None:
        """The rank's real tensors against its meta records (the full model at the mapped path)."""
        index = record.index()
        for mpath, module in real.model.named_modules():
            meta = index.get(plan.unmap_path(mpath))
            if meta is None:
                continue
            tensors = {t.name: t for t in meta.tensors}
            own = list(module._parameters.items()) + list(module._buffers.items())
            for name, t in own:
                if t is None:
                    continue
                m = tensors.get(name)
                self.tensors_checked += 1
                real_shape = tuple(int(d) for d in t.shape)
                self.shapes[f"{meta.path}.{name}" if meta.path else name] = list(real_shape)
                if m is None:
                    self.tensor_problems.append(f"rank {self.rank}: {mpath}.{name}: real {list(real_shape)}, not in "
                                                "the meta records")
                elif len(m.shape) != len(real_shape) or (m.kind != "buffer" and not all(
                        plan.dims_agree(a, b) for a, b in zip(m.shape, real_shape))):
                    self.tensor_problems.append(f"rank {self.rank}: {mpath}.{name}: meta {list(m.shape)} vs real "
                                                f"{list(real_shape)}")

    def compare(self) -> tuple[list[ValueMismatch], int, dict[str, Any]]:
        """(value mismatches in the order the modules finished, outputs compared, the model output's comparison)."""
        assert self.single is not None and self.sharded is not None
        self.sharded.remove()
        mismatches: list[ValueMismatch] = []
        compared = 0
        self.worst = 0.0
        final: dict[str, Any] = {}
        for path, i in self.sharded.order:
            theirs = self.single.calls.get(path, [])
            if i >= len(theirs):
                continue
            mine, whole = self.sharded.calls[path][i], theirs[i]
            for leaf, (a, b) in enumerate(zip(mine, whole)):
                cut = shard_of(b, tuple(a.shape), self.rank, self.world_size)
                if cut is None:
                    continue  # a data-dependent size (tokens routed to a local expert, ...)
                compared += 1
                err = _relative_error(a, cut[0])
                if err <= self.tolerance:
                    self.worst = max(self.worst, err)
                if path == "" and leaf == 0:
                    final = {"shape": list(a.shape), "single_shape": list(b.shape), "error": err,
                             "ok": err <= self.tolerance}
                if err > self.tolerance:
                    mismatches.append(ValueMismatch(self.rank, path, i, tuple(a.shape), tuple(b.shape), err, cut[1],
                                                    leaf))
                    break
        return self._partial_sums(mismatches), compared, final

    def _partial_sums(self, mismatches: list[ValueMismatch]) -> list[ValueMismatch]:
        """`mismatches` less the outputs that are partial sums which a caller reduces: a row-parallel layer whose
        all-reduce its caller does once for several (a shared expert built with `reduce_output=False`, summed with
        the routed experts' output in one all-reduce) differs on every rank, by design. Such an output is the
        single run's where the N ranks' outputs add up to it and a module it was called from itself calls
        all-reduce (`OutputCapture.reducers`). A row-parallel layer whose all-reduce is missing adds up the same,
        but none of its callers reduces: it stays a mismatch. Every rank takes part (two all_gather_object calls),
        whatever its own mismatches."""
        import torch.distributed as dist

        every: list[Any] = [None] * self.world_size
        dist.all_gather_object(every, [(m.path, m.call, m.leaf) for m in mismatches])
        union = sorted({tuple(k) for keys in every for k in keys})
        assert self.sharded is not None and self.single is not None
        mine = []
        for path, call, leaf in union:
            calls = self.sharded.calls.get(path, [])
            mine.append(calls[call][leaf] if call < len(calls) and leaf < len(calls[call]) else None)
        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, mine)
        adds_up = set()
        for m in mismatches:
            j = union.index((m.path, m.call, m.leaf))
            whole, each = self.single.calls[m.path][m.call][m.leaf], [p[j] for p in parts]
            if all(t is not None and t.shape == whole.shape for t in each) and \
                    _relative_error(sum(each[1:], each[0]), whole) <= self.tolerance:
                adds_up.add(m.path)

        def reduced_by_caller(path: str) -> bool:
            callers = [path.rsplit(".", k)[0] for k in range(1, path.count(".") + 1)] + ([""] if path else [])
            return any(c in self.sharded.reducers for c in callers)  # type: ignore[union-attr]

        kept = [m for m in mismatches if not (m.path in adds_up and reduced_by_caller(m.path))]
        self.partial = sorted({m.path for m in mismatches} - {m.path for m in kept})
        return kept


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / ‖b‖ (Frobenius): rounding that flips a few quantized elements stays small, a missing or
    doubled sum does not. Integer outputs (routing indices, top-k positions) must be equal, or the same indices in
    another order along the last dim (top-k among tied scores: a causal mask's -inf ties order as they fall)."""
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        b = b.to(a.dtype)
        same = torch.equal(a, b) or (a.shape == b.shape and a.dim() > 0 and
                                     torch.equal(a.sort(-1).values, b.sort(-1).values))
        return 0.0 if same else math.inf
    if not b.numel():
        return 0.0
    a64, b64 = a.double(), b.double()
    # -inf where a mask hides a score (top-k selection scores, masked logits): the same positions and signs agree,
    # and the error is of the finite values; a non-finite value where the other run has a finite one does not
    fa, fb = torch.isfinite(a64), torch.isfinite(b64)
    if not bool(fa.all() and fb.all()):
        if not torch.equal(fa, fb) or not torch.equal(a64[~fa].nan_to_num(0.0, 1.0, -1.0),
                                                      b64[~fb].nan_to_num(0.0, 1.0, -1.0)):
            return math.inf
        a64, b64 = a64[fa], b64[fb]
    diff, scale = float(torch.linalg.vector_norm(a64 - b64)), float(torch.linalg.vector_norm(b64))
    if not math.isfinite(diff):
        return math.inf
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


# ---------------------------------------------------------------------------------------------------------------------
# One rank's probe (run in its own process by `archviz.probe.spawn.run_ranks`)


def rank_probe(rank: int, world_size: int, spec: str, build_options: Any, options: Any, tolerance: float,
               kernel_rules: str | None) -> dict[str, Any]:
    """One rank: `run_probe` for rank `rank` of `world_size` with the single-process comparison; a JSON-able report."""
    from .run import run_probe

    start = time.perf_counter()
    if kernel_rules:
        from ..shapes.kernels import load_rules_file

        load_rules_file(kernel_rules)
    tp = Sharded(rank, world_size, tolerance)
    result = run_probe(spec, dataclasses.replace(build_options, world_size=world_size, rank=rank), options, tp=tp)
    values, compared, final = tp.compare()
    shape_problems = [f"rank {rank}: {d.line()}" for d in result.disagreements]
    ok = result.ok and not values and not tp.tensor_problems and not tp.uncut and bool(final)
    return {
        "rank": rank,
        "ok": ok,
        "modules_compared": result.compared,
        "modules_confirmed": result.confirmed,
        "shape_disagreements": shape_problems,
        "tensors_checked": tp.tensors_checked,
        "tensor_disagreements": tp.tensor_problems,
        "tensor_shapes": tp.shapes,
        "weights_not_cut": tp.uncut,
        "outputs_compared": compared,
        "largest_agreeing_error": tp.worst,
        "partial_sums": tp.partial,  # outputs each rank holds a part of the sum of, reduced by their caller
        "value_mismatches": [v.as_json() for v in values],
        "value_lines": [v.line() for v in values],
        "output": final,
        "B": result.B,
        "T": result.T,
        "reduced": result.plan.as_json(),
        "notes": result.notes,
        "seconds": round(time.perf_counter() - start, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


__all__ = ["Sharded", "ValueMismatch", "rank_probe", "shard_of"]

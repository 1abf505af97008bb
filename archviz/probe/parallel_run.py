"""The probe of all ranks (`archviz probe` of world_size N): each rank's probe run in its own process by
`archviz.probe.spawn`, a reference model's with its own parallel layers (`tensor_parallel`), a transformers model's
through its tp_plan (`hf_tensor_parallel`), and the ranks' reports together."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ..errors import ArchvizError, option
from .hf_tensor_parallel import hf_rank_probe
from .tensor_parallel import TOLERANCE, rank_probe


@dataclasses.dataclass
class TensorParallelResult:
    source: str
    world_size: int
    backend: str
    ranks: list[dict[str, Any]]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(r["ok"] for r in self.ranks)

    def problems(self) -> list[str]:
        """One line per problem, each naming its rank: shapes, tensors, weights that could not be cut, and the first
        module whose output differs from the single-process run."""
        out: list[str] = []
        for r in self.ranks:
            out += r["shape_disagreements"] + r["tensor_disagreements"]
            out += [f"rank {r['rank']}: weight not cut from the single-process copy: {w}" for w in r["weights_not_cut"]]
            out += r["value_lines"][:1]
            if not r["output"]:
                out.append(f"rank {r['rank']}: the model's output was not compared with the single-process run")
        return out

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "world_size": self.world_size, "backend": self.backend, "ok": self.ok,
                "problems": self.problems(), "ranks": self.ranks, "seconds": round(self.seconds, 3)}


def run_tensor_parallel(spec: str, world_size: int, build_options: Any = None, options: Any = None, *,
                        timeout: float = 600.0, tolerance: float = TOLERANCE,
                        kernel_rules: str | None = None) -> TensorParallelResult:
    """`archviz probe` of world_size N: every rank's probe in its own process under torch.distributed (a
    reference model: `tensor_parallel.rank_probe`; a transformers model: `hf_tensor_parallel.hf_rank_probe`), built
    with `build_options` (`BuildOptions`, its world size and rank each rank's) and run with `options`
    (`ProbeOptions`); raises `archviz.probe.spawn.RanksFailed` (exit 1, or 2 for a rank's bad input) when a rank
    raises, dies or outlives `timeout` seconds."""
    import tempfile

    from ..sources import BuildOptions
    from ..sources.dispatch import classify
    from .run import ProbeOptions
    from .spawn import backend_for, run_ranks

    start = time.perf_counter()
    build_options = build_options or BuildOptions()
    options = options or ProbeOptions()
    device = options.device
    backend = backend_for(device, world_size)
    if classify(spec, BuildOptions(config=build_options.config)) == "hf":
        given = [flag for flag, value in ((option("input"), options.input_specs), (option("train"), options.train),
                                          (option("config"), build_options.config),
                                          (option("model-class"), build_options.model_class),
                                          (option("tokenizer"), build_options.tokenizer),
                                          (option("kernel-rules"), kernel_rules)) if value]
        if given:
            raise ArchvizError(f"{spec}: {', '.join(given)} with {option('world-size')}: transformers' tp_plan probe "
                               "runs token ids through the model as its config builds it",
                               hint=f"drop {', '.join(given)}")
        with tempfile.TemporaryDirectory(prefix="archviz-tp-") as folder:
            ranks = run_ranks(hf_rank_probe, (spec, build_options, options, tolerance, folder), world_size,
                              timeout=timeout, backend=backend, device=device)
    else:
        ranks = run_ranks(rank_probe, (spec, build_options, options, tolerance, kernel_rules), world_size,
                          timeout=timeout, backend=backend, device=device)
    return TensorParallelResult(spec, world_size, backend, ranks, time.perf_counter() - start)


__all__ = ["TensorParallelResult", "run_tensor_parallel"]

"""`archviz probe SOURCE`: run a reduced copy of the model for real and compare every module call's shapes with the
meta walk (registers itself on the CLI). Exit 0: every call agrees; 1: a disagreement (each printed as
`module: meta [...] vs real [...]`); 2: unusable input, or the memory guard refused."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Annotated, Any, Callable, Optional

import typer
from rich.text import Text

from ..format import ranges_text
from ..processes.owner import check_count
from .app import app
from .validate import check_options
from .common import (
    emit_json,
    err,
    handled,
    output_option,
    out,
    overrides,
    progress_bar,
    spinner,
)
from ..render.text import Labelled
from .options import (
    Config,
    ConfigClass,
    Debug,
    Input,
    Json,
    KernelRules,
    ModelClass,
    Rank,
    Set,
    Source,
    Tokenizer,
    Train,
    TrustRemoteCode,
    WorldSize,
)


class _Bars:
    """One progress bar per stage of the probe (stderr, on a terminal only)."""

    def __init__(self) -> None:
        self.stack = ExitStack()
        self.stage: str | None = None
        self.update: Callable[[int, int], None] | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.stack.close()
            self.stack = ExitStack()
            self.stage = stage
            self.update = self.stack.enter_context(progress_bar(stage)) if stage else None
        if self.update is not None and total:
            self.update(done, total)

    def close(self) -> None:
        self.stack.close()


@app.command()
def probe(
    source: Source,
    config: Config = None,
    set_: Set = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    world_size: WorldSize = None,
    rank: Rank = None,
    trust_remote_code: TrustRemoteCode = False,
    device: Annotated[str, typer.Option("--device", help="cpu | cuda: where the reduced copy runs")] = "cpu",
    max_memory: Annotated[Optional[str], typer.Option(
        "--max-memory", help="refuse when the reduced copy would need more (e.g. 8GB; default: half the RAM)")]
    = None,
    batch: Annotated[Optional[int], typer.Option("--batch", help="batch size B of both passes")] = None,
    seq: Annotated[Optional[int], typer.Option("--seq", help="sequence length T of both passes")] = None,
    kernel_rules: KernelRules = None,
    input_: Input = None,
    train: Train = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="--world-size without --rank: seconds the "
                                                                      "ranks may run before they are stopped")]
    = 600.0,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="also write the records, with each "
                                                                       "module's verdict, to this JSON file")] = None,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """Build a reduced copy (every width and every kind of layer kept; layers, routed experts, vocabularies and
    n-gram tables cut, each cut recorded), fill it with random weights, run it on random tokens (and the --input
    ones), and compare every module call's shapes with the meta walk of the full model. Both passes run in eval
    mode, or in training mode with --train (auxiliary heads, batch statistics). Kernels that cannot import
    run as plain torch.
    With --world-size N (no --rank), the copy runs as N processes under torch.distributed (gloo on CPU), each rank
    built with the model's own parallel layers and checked against the records of --world-size N --rank r, and every
    module's output against a single-process run of the same copy.
    With -o, the records (each module's verdict in extras.probe) render with `archviz build FILE`."""
    with handled(debug, json_):  # before the imports below: a typo costs no torch import
        check_options(sets={"--set": set_}, inputs=input_, positive={"--batch": batch, "--seq": seq},
                      world_size=world_size, rank=rank)
    from ..probe import ProbeOptions, parse_size, run_probe
    from ..sources import BuildOptions
    from ..sources.guard import model_code

    with handled(debug, json_):
        build_options = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                                     config_class=config_class, tokenizer=tokenizer, world_size=world_size,
                                     rank=rank, trust_remote_code=trust_remote_code)
        options = ProbeOptions(device=device, max_memory=parse_size(max_memory) if max_memory else None, batch=batch,
                               seq=seq, input_specs=input_, train=train)
    if world_size is not None and rank is None:
        with handled(debug, json_):
            _probe_ranks(source, world_size, timeout, json_, debug, build_options, options, kernel_rules)
        return
    with handled(debug, json_), output_option(output, json_):
        if kernel_rules:
            from ..shapes.kernels import load_rules_file

            load_rules_file(kernel_rules)
        bars = _Bars()
        try:
            with model_code("probing the model"):  # it may not end the process or print to stdout
                result = run_probe(source, build_options, options, progress=bars)
        finally:
            bars.close()
        if output:
            from ..records import dumps_compact as dumps
            from .common import atomic_write

            atomic_write(output, dumps(result.record) + "\n")
        if json_:
            emit_json(result.as_json())
        else:
            _print_report(result)
        if not result.ok:
            if json_:
                for d in result.disagreements:
                    err.print(d.line(), highlight=False, markup=False, soft_wrap=True)
            raise typer.Exit(1)


def _probe_ranks(source: str, world_size: int, timeout: float, json_: bool, debug: bool, build_options: Any,
                 options: Any, kernel_rules: str | None) -> None:
    """`--world-size N` without `--rank`: the probe as N processes under torch.distributed; exit 1 on a problem."""
    check_count(world_size, "ranks (--world-size)")  # one process per rank: the cap, before any is built
    from ..probe.parallel_run import run_tensor_parallel
    from ..render.probe import ranks_table

    from ..probe.spawn import RanksFailed

    try:
        with spinner(f"probing {world_size} ranks under torch.distributed"):
            result = run_tensor_parallel(source, world_size, build_options, options, timeout=timeout,
                                         kernel_rules=kernel_rules)
    except RanksFailed as e:
        if debug:
            for f in e.failures:
                err.print(f"--- rank {f.rank}: {f.error}\n{f.log}", highlight=False, markup=False)
        raise
    problems = result.problems()
    if json_:
        emit_json(result.as_json())
        for line in problems:
            err.print(line, highlight=False, markup=False, soft_wrap=True)
    else:
        out.print(ranks_table(source, world_size, result))
        out.print("all ranks agree with their meta records and the single-process run" if result.ok
                  else f"{len(problems)} problems", style="green" if result.ok else "red")
        for line in problems:
            out.print(line, style="red", highlight=False, markup=False, soft_wrap=True)
    if not result.ok:
        raise typer.Exit(1)


def _print_report(result: Any) -> None:
    from ..probe import human_bytes
    from ..render.probe import kinds_table

    r = result
    j = r.as_json()
    out.print(kinds_table(r))
    verdict = ("all agree", "green") if r.ok else (f"{len(r.disagreements)} disagree", "red")
    out.print(Text.assemble(f"agreement: {r.confirmed}/{r.compared} module calls ({r.agreement:.1%}) — ", verdict,
                            f"; {j['not_exercised']:,} modules not in the reduced copy (not exercised)"))
    plan = r.plan
    kept = f", layers {ranges_text(plan.kept_layers)} of {plan.full_layers}" if plan.kept_layers is not None else ""
    out.print(f"reduced copy: {plan.method}{kept}; about {human_bytes(r.estimate)} "
              f"(--max-memory {human_bytes(r.max_memory)})")
    for red in plan.reductions:
        out.print(f"  {red.line()}", highlight=False, markup=False)
    if r.kernels:
        out.print("kernels run:")
        for q, k in r.kernels.items():
            out.print(f"  {q} → {', '.join(k['implementation'])} ({k['calls']} calls)", highlight=False,
                      markup=False)
    for note in r.notes:
        out.print(Labelled("note: ", note))
    secs = sum(r.seconds.values())
    out.print(f"time {secs:.1f} s, peak RSS {j['peak_rss_mb']:,.0f} MB")
    shown = r.disagreements[:_SHOWN]
    for d in shown:
        out.print(d.line(), style="red", highlight=False, markup=False, soft_wrap=True)
    if len(r.disagreements) > len(shown):
        out.print(f"… and {len(r.disagreements) - len(shown)} more disagreements (--json lists them all)",
                  style="red", highlight=False, markup=False)


_SHOWN = 50

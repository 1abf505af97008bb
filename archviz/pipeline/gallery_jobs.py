"""The gallery's counting jobs: one model's records with the cost extra, exactly as `archviz cost SOURCE` at a context
32K` makes them (the same records-cache entry), or, where a stage fails, the records it got to and the stage and
one-line reason of the failure; and the worker server (`served`, run as `python -m archviz.pipeline.gallery_jobs`)
that counts many in processes forked from it. Returns JSON-able data; prints nothing to stdout."""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

from ..cost.provenance import DEFAULT_DTYPE
from ..errors import FLOAT32_FIX, ArchvizError, ShapeError, one_line, option
from ..files.sanitize import printable
from ..processes.owner import die_with_parent
from .options import QUIET, Feedback

CONTEXT = 32 << 10  # the decode step's context: the index's "decode FLOPs per token at 32K"
SEQ = 4096  # as `archviz cost` defaults


def build_choice(source: str, sets: list[str]) -> tuple[list[str], str, int]:
    """(the config fields to build with, what the page says of the dtype, the prefill's tokens T): the config's dtype
    where it names one (`dtype`, or `torch_dtype` in a config.json), else bfloat16 for a transformers config, set and
    said so; T as `archviz cost` defaults it, or the config's max positions where fewer (a BERT takes 512)."""
    from ..cost.curve import max_positions
    from ..cost.provenance import DTYPE_KEYS, config_of, dtype_choice
    from ..sources.options import check_overrides

    config = config_of(source)
    merged = {**(config or {}), **check_overrides(sets)}
    longest = max_positions(merged)
    seq = longest if longest is not None and longest < SEQ else SEQ
    if any(s.split("=", 1)[0].strip() in DTYPE_KEYS for s in sets):
        return sets, f"as {option('set')} gives it", seq
    choice = dtype_choice(source, {}, config)
    if choice.origin == "default":
        return [*sets, BF16], choice.said, seq
    return sets, choice.said, seq


BF16, BF16_SAID = f"dtype={DEFAULT_DTYPE}", f"{DEFAULT_DTYPE} (the config names none)"


def float32_instead(chosen: tuple[list[str], str, int], failures: list[dict[str, str]]
                    ) -> tuple[list[str], str, int] | None:
    """The build choice to count a model again with, where bfloat16 was the gallery's choice (its config names no
    dtype) and the meta pass died on the model's own float32 tensors meeting it (transformers' xLSTM without its
    cache, XLNet: a real run refuses bfloat16 the same): float32, said so. None otherwise."""
    sets, said, seq = chosen
    if said != BF16_SAID or not failures or failures[0].get("stage") != "shapes" or \
            FLOAT32_FIX not in failures[0].get("reason", ""):
        return None
    return ([s for s in sets if s != BF16] + ["dtype=float32"],
            "float32 (the config names none, and the model's code refuses bfloat16: its own float32 tensors meet it)",
            seq)


def shorter_prefill(chosen: tuple[list[str], str, int], failures: list[dict[str, str]]
                    ) -> tuple[list[str], str, int] | None:
    """The build choice to count a model again with, where its prefill was the config's max positions (fewer than
    SEQ tokens) and the meta pass died on it: half as many tokens (transformers' ProphetNet takes at most
    max_position_embeddings - 2; a real run at its max fails too). None otherwise."""
    sets, said, seq = chosen
    if seq >= SEQ or seq < 2 or not failures or failures[0].get("stage") != "shapes":
        return None
    return sets, said, seq // 2


def _options(sets: list[str], seq: int) -> tuple[Any, Any]:
    """The build and cost options of `archviz cost SOURCE` at context 32K, T tokens and the model's config fields (archviz/cli/cost.py), so
    one records-cache entry serves both commands."""
    from ..cost.options import CostOptions
    from ..sources.options import BuildOptions, check_overrides

    return BuildOptions(overrides=tuple(check_overrides(sets).items())), CostOptions(batch=1, seq=seq, context=CONTEXT)


def _cached(kind: str, source: str, sets: list[str], seq: int, build: Any, use: bool, feedback: Feedback) -> Any:
    """The records-cache entry of `kind` for this model (the key of `archviz cost`'s, archviz.pipeline.cost_key)."""
    from .cached import cached
    from .cost import cost_key

    return cached(kind, source, cost_key(*_options(sets, seq)), (None, None, None), build, use=use,
                  feedback=feedback)


def failure(stage: str, e: BaseException) -> dict[str, str]:
    line = e.line() if isinstance(e, ArchvizError) else f"{type(e).__name__}: {one_line(str(e))}"
    return {"stage": stage, "reason": line[:400]}


def _partial(source: str, sets: list[str], failed: BaseException
             ) -> tuple[Any, list[dict[str, str]], BaseException | None]:
    """After the cost run failed: which stage it was, found by running them in turn (build, walk, shapes), the
    records of the last one that worked (None when the build failed), and the build's error where it failed."""
    from ..sources.dispatch import build
    from ..sources.guard import model_code
    from ..walk import walk

    try:
        with model_code():
            built = build(source, _options(sets, SEQ)[0])
    except Exception as e:  # noqa: BLE001 - the model's code may raise anything; it is reported, not ours
        return None, [failure("build", e)], e
    try:
        record = walk(built)
    except Exception as e:  # noqa: BLE001
        return None, [failure("walk", e)], e
    from ..shapes import trace_shapes

    try:
        with model_code("running the model on meta"):
            record = trace_shapes(built, record)
    except Exception as e:  # noqa: BLE001
        return record, [failure("shapes", e)], None
    return record, [failure("cost", failed)], None


PARTIAL = "gallery-partial"  # the records-cache kind of a model whose cost run failed: what it got to, and why
FAILED = "gallery-failed"  # the records-cache kind of a model whose build or walk failed: the failure alone


def from_cache(source: str, sets: list[str], seq: int, versions: dict[str, str] | None = None,
               timeout: float | None = None) -> tuple[Any, list[dict[str, str]], str | None] | None:
    """(records, failures, digest) of run_one(source, sets) if the records cache holds them (nothing built, torch
    not imported): the cost run's records, or those of a run that failed after the build, with its failures and
    the sha256 of the records as cached, or None, the failures of a build that failed (one that timed out only if
    `timeout` is no longer) and None; else None.
    `versions`: archviz.records.cache.versions(), read once by a caller looking up many models (it hashes archviz's own
    files)."""
    from .cached import cache_key
    from .cost import cost_key
    from ..records import cache as rc

    if rc.disabled():
        return None
    key = cost_key(*_options(sets, seq))
    for kind in ("cost", PARTIAL, FAILED):
        found = rc.lookup(cache_key(kind, source, key, versions=versions)[0])
        if found.record is not None:
            return found.record, list((found.record.extra("gallery") or {}).get("failures") or []), found.digest
        if found.failures is not None and kind == FAILED:
            waited = (found.failures[0] if found.failures else {}).get("timeout")
            if waited is not None and timeout is not None and timeout > waited:
                return None
            return None, found.failures, None
    return None


def _keep_failure(source: str, sets: list[str], seq: int, failures: list[dict[str, Any]], files: list[str]) -> None:
    """A build that failed, kept in the records cache (kind FAILED) with the files of the model's code it read
    (`files`, beside the source's own). A transformers type's code is the installed transformers (its version is in
    the key); another source whose code no file vouches for (a factory's module not found) is tried again next time."""
    from .cached import cache_key
    from .cost import cost_key
    from ..records import cache as rc

    if rc.disabled():
        return
    key, inputs = cache_key(FAILED, source, cost_key(*_options(sets, seq)))
    vouched = {p: d for p in {*inputs, *files} if (d := rc.sha256_file(p)) is not None}
    if vouched or source.startswith("hf:"):
        rc.store_failure(key, failures, vouched)


def run_one(source: str, sets: list[str], seq: int = SEQ, use_cache: bool = True,
            feedback: Feedback = QUIET) -> dict[str, Any]:
    """The gallery entry of one source built with `sets` and a prefill of `seq` tokens (build_choice's): {"source",
    "records" (compact JSON or None), "failures"}. `feedback`: its notes only (a caller's progress bar is live)."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    from ..records import dumps_compact
    from .cost import cost_for

    failures: list[dict[str, str]] = []
    before = set(sys.modules)
    try:
        record = cost_for(source, *_options(sets, seq), cache=use_cache, feedback=feedback)
    except (ArchvizError, Exception) as e:  # noqa: BLE001
        record, failures, error = _partial(source, sets, e)
        if isinstance(e, ShapeError) and failures and failures[0]["stage"] == "cost":
            failures = [failure("shapes", e)]
        # kept, so that a second run with nothing changed does not fail it again
        if record is not None:
            done = record.with_extra("gallery", {"failures": failures})
            record = _cached(PARTIAL, source, sets, seq, lambda: done, use_cache, feedback)
        elif error is not None and use_cache:
            from ..records import cache as rc

            # the modules it imported and the frames of its error: a module whose import failed is not imported
            _keep_failure(source, sets, seq, failures, [*rc.new_code_files(before), *rc.traceback_files(error)])
    return {"source": source, "failures": failures, "records": dumps_compact(record) if record is not None else None}


def _stderr_note(text: str) -> None:
    """A note in a forked model's process: to its stderr (its I.err file, whose last line a crash's reason quotes),
    control characters escaped as the terminal's notes are."""
    sys.stderr.write("note: " + "\n".join(map(printable, text.split("\n"))) + "\n")


_STDERR_NOTES = Feedback(note=_stderr_note)


def _warm() -> None:
    """What every model's count imports, imported once in the server (each fork shares it): about 4 s of CPU a model
    saved."""
    import torch  # noqa: F401
    import transformers.modeling_utils  # noqa: F401
    from transformers import AutoConfig, DynamicCache  # noqa: F401

    from ..cost import measure  # noqa: F401
    from ..group import group  # noqa: F401
    from ..shapes import trace_shapes  # noqa: F401
    from ..sources import hf  # noqa: F401
    from ..walk import walk  # noqa: F401


def _module_file(source: str) -> list[str]:
    """A `module:factory` source's module file, found without importing anything (a top-level module only: a
    package's module would run the package's code here)."""
    import importlib.util

    module, sep, _ = source.partition(":")
    if not sep or "." in module or not module.isidentifier() or os.path.exists(source):
        return []
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    origin = getattr(spec, "origin", None)
    return [origin] if isinstance(origin, str) and origin.endswith(".py") else []


def _result_file(folder: str, i: int) -> str:
    return os.path.join(folder, f"{i}.json")


def _failed(folder: str, i: int, source: str, why: str) -> None:
    from ..files.outputs import write_file

    write_file(_result_file(folder, i), json.dumps(
        {"source": source, "records": None, "failures": [{"stage": "build", "reason": why}]}).encode("utf-8"))


def _child(folder: str, i: int, source: str, sets: list[str], seq: int, use_cache: bool) -> None:
    """In the forked process: run_one, its result written to FOLDER/I.json, stdout to nowhere, stderr to I.err."""
    code = 1
    try:
        die_with_parent(os.getppid())  # the server: killed outright, it takes its models with it
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(os.open(os.path.join(folder, f"{i}.err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        result = run_one(source, sets, seq, use_cache, _STDERR_NOTES)
        from ..files.outputs import write_file

        write_file(_result_file(folder, i), json.dumps(result).encode("utf-8"))
        code = 0
    except BaseException:  # noqa: BLE001 - the model's code ended this process: the server says how
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read()[-8192:].strip().splitlines()
    except OSError:
        return ""
    return f": {lines[-1][:300]}" if lines else ""


def serve(folder: str, n: int, timeout: float, use_cache: bool) -> None:
    """The gallery's counting in N jobs: the jobs of FOLDER/jobs.json ([i, source, sets, seq] each), each run in
    a process forked from this one (torch and transformers imported once, here), N at a time: a model whose code
    crashes, hangs (past `timeout` seconds it is killed) or ends its process costs only its own result, FOLDER/I.json.
    Prints each finished job's I on stdout."""
    import signal
    import time

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    _warm()
    with open(os.path.join(folder, "jobs.json"), encoding="utf-8") as f:
        pending = [tuple(j) for j in json.load(f)]
    running: dict[int, tuple[int, str, float, list[str], int]] = {}

    def done(i: int) -> None:
        sys.stdout.write(f"{i}\n")
        sys.stdout.flush()  # nothing buffered is copied into the next fork

    while pending or running:
        while pending and len(running) < n:
            i, source, sets, seq = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(folder, i, source, list(sets), seq, use_cache)
            running[pid] = (i, source, time.monotonic(), list(sets), seq)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for p, (i, source, started, sets, seq) in list(running.items()):
                if now - started > timeout:
                    os.kill(p, signal.SIGKILL)
                    os.waitpid(p, 0)
                    del running[p]
                    why = f"timed out after {timeout:.0f} s ({option('timeout')})"
                    _failed(folder, i, source, why)
                    if use_cache:  # kept: a second run waits for it again only with a longer timeout
                        _keep_failure(source, sets, seq, [{"stage": "build", "reason": why, "timeout": timeout}],
                                      _module_file(source))
                    done(i)
            time.sleep(0.02)
            continue
        if pid not in running:
            continue
        i, source = running.pop(pid)[:2]
        if not os.path.exists(_result_file(folder, i)):
            _failed(folder, i, source, f"the worker process ended with status {os.waitstatus_to_exitcode(status)}"
                    + _tail(os.path.join(folder, f"{i}.err")))
        done(i)


def served(todo: list[tuple[int, str, list[str], int]], n: int, use_cache: bool, timeout: float,
           results: dict[int, dict[str, Any]], cb: Any) -> None:
    """`serve` in a process of its own, which forks one process per model from itself (torch imported once): a
    model whose code crashes, hangs or ends its process costs its row. `todo`: (i, source, sets, seq) each, its
    result put in `results[i]`; `cb(done, total)` as each ends."""
    import subprocess
    import tempfile

    from ..processes.environment import child_command
    from ..processes.owner import owned

    with tempfile.TemporaryDirectory(prefix="archviz-gallery-") as tmp:
        with open(os.path.join(tmp, "jobs.json"), "w", encoding="utf-8") as f:
            json.dump([list(j) for j in todo], f)
        # archviz's import path, never the current folder's (processes.environment); the server and every process it
        # forks in one group that ends with this block, whatever ends it (processes.owner)
        cmd = child_command("archviz.pipeline.gallery_jobs", tmp, str(n), str(timeout),
                            "cache" if use_cache else "no-cache")
        with open(os.path.join(tmp, "server.err"), "w+b") as errors, owned() as children:
            p = children.start(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True)
            assert p.stdout is not None
            with p.stdout:
                for done, _ in enumerate(p.stdout, 1):
                    cb(done, len(todo))
            p.wait()
            errors.seek(0)
            tail = errors.read()[-8192:].decode("utf-8", "replace").strip().splitlines()
        for i, source, _, _ in todo:
            try:
                with open(os.path.join(tmp, f"{i}.json"), encoding="utf-8") as f:
                    results[i] = json.load(f)
            except (OSError, ValueError):
                results[i] = {"source": source, "records": None, "failures": [{"stage": "build", "reason": (
                    f"the gallery's worker process ended with status {p.returncode}"
                    + (f": {tail[-1][:300]}" if tail else ""))}]}


def main(argv: list[str] | None = None) -> None:
    """`python -m archviz.pipeline.gallery_jobs FOLDER N TIMEOUT cache|no-cache`: serve (what the gallery starts once
    with N jobs, through `served`)."""
    die_with_parent()  # archviz killed outright: this server (and each model it forked) ends too
    args = list(sys.argv[1:] if argv is None else argv)
    folder, n, timeout, cache = args
    serve(folder, int(n), float(timeout), cache == "cache")


__all__ = ["run_one", "from_cache", "build_choice", "float32_instead", "shorter_prefill", "failure", "serve", "served",
           "CONTEXT", "SEQ", "main"]


if __name__ == "__main__":
    main()

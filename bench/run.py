"""`make bench`: time and peak RSS of archviz beside its peers, in one run, as ratios; writes BENCHMARKS.md.

Each case runs in a fresh subprocess (so peak RSS is its own) and reports seconds measured around the work only,
plus the process's peak RSS. Cases are grouped by issue; a group's first case is the baseline of its ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FIX = os.path.join(ROOT, "tests", "fixtures")
V3_FIXTURE = (os.path.join(FIX, "dsv3like", "model.py"), os.path.join(FIX, "dsv3like", "config_v3size.json"))
V4_FIXTURE = (os.path.join(FIX, "dsv41like", "model.py"), os.path.join(FIX, "dsv41like", "config_flash.json"))

CASES: dict[str, Callable[[], dict[str, Any]]] = {}
SHORT_ROUNDS = 6  # extra rounds for cases under a second: their timing is the most at the mercy of the machine


def case(name: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        CASES[name] = fn
        return fn
    return deco


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


# -- issue 2: walk vs bare meta construction vs torchinfo ------------------------------------------------------------

def _bare_fixture() -> Any:
    """What a user does by hand: import the reference (its missing kernel module replaced by an empty one), then
    `with torch.device("meta"): Transformer(ModelArgs(**config))` -- no archviz involved."""
    import types

    import torch

    sys.modules["kernel"] = types.ModuleType("kernel")
    for name in ("act_quant", "weight_dequant", "fp8_gemm", "fp4_gemm", "fp4_act_quant"):
        setattr(sys.modules["kernel"], name, None)
    sys.path.insert(0, os.path.dirname(V3_FIXTURE[0]))
    import model  # noqa: E402

    with open(V3_FIXTURE[1]) as f:
        args = model.ModelArgs(**json.load(f))
    with torch.device("meta"):
        return model.Transformer(args)


@case("bare meta build: V3-size fixture")
def bare_build_fixture() -> dict:
    seconds, m = _timed(_bare_fixture)
    return {"seconds": seconds, "modules": sum(1 for _ in m.modules())}


@case("archviz walk: V3-size fixture")
def walk_fixture() -> dict:
    import archviz
    from archviz.records import dumps

    def run():
        rec = archviz.load(V3_FIXTURE[0], config=V3_FIXTURE[1])
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "r.json"), "w") as f:
                f.write(dumps(rec))
        return rec
    seconds, rec = _timed(run)
    return {"seconds": seconds, "modules": rec.summary.modules, "parameters": rec.summary.parameters}


@case("torchinfo.summary (static): V3-size fixture")
def torchinfo_fixture() -> dict:
    import torchinfo

    def run():
        return torchinfo.summary(_bare_fixture(), verbose=0)
    seconds, stats = _timed(run)
    return {"seconds": seconds, "parameters": stats.total_params}


# -- issue 3: walk with shapes ---------------------------------------------------------------------------------------

@case("archviz walk --shapes: V3-size fixture")
def shapes_fixture() -> dict:
    import archviz
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    def run():
        built = archviz.build(V3_FIXTURE[0], config=V3_FIXTURE[1])
        return trace_shapes(built, walk(built))
    seconds, rec = _timed(run)
    return {"seconds": seconds, "called": sum(1 for m in rec.modules if m.called)}


@case("archviz walk --shapes, the sound memo against every block run: dsv41like")
def memo_against_every_block() -> dict:
    """The memo runs a layer once per path its forward takes (archviz/shapes/layerpaths.py); --every-block runs all."""
    import archviz
    from archviz.shapes import PassRun, trace_shapes
    from archviz.walk import walk

    spec, config = os.path.join(FIX, "dsv41like", "model.py"), os.path.join(FIX, "dsv41like", "config.json")
    built = archviz.build(spec, config=config)
    record = walk(built)
    trace_shapes(built, record, run=PassRun(memo=True))  # the first pass pays for torch's one-off set-up: untimed
    seconds, _ = _timed(lambda: trace_shapes(built, record, run=PassRun(memo=True)))
    every, _ = _timed(lambda: trace_shapes(built, record, run=PassRun(memo=False)))
    return {"seconds": seconds, "every_block_seconds": every}


# layers whose forwards part on attributes, not on their number: an enum (sliding or full attention), use_lora from
# layer_id, and an init_scale on every layer that no forward reads (BENCH_ATTRS: the fixture at a size worth timing)
ATTRS_FIXTURE = (os.path.join(FIX, "layerattrs", "model.py"), os.path.join(FIX, "layerattrs", "config.json"))
BENCH_ATTRS = {"n_layers": 48, "dim": 256, "n_heads": 4, "hidden": 1024, "window": 64, "note_init": True}


@case("archviz cost's prefill pass, the sound memo against every block run: layerattrs (attributes differ)")
def memo_attributes_against_every_block() -> dict:
    """The prefill pass that counts FLOPs (archviz.cost.measure), memoised (a layer run once per path its forward
    takes, by the attributes it reads: archviz/shapes/attrreads.py) and with every block run (--every-block); the
    FLOPs of both, which must be equal."""
    import archviz
    from archviz.cost.measure import _pass
    from archviz.walk import walk

    built = archviz.build(ATTRS_FIXTURE[0], config=ATTRS_FIXTURE[1], overrides=BENCH_ATTRS)
    record = walk(built)

    def flops(memo: bool) -> int:
        return sum(e[1] for e in _pass(built, record, batch=1, seq=512, memo=memo)[1].events)
    flops(True)  # the first pass of a process pays for what torch sets up once (dispatch caches): not timed
    seconds, memoised = _timed(lambda: flops(True))
    every, all_run = _timed(lambda: flops(False))
    return {"seconds": seconds, "every_block_seconds": every, "flops": memoised, "flops_equal": memoised == all_run}


@case("archviz walk --shapes -o: V3-size fixture")
def shapes_written_fixture() -> dict:
    """What `archviz walk MODEL --shapes -o FILE` does: build, walk, the meta pass (with the second pass that names
    the dims by evidence) and the compact records file written. evidence_seconds: the second pass alone."""
    import archviz
    from archviz.records import dumps_compact
    from archviz.shapes import evidence, trace_shapes
    from archviz.walk import walk

    spent = [0.0]
    second = evidence.second_pass

    def timed(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return second(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t

    import archviz.shapes.trace as trace
    trace.second_pass = timed

    def run():
        built = archviz.build(V3_FIXTURE[0], config=V3_FIXTURE[1])
        rec = trace_shapes(built, walk(built))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "r.json"), "w") as f:
                f.write(dumps_compact(rec))
        return rec
    seconds, rec = _timed(run)
    return {"seconds": seconds, "called": sum(1 for m in rec.modules if m.called), "evidence_seconds": spent[0]}


@case("bare meta build: transformers deepseek_v3")
def bare_build_hf_v3() -> dict:
    import torch
    import transformers

    config = transformers.AutoConfig.for_model("deepseek_v3")

    def run():
        with torch.device("meta"):
            return transformers.AutoModelForCausalLM.from_config(config)
    with torch.device("meta"):  # import the modeling code outside the timing
        transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model("llama",
                                                                                        num_hidden_layers=1))
    seconds, _ = _timed(run)
    return {"seconds": seconds}


@case("archviz walk --shapes: transformers deepseek_v3")
def shapes_hf_v3() -> dict:
    import archviz
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    archviz.build("hf:llama", overrides={"num_hidden_layers": 1})

    split: dict[str, float] = {}

    def run():
        t0 = time.perf_counter()
        built = archviz.build("hf:deepseek_v3")
        t1 = time.perf_counter()
        record = walk(built)
        t2 = time.perf_counter()
        out = trace_shapes(built, record)
        split.update(build=t1 - t0, walk=t2 - t1, shapes=time.perf_counter() - t2)
        return out
    seconds, rec = _timed(run)
    return {"seconds": seconds, "called": sum(1 for m in rec.modules if m.called),
            **{f"{k}_seconds": round(v, 3) for k, v in split.items()}}


# -- issue 4: grouping -----------------------------------------------------------------------------------------------

@case("walk + grouping: V3-size fixture")
def grouping_fixture() -> dict:
    import archviz
    from archviz.walk import walk

    built = archviz.build(V3_FIXTURE[0], config=V3_FIXTURE[1])
    walk_s, rec = _timed(lambda: walk(built))
    try:
        from archviz.group import group
    except ImportError:
        return {"seconds": walk_s, "note": "grouping not available"}
    group_s, _ = _timed(lambda: group(rec))
    return {"seconds": walk_s + group_s, "walk_seconds": walk_s, "group_seconds": group_s,
            "group_over_walk": group_s / walk_s}


# -- issue 6: site build -----------------------------------------------------------------------------------------------

def _site(spec: str, config: str | None, cost: bool = False) -> dict:
    import archviz
    from archviz.group import group
    from archviz.shapes import trace_shapes
    from archviz.render.site import build_site
    from archviz.walk import walk

    t0 = time.perf_counter()
    built = archviz.build(spec, config=config)
    rec = group(trace_shapes(built, walk(built)))
    del built
    cost_s = None
    if cost:  # what `archviz build --cost` adds: the cost extra at 1K .. 1M (or the config's max positions)
        from archviz.cost.measure import measure
        from archviz.cost.options import CostOptions
        from archviz.sources.options import BuildOptions

        t1 = time.perf_counter()
        rec = rec.with_extra("cost", measure(spec, BuildOptions(config=config),
                                             CostOptions(context=None, contexts="auto")).extra("cost"))
        cost_s = time.perf_counter() - t1
    records_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "site")
        seconds, _ = _timed(lambda: build_site([rec], out))
        size = files = 0
        for root, _, names in os.walk(out):
            for n in names:
                files += 1
                size += os.path.getsize(os.path.join(root, n))
    return {"seconds": seconds, "records_seconds": records_s, "size_mb": size / 2**20, "files": files,
            **({"cost_seconds": cost_s} if cost else {})}


@case("archviz build (render): V3-size fixture")
def site_fixture() -> dict:
    return _site(*V3_FIXTURE)


@case("archviz build --cost (render): V3-size fixture")
def site_cost_fixture() -> dict:
    return _site(*V3_FIXTURE, cost=True)


@case("archviz build (render): transformers deepseek_v3")
def site_hf_v3() -> dict:
    return _site("hf:deepseek_v3", None)


# -- issue 21: diff of two records files -------------------------------------------------------------------------------

@case("archviz diff: two V3-size records files")
def diff_fixture() -> dict:
    """Two records files written as `archviz walk --shapes -o` writes them: the V3-size fixture, and the same with
    60 layers and q_lora_rank 1024 (a removed layer, and changed projections in every layer). Timed: the diff of
    the two records (`seconds`), and reading the two files before it (`read_seconds`), apart."""
    import archviz
    from archviz.diff import diff
    from archviz.gcpause import collector_paused
    from archviz.records import dumps_compact, loads
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, overrides in (("a", {}), ("b", {"n_layers": 60, "q_lora_rank": 1024})):
            built = archviz.build(V3_FIXTURE[0], config=V3_FIXTURE[1], overrides=overrides)
            path = os.path.join(d, f"{name}.json")
            with open(path, "w") as f:
                f.write(dumps_compact(trace_shapes(built, walk(built))))
            paths.append(path)
            del built

        def read():
            with collector_paused():
                return [loads(open(p).read()) for p in paths]
        read_s, (a, b) = _timed(read)
        seconds, result = _timed(lambda: diff(a, b))
    return {"seconds": seconds, "read_seconds": read_s, "modules": a.summary.modules + b.summary.modules,
            "entries": len(result.folded), "changed_modules": len(result.nodes)}


# -- issue 22: the compact records file, read back ------------------------------------------------------------------

@case("records file read back (archviz.records/3): V3-size fixture")
def records_v3_fixture() -> dict:
    """The V3-size fixture's records with shapes as `walk -o` writes them: size, and the time to read them back (what
    `summary`, `inspect`, `check` and `diff` of a records file do first); torch is imported by the build before."""
    import archviz
    from archviz.records import dumps, dumps_compact, loads
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    built = archviz.build(V3_FIXTURE[0], config=V3_FIXTURE[1])
    rec = trace_shapes(built, walk(built))
    del built
    write_s, text = _timed(lambda: dumps_compact(rec))
    v1 = len(dumps(rec))
    from archviz.gcpause import collector_paused

    def read() -> Any:
        with collector_paused():  # as the CLI's reader (archviz/cli/common.py read_records) reads a records file
            return loads(text)
    seconds, back = _timed(read)
    assert back == rec
    return {"seconds": seconds, "write_seconds": write_s, "size_mb": len(text) / 1e6, "v1_size_mb": v1 / 1e6}


# -- issue 22: whole commands a user runs twice: a cache hit, and check of a records file -------------------------------

V3_MANIFEST = os.path.join(ROOT, "tests", "data", "checkpoints", "deepseek-v3.manifest.json.gz")


def _command(args: list[str], env: dict[str, str] | None = None, flags: tuple[str, ...] = ()
             ) -> tuple[float, float, int, str, str]:
    """A whole `python -m archviz.cli` command as a user runs it: (wall seconds from spawn to exit, the command's own
    peak RSS in MB (wait4), exit code, stdout, stderr)."""
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, *flags, "-m", "archviz.cli", *args], cwd=ROOT, stdout=o, stderr=e,
                             env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
        _, status, usage = os.wait4(p.pid, 0)
        seconds = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        return seconds, usage.ru_maxrss / 1024, p.returncode, o.read().decode(), e.read().decode()


@case("archviz inspect layer 3, second run (cache hit, whole command): V3-size fixture")
def inspect_cache_hit_fixture() -> dict:
    """`archviz inspect model.py -c config_v3size.json layer 3` run a second time: the records come from the cache
    (built by a first run outside the timing, in a cache folder of the bench's own); the hit imports no torch."""
    env = {"XDG_CACHE_HOME": os.path.join(tempfile.gettempdir(), "archviz-bench-cache")}
    args = ["inspect", V3_FIXTURE[0], "-c", V3_FIXTURE[1], "layer", "3"]
    *_, rc, first, err = _command(args, env)  # a build, unless an earlier round left the entry
    assert rc == 0, err[-500:]
    seconds, peak, rc, again, err = _command(args, env)
    assert rc == 0 and again == first, err[-500:]
    *_, err = _command(args, env, ("-X", "importtime"))
    torch_imported = any(line.rsplit("|", 1)[-1].strip() == "torch" for line in err.splitlines())
    return {"seconds": seconds, "peak_rss_mb": peak, "torch_imported": torch_imported}


def _from_records_file(args: list[str]) -> dict:
    """`archviz ARGS` on the V3-size fixture's records with shapes (written by `walk --shapes -o` outside the
    timing, once per bench run), as a whole command: the lazy reader makes only the modules the command shows."""
    records = os.path.join(tempfile.gettempdir(), "archviz-bench-v3-shapes.json")
    if not os.path.exists(records):
        *_, rc, _, err = _command(["walk", V3_FIXTURE[0], "-c", V3_FIXTURE[1], "--shapes", "-o", records + ".tmp",
                                   "--no-cache"])
        assert rc == 0, err[-500:]
        os.replace(records + ".tmp", records)
    seconds, peak, rc, text, err = _command([args[0], records, *args[1:]])
    assert rc == 0 and text, err[-500:]
    *_, err = _command([args[0], records, *args[1:]], None, ("-X", "importtime"))
    imported = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines()}
    return {"seconds": seconds, "peak_rss_mb": peak, "torch_imported": "torch" in imported,
            "transformers_imported": "transformers" in imported, "size_mb": os.path.getsize(records) / 1e6}


@case("archviz summary records.json (whole command): V3-size fixture")
def summary_records_fixture() -> dict:
    return _from_records_file(["summary"])


@case("archviz inspect records.json layer 3 (whole command): V3-size fixture")
def inspect_records_fixture() -> dict:
    return _from_records_file(["inspect", "layer", "3"])


@case("archviz check records.json (whole command): V3-size fixture vs the V3 manifest")
def check_records_fixture() -> dict:
    """`archviz check records.json -k deepseek-v3.manifest.json.gz`: the V3-size fixture's records (its experts fp8,
    as the checkpoint stores them; written by `walk -o` outside the timing) against 91,991 tensors' headers."""
    with tempfile.TemporaryDirectory() as d:
        records = os.path.join(d, "v3.json")
        *_, rc, _, err = _command(["walk", V3_FIXTURE[0], "-c", V3_FIXTURE[1], "--set", "expert_dtype=fp8", "-o",
                                   records, "--no-cache"])
        assert rc == 0, err[-500:]
        seconds, peak, rc, text, err = _command(["check", records, "-k", V3_MANIFEST, "--json"])
        assert rc == 0, err[-500:]
        result = json.loads(text)
        *_, err = _command(["check", records, "-k", V3_MANIFEST, "--json"], None, ("-X", "importtime"))
        imported = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines()}
    return {"seconds": seconds, "peak_rss_mb": peak, "verdict": result["verdict"],
            "matched_tensors": result["summary"]["tensors"]["match"], "torch_imported": "torch" in imported,
            "transformers_imported": "transformers" in imported}


# -- issue 20: cost (FLOPs, KV cache, memory) at L = 1M beside the meta pass at T = 128 and FlopCounterMode ----------

def _cost(spec: str, config: str | None) -> dict:
    import archviz.group  # noqa: F401 - the stages measure() runs, imported outside the timing as the meta pass's
    import archviz.shapes  # noqa: F401   case above imports walk and trace_shapes before it (measure imports them
    import archviz.walk  # noqa: F401     lazily: 40-80 ms of module imports the baseline's timing does not hold)
    from archviz.cost.measure import measure
    from archviz.cost.options import CostOptions
    from archviz.cost.report import cost_report
    from archviz.sources.options import BuildOptions

    if spec.startswith("hf:"):
        archviz_build_warm()
    build, options = BuildOptions(config=config), CostOptions(batch=1, seq=128, context=1 << 20)
    seconds, rec = _timed(lambda: measure(spec, build, options))
    r = cost_report(rec)
    return {"seconds": seconds, "prefill_tflop": r.prefill.flops / 1e12,
            "decode_tflop": r.decode.flops / 1e12 if r.decode else None, "kv_bytes_per_token": r.kv.per_token,
            "unknown": len(r.prefill.unknown) + (len(r.decode.unknown) if r.decode else 0)}


def archviz_build_warm() -> None:
    """Import transformers' modeling code outside the timing (the bare builds do the same)."""
    import archviz

    archviz.build("hf:llama", overrides={"num_hidden_layers": 1})


@case("archviz cost at L=1M: V3-size fixture")
def cost_fixture() -> dict:
    return _cost(*V3_FIXTURE)


@case("archviz cost at L=1M: transformers deepseek_v3")
def cost_hf_v3() -> dict:
    return _cost("hf:deepseek_v3", None)


def _flopcounter(spec: str, config: str | None) -> dict:
    """The peer: torch's FlopCounterMode. A bare meta forward of these models stops at the first `.item()` (meta
    has no values), so it runs around archviz's meta pass, whose policy answers them, with every block run (it
    cannot see blocks answered from the memo)."""
    import archviz
    from archviz.shapes import PassRun, trace_shapes
    from archviz.walk import walk
    from torch.utils.flop_counter import FlopCounterMode

    if spec.startswith("hf:"):
        archviz_build_warm()

    def run():
        built = archviz.build(spec, config=config)
        record = walk(built)
        with FlopCounterMode(display=False) as counter:
            trace_shapes(built, record, batch=1, seq=128, run=PassRun(memo=False))
        return counter.get_total_flops()
    seconds, total = _timed(run)
    return {"seconds": seconds, "prefill_tflop": total / 1e12}


@case("FlopCounterMode around the meta pass at T=128: V3-size fixture")
def flopcounter_fixture() -> dict:
    return _flopcounter(*V3_FIXTURE)


@case("FlopCounterMode around the meta pass at T=128: transformers deepseek_v3")
def flopcounter_hf_v3() -> dict:
    return _flopcounter("hf:deepseek_v3", None)


# -- issue 45: a GGUF header read by archviz beside gguf's own GGUFReader ----------------------------------------------

_GGUF_LAYERS = 111  # 9 tensors a layer + embedding, norm and output: 1,002 tensors


def _gguf_1000() -> tuple[str, str]:
    """A llama GGUF of 1,002 tensors (Q8_0 matrices, F32 norms) and its config.json, written once per bench run in
    the temp folder: the header by gguf's GGUFWriter, the data region left sparse (os.truncate)."""
    folder = os.path.join(tempfile.gettempdir(), "archviz-bench-gguf")
    path, config = os.path.join(folder, "m.gguf"), os.path.join(folder, "config.json")
    if os.path.exists(path) and os.path.exists(config):
        return path, config
    import gguf
    import numpy as np

    os.makedirs(folder, exist_ok=True)
    h, ff, vocab = 64, 128, 256
    with open(config, "w") as f:
        json.dump({"model_type": "llama", "hidden_size": h, "intermediate_size": ff, "vocab_size": vocab,
                   "num_hidden_layers": _GGUF_LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "tie_word_embeddings": False}, f)
    shapes = {"token_embd.weight": (vocab, h), "output_norm.weight": (h,), "output.weight": (vocab, h)}
    for i in range(_GGUF_LAYERS):
        shapes.update({f"blk.{i}.attn_q.weight": (h, h), f"blk.{i}.attn_k.weight": (h // 2, h),
                       f"blk.{i}.attn_v.weight": (h // 2, h), f"blk.{i}.attn_output.weight": (h, h),
                       f"blk.{i}.ffn_gate.weight": (ff, h), f"blk.{i}.ffn_up.weight": (ff, h),
                       f"blk.{i}.ffn_down.weight": (h, ff), f"blk.{i}.attn_norm.weight": (h,),
                       f"blk.{i}.ffn_norm.weight": (h,)})
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(_GGUF_LAYERS)
    total = 0
    for name, shape in shapes.items():
        n = int(np.prod(shape))
        q = gguf.GGMLQuantizationType.Q8_0 if len(shape) == 2 else gguf.GGMLQuantizationType.F32
        nbytes = n // 32 * 34 if len(shape) == 2 else 4 * n
        stored = (shape[0], shape[1] // 32 * 34) if len(shape) == 2 else shape  # a quant type's shape is in bytes
        w.add_tensor_info(name, stored, np.dtype(np.uint8) if len(shape) == 2 else np.dtype(np.float32), nbytes,
                          raw_dtype=q)
        total += -(-nbytes // 32) * 32
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    os.truncate(path, -(-os.path.getsize(path) // 32) * 32 + total)  # the data region begins aligned
    return path, config


@case("archviz check: a 1,000-tensor GGUF (whole command)")
def check_gguf_1000() -> dict:
    path, config = _gguf_1000()
    seconds, peak, rc, text, err = _command(["check", config, "-k", path, "--json"])
    assert rc == 0, err[-500:]
    from archviz.checkpoint import open_checkpoint
    from archviz.checkpoint.ggml_types import type_names

    type_names()  # gguf imported outside the timing, as the GGUFReader case imports it
    header_seconds, inv = _timed(lambda: open_checkpoint(path))
    return {"seconds": seconds, "peak_rss_mb": peak, "header_seconds": header_seconds, "tensors": len(inv.tensors),
            "verdict": json.loads(text)["verdict"]}


@case("gguf.GGUFReader opening the same 1,000-tensor GGUF")
def gguf_reader_1000() -> dict:
    path, _ = _gguf_1000()
    import gguf

    seconds, reader = _timed(lambda: gguf.GGUFReader(path))
    return {"seconds": seconds, "tensors": len(reader.tensors)}
# -- issue 43: archviz.summary of a live CPU model beside torchinfo's summary of it ---------------------------------

def _live_llama() -> tuple[Any, int]:
    """A llama of 1 GiB of float32 weights on the CPU, every page written (as a trained model's are), and its size."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5504, num_hidden_layers=4, num_attention_heads=16,
                      vocab_size=16000)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(0.01)
    return model, sum(p.numel() * p.element_size() for p in model.parameters())


def _in_process(run: Callable[[Any], Any]) -> dict:
    """`run(model)` timed on the live llama; its peak RSS above the process's with the model built (the weights are
    never copied: within 10% of the model's own size)."""
    model, size = _live_llama()
    import archviz.group  # noqa: F401 - the library's imports before the baseline
    import archviz.render.results  # noqa: F401

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    seconds, _ = _timed(lambda: run(model))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "model_mb": size / 2**20, "peak_rss_mb": after, "above_model_mb": after - before}


@case("archviz.summary(model) in-process: a 1 GiB CPU llama")
def summary_live() -> dict:
    import archviz

    return _in_process(lambda model: archviz.summary(model, shapes=True))


@case("torchinfo.summary(model) in-process: the same CPU llama")
def torchinfo_live() -> dict:
    import torchinfo

    return _in_process(lambda model: torchinfo.summary(model, verbose=0))


def run_case(name: str) -> dict:
    out = CASES[name]()
    out.setdefault("peak_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # or the command's
    return out


GROUPS = [
    ("Issue 2 — walk (build + walk + JSON) vs bare meta construction and torchinfo", [
        "bare meta build: V3-size fixture", "archviz walk: V3-size fixture",
        "torchinfo.summary (static): V3-size fixture"], "goal: walk ≤ 1.5× bare build"),
    ("Issue 3 — walk with shapes vs bare meta construction", [
        "bare meta build: V3-size fixture", "archviz walk --shapes: V3-size fixture",
        "bare meta build: transformers deepseek_v3", "archviz walk --shapes: transformers deepseek_v3"],
     "goal: ≤ 2× (fixture), ≤ 1.5× (transformers); each ratio is against the bare build above it"),
    ("Issue 22 — walk --shapes -o (build, walk, meta pass with the dims' second pass, records written) vs bare "
     "meta construction", ["bare meta build: V3-size fixture", "archviz walk --shapes -o: V3-size fixture"],
     "goal: ≤ 1.3× bare build"),
    ("Issue 4 — grouping added to the walk", ["walk + grouping: V3-size fixture"], "goal: grouping ≤ 20% of walk"),
    ("Issue 6 — site build (render of the grouped records with shapes; records_seconds is the meta build + walk + "
     "shapes + grouping before it; with --cost, cost_seconds of it: the prefill and a decode step at each L)",
     ["archviz build (render): V3-size fixture", "archviz build --cost (render): V3-size fixture",
      "archviz build (render): transformers deepseek_v3"],
     "goal: ≤ 10 s and ≤ 30 MB for the fixture"),
    ("Issue 21 — diff of two V3-size records files (seconds: the diff of the records; read_seconds: reading the two "
     "files before it)", ["archviz diff: two V3-size records files"], "goal: ≤ 2 s"),
    ("Issue 22 — the compact records file (archviz.records/3): seconds to read it back (the lazy reader: the file "
     "checked whole, no module made), write_seconds to write it; in a process that built the model first",
     ["records file read back (archviz.records/3): V3-size fixture"], "goal: ≤ 8 MB"),
    ("Issue 22 — whole commands as a user runs them (seconds from spawn to exit; peak RSS of the command)",
     ["archviz summary records.json (whole command): V3-size fixture",
      "archviz inspect records.json layer 3 (whole command): V3-size fixture",
      "archviz inspect layer 3, second run (cache hit, whole command): V3-size fixture",
      "archviz check records.json (whole command): V3-size fixture vs the V3 manifest"],
     "goal: summary/inspect from the records file ≤ 0.5 s and ≤ 150 MB; the cache hit ≤ 0.5 s; check records.json "
     "≤ 1 s"),
    ("Issue 45 — a GGUF's header: archviz check (whole command: the model built on meta, the header read, the "
     "comparison; header_seconds: the header alone, in the library) beside gguf's GGUFReader opening the file",
     ["gguf.GGUFReader opening the same 1,000-tensor GGUF", "archviz check: a 1,000-tensor GGUF (whole command)"],
     "goal: the header read ≤ GGUFReader's open"),
    ("Issue 43 — archviz.summary(model) of a live 1 GiB CPU model (walked in place, the pass on a meta stand-in) "
     "beside torchinfo.summary(model) (static) on the same model; above_model_mb: peak RSS above the process with the "
     "model built", ["torchinfo.summary(model) in-process: the same CPU llama",
                     "archviz.summary(model) in-process: a 1 GiB CPU llama"],
     "goal: above_model_mb ≤ 10% of model_mb (the weights never copied)"),
    ("Issue 20 — cost (prefill at T=128, decode and KV cache at L=1M) vs the meta pass at T=128 (walk --shapes) and "
     "FlopCounterMode", [
         "archviz walk --shapes: V3-size fixture", "archviz cost at L=1M: V3-size fixture",
         "FlopCounterMode around the meta pass at T=128: V3-size fixture",
         "archviz walk --shapes: transformers deepseek_v3", "archviz cost at L=1M: transformers deepseek_v3",
         "FlopCounterMode around the meta pass at T=128: transformers deepseek_v3"],
     "goal: cost ≤ 1.5× the meta pass above it; ratios here are against the meta pass (walk --shapes) above"),
    ("Issue 42 — the sound memo: the meta pass memoised (a layer run once per path its forward takes, by its layer "
     "numbers and the attributes it reads) vs every block run (--every-block, in every_block_seconds)", [
         "archviz walk --shapes, the sound memo against every block run: dsv41like",
         "archviz cost's prefill pass, the sound memo against every block run: layerattrs (attributes differ)"],
     "goal: memoised ≤ 1.2× the old memo (keyed by the layer number only; its figures, taken beside this code's on "
     "2026-12-06: BENCHMARKS.md, Session 17) with FLOPs equal to every block run's"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case")
    ap.add_argument("--only", help="substring of case names (or of a group title) to run; prints, writes no file")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each case; the fastest is reported")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    results: dict[str, dict] = {}
    # archviz's bytecode, compiled as `pip install` compiles a package's: an editable checkout under
    # PYTHONDONTWRITEBYTECODE=1 (this machine's environment) would otherwise compile every module it imports again in
    # every command (about 0.14 s of a whole command), which no installed copy does
    import compileall

    compileall.compile_dir(os.path.join(ROOT, "archviz"), quiet=1)
    stale = os.path.join(tempfile.gettempdir(), "archviz-bench-v3-shapes.json")  # the records cases' file: written by
    if os.path.exists(stale):  # this run's code
        os.remove(stale)
    extra_groups = []
    for mod_name in ("bench_checkpoint", "bench_probe", "bench_probe_tp"):
        try:
            mod = __import__(f"bench.{mod_name}", fromlist=["run"])
        except ImportError:
            continue
        if not args.only or args.only in getattr(mod, "TITLE", mod_name):
            extra_groups.append(mod)
    names = [n for n in dict.fromkeys(n for _, ns, _ in GROUPS for n in ns) if not args.only or args.only in n]

    def once(name: str) -> dict:
        proc = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
        if proc.returncode != 0:
            return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
        return json.loads(proc.stdout.strip().splitlines()[-1])

    # A shared 2-core VM is noisy, in phases: rounds interleave the cases (a slow phase hits a baseline and the case
    # measured against it alike), and the fastest run of each is reported. Sub-second cases get SHORT_ROUNDS more.
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(max(1, args.repeat)):
        for name in names:
            if not any("error" in r for r in runs[name]):
                runs[name].append(once(name))
    short = [n for n in names if all(r.get("seconds", 99) < 1 for r in runs[n])]
    for _ in range(SHORT_ROUNDS if args.repeat > 1 else 0):
        for name in short:
            runs[name].append(once(name))
    for name in names:
        done = runs[name]
        errors = [r for r in done if "error" in r]
        r = results[name] = errors[0] if errors else min(done, key=lambda x: x.get("seconds", float("inf")))
        if len(done) > 1:
            r["runs"] = len(done)
        print(f"{name:58s} {r.get('seconds', float('nan')):8.2f} s {r.get('peak_rss_mb', float('nan')):8.0f} MB"
              + (f"  ERROR {r['error']}" if "error" in r else ""), flush=True)
    lines = ["# Benchmarks", "",
             f"`make bench` on {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             f"{time.strftime('%Y-%m-%d')}. Each case runs in its own process, in {args.repeat} rounds that interleave "
             f"the cases ({args.repeat + SHORT_ROUNDS} for sub-second cases); the fastest run is "
             "reported (time is the work only; peak RSS is that process's). Ratios are against the bare build above "
             "them. The bare builds are plain torch constructions on meta, without archviz. archviz's bytecode is "
             "compiled first, as `pip install` does (this machine sets PYTHONDONTWRITEBYTECODE=1).", ""]
    for title, ns, goal in GROUPS:
        lines += [f"## {title}", "", goal, "", "| case | seconds | ratio | peak RSS (MB) | notes |",
                  "|---|---:|---:|---:|---|"]
        base = None
        for n in ns:
            r = results.get(n)
            if r is None:
                continue
            if n.startswith("bare meta build") or (title.startswith("Issue 20") and n.startswith("archviz walk")):
                base = r.get("seconds")
            ratio = (r["seconds"] / base) if base and "seconds" in r else None
            notes = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
                              if k not in ("seconds", "peak_rss_mb"))
            sec = r.get("seconds", float("nan"))
            shown = f"{sec:.3f}" if sec < 1 else f"{sec:.2f}"
            lines.append(f"| {n} | {shown} | "
                         f"{'—' if ratio is None else f'{ratio:.2f}×'} | {r.get('peak_rss_mb', float('nan')):.0f} | "
                         f"{notes} |")
        lines.append("")
    for mod in extra_groups:
        rows = mod.run()
        lines += [f"## {getattr(mod, 'TITLE', mod.__name__)}", "", getattr(mod, "GOAL", ""), "",
                  "| case | seconds | peer | ratio | peak RSS (MB) |", "|---|---:|---|---:|---:|"]
        for row in rows:
            ratio = row.get("ratio")
            lines.append(f"| {row['name']} | {row['seconds']:.3f} | {row.get('peer') or '—'} | "
                         f"{'—' if ratio is None else f'{ratio:.2f}×'} | {row.get('peak_rss_mb', float('nan')):.0f} |")
            print(f"{row['name']:58s} {row['seconds']:8.3f} s  ratio {ratio}")
        lines.append("")
    if args.only:  # a partial run would overwrite the full table with a part of it
        return
    with open(os.path.join(ROOT, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote BENCHMARKS.md")


if __name__ == "__main__":
    main()

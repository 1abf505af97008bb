"""Checkpoint reading benchmarks (issue 5): archviz's header-only reader beside a plain safetensors loop.

`run()` returns rows {name, seconds, peak_rss_mb, peer, ratio} (plus cpu_seconds, the process CPU time of the same
work, steadier than wall time on a busy machine, and what the case counted):

- the peer: a plain loop of `safetensors.safe_open` over DeepSeek-V3's 163 shards (rebuilt byte for byte as sparse
  files of their full size, no disk used) reading every tensor's name, dtype and shape;
- `open_checkpoint` on the same 163 sparse shards (their index), and on the header-only V3 manifest (goal ≤ 0.5 s,
  and no slower than the peer);
- optionally `compare` of hf:deepseek_v3 with the manifest (model build not timed; no peer).

Each case runs in a fresh subprocess: seconds are measured around the work only, peak RSS is the subprocess's
peak RSS (``VmHWM``, else ``ru_maxrss``). Every import a case needs happens before its timer starts, the peer's
included: ``safe_open(..., framework="numpy")`` imports numpy on first use (~0.09 s in a fresh process), so the
peer snippet imports numpy up front, just as the archviz snippets import archviz before timing. `python bench/bench_checkpoint.py` prints the rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

TITLE = "Issue 5 — checkpoint headers: archviz beside a plain safetensors.safe_open loop"
GOAL = ("goal: ≤ 0.5 s for the manifest, and no slower than the plain loop (ratio ≤ 1); fastest of 7 rounds that "
        "interleave the cases")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V3_MANIFEST = os.path.join(ROOT, "tests", "data", "checkpoints", "deepseek-v3.manifest.json.gz")
PEER = "safetensors.safe_open loop: V3, 163 sparse shards (names, dtypes, shapes)"

# Each case is a snippet run in a fresh interpreter; it sets `out` (a dict) and may use `folder` and `manifest`.
_CASES: dict[str, str] = {
    PEER: """
import glob
import numpy  # framework="numpy" imports it on first use: import it before the timer, as archviz's imports are
from safetensors import safe_open
paths = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
t = time.perf_counter(); c = time.process_time()
n = 0
for p in paths:
    with safe_open(p, framework="numpy") as f:
        for k in f.keys():
            s = f.get_slice(k)
            s.get_dtype(), s.get_shape()
            n += 1
out = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c, "tensors": n, "shards": len(paths)}
""",
    "archviz open_checkpoint: V3, 163 sparse shards": """
from archviz.checkpoint import open_checkpoint
t = time.perf_counter(); c = time.process_time()
inv = open_checkpoint(folder)
out = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c, "tensors": len(inv.tensors), "shards": len(inv.shards)}
""",
    "archviz open_checkpoint: V3 header-only manifest": """
from archviz.checkpoint import open_checkpoint
t = time.perf_counter(); c = time.process_time()
inv = open_checkpoint(manifest)
out = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c, "tensors": len(inv.tensors), "shards": len(inv.shards)}
""",
    "archviz compare: hf:deepseek_v3 vs V3 manifest (build not timed)": """
import archviz
from archviz.checkpoint import compare, open_checkpoint
rec = archviz.load("hf:deepseek_v3")
t = time.perf_counter(); c = time.process_time()
res = compare(rec, open_checkpoint(manifest)).extra("checkpoint")
out = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c, "verdict": res["verdict"], "matched": res["summary"]["matched"]}
""",
}

_PRELUDE = """
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
folder, manifest = {folder!r}, {manifest!r}
"""
_EPILOGUE = """
def _peak_mb():
    # VmHWM is this process image's own peak; ru_maxrss survives exec and may report the parent's peak.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024
out["peak_rss_mb"] = _peak_mb()
print("BENCH " + json.dumps(out))
"""


def _run_case(name: str, folder: str, manifest: str, timeout: float = 600) -> dict[str, Any]:
    code = _PRELUDE.format(root=ROOT, folder=folder, manifest=manifest) + _CASES[name] + _EPILOGUE
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    for line in p.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    raise RuntimeError(f"{name}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-500:]}")


def run(include_compare: bool = False, repeat: int = 7) -> list[dict[str, Any]]:
    """Rows {name, seconds, peak_rss_mb, peer, ratio}; seconds are the best of ``repeat`` runs (each its own
    subprocess), peak RSS that of the best run; ``ratio`` = seconds / the peer's seconds."""
    sys.path.insert(0, ROOT)
    from archviz.checkpoint.synth import write_sparse_shards

    names = list(_CASES)
    if not include_compare:
        names = [n for n in names if not n.startswith("archviz compare")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="archviz-bench-") as folder:
        write_sparse_shards(V3_MANIFEST, folder)  # 163 full-size sparse shards + their index; no data written
        # Rounds interleave the cases, so a slow phase of a shared machine hits the peer and archviz alike.
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for i in range(repeat):
            for name in names:
                if i == 0 or "compare" not in name:
                    runs[name].append(_run_case(name, folder, V3_MANIFEST))
        results = {name: min(done, key=lambda r: r["seconds"]) for name, done in runs.items()}
    peer_s = results[PEER]["seconds"]
    for name in names:
        r = results[name]
        is_peer = name == PEER
        has_peer = not is_peer and "compare" not in name
        rows.append({
            "name": name,
            "seconds": round(r["seconds"], 4),
            "peak_rss_mb": round(r["peak_rss_mb"], 1),
            "cpu_seconds": round(r["cpu_seconds"], 4),
            "peer": PEER if has_peer else None,
            "ratio": round(r["seconds"] / peer_s, 3) if has_peer and peer_s > 0 else None,
            **{k: v for k, v in r.items() if k not in ("seconds", "peak_rss_mb", "cpu_seconds")},
        })
    return rows


if __name__ == "__main__":
    for row in run(include_compare="--compare" in sys.argv):
        print(json.dumps(row))

"""Issues 34 and 46 — the probe on torch.distributed: `archviz probe --world-size 2` and `4` beside the single-process
probe of the same reduced copy, on the DeepSeek-V3-style fixture (tests/fixtures/dsv3like, with `moe_inter_dim=128`
and `n_heads=8`, so the shared expert's width and the attention output's input split into whole activation blocks
of 32 on 4 ranks, as DeepSeek's kernels require).

Each case runs in its own process. The N = 2 case's peak RSS is the largest rank's (the ranks are that process's
children: RUSAGE_CHILDREN's maximum), beside the launcher's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "dsv3like")
MODEL, CONFIG = os.path.join(FIX, "model.py"), os.path.join(FIX, "config.json")
OVERRIDES = {"moe_inter_dim": 128, "n_heads": 8}  # every split a whole block (32) at N = 4

TITLE = "Issues 34, 46 — the probe on torch.distributed (gloo, CPU)"
GOAL = ("the probe at N = 2 and 4 ranks beside the single-process probe of the same reduced copy (the ratio is "
        "against it); peak RSS per rank")

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
world, model, config, overrides = int(sys.argv[2]), sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
from archviz.sources import BuildOptions
opts = BuildOptions(config=config, overrides=tuple(overrides.items()))
t = time.perf_counter()
if world == 1:
    from archviz.probe import run_probe
    r = run_probe(model, opts)
    notes = {"agreement": r.agreement, "compared": r.compared}
else:
    from archviz.probe.parallel_run import run_tensor_parallel
    r = run_tensor_parallel(model, world, opts)
    notes = {"ok": r.ok}
seconds = time.perf_counter() - t
kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_rss_mb": (child_kb if world > 1 else kb) / 1024,
                  "launcher_rss_mb": kb / 1024, **notes}))
"""


def measure(world: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, ROOT, str(world), MODEL, CONFIG, json.dumps(OVERRIDES)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise RuntimeError(f"probe at world size {world} failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run() -> list[dict[str, Any]]:
    one = measure(1)
    rows = [{"name": f"archviz probe: dsv3like fixture, one process ({one['agreement']:.0%} of {one['compared']} "
                     "calls agree)", "seconds": one["seconds"], "peak_rss_mb": one["peak_rss_mb"], "peer": None,
             "ratio": 1.0}]
    for n in (2, 4):
        r = measure(n)
        rows.append({"name": f"archviz probe --world-size {n}: same, {n} ranks on gloo (ok={r['ok']}; launcher "
                             f"{r['launcher_rss_mb']:.0f} MB; RSS column: the largest rank)",
                     "seconds": r["seconds"], "peak_rss_mb": r["peak_rss_mb"], "peer": "one process",
                     "ratio": r["seconds"] / one["seconds"]})
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']}: {row['seconds']:.1f} s, peak RSS {row['peak_rss_mb']:.0f} MB, ratio {row['ratio']:.2f}")

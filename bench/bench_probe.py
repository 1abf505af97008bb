"""Issue 7 — the execution probe: time and peak RSS of `archviz probe` on a DeepSeek-V4.1-Flash-size model on CPU.

The fixture (tests/fixtures/dsv41like/config_flash.json: 40 layers, 384 routed experts of dim 5120, a 129,280-row
vocabulary, 384M-row n-gram tables) has about 300 billion parameters; the probe builds it on meta, walks and traces it,
then runs a reduced copy (every kind of layer, 6 experts, a cut vocabulary and cut tables) for real. Each case runs in
its own process, so the peak RSS is the probe's alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "dsv41like")

TITLE = "Issue 7 — execution probe on CPU"
GOAL = "goal: the probe of a V4.1-Flash-size model (reduced copy run for real) in ≤ 120 s and ≤ 8 GB peak RSS"

CASES = {
    "archviz probe: V4.1-Flash-size fixture (CPU)": (os.path.join(FIX, "model.py"),
                                                      os.path.join(FIX, "config_flash.json")),
}

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
from archviz.probe import run_probe
from archviz.sources import BuildOptions
t = time.perf_counter()
r = run_probe(sys.argv[1], BuildOptions(config=sys.argv[2]))
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "agreement": r.agreement, "compared": r.compared, "layers_kept": len(r.plan.kept_layers or ()),
                  "layers": r.plan.full_layers, "stages": r.seconds}))
"""


def measure(model: str, config: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, model, config, ROOT], capture_output=True, text=True,
                          cwd=ROOT)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise RuntimeError(f"probe failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run() -> list[dict[str, Any]]:
    rows = []
    for name, (model, config) in CASES.items():
        r = measure(model, config)
        label = (f"{name}: {r['agreement']:.0%} of {r['compared']} calls agree, {r['layers_kept']} of {r['layers']} "
                 f"layers run")
        rows.append({"name": label, "seconds": r["seconds"], "peak_rss_mb": r["peak_rss_mb"], "peer": None,
                     "ratio": None, "stages": r["stages"]})
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']}: {row['seconds']:.1f} s, peak RSS {row['peak_rss_mb']:.0f} MB")
        print("  " + ", ".join(f"{k} {v:.1f} s" for k, v in row["stages"].items()))

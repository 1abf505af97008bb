"""Sweep `archviz check` over every transformers model type, against the checkpoint layout transformers itself writes.

For each model type (all of transformers' config types by default): build it with archviz on meta (2 layers where
the config has `num_hidden_layers`, else its defaults), take the state dict `save_pretrained` would write (keys it
ignores on save dropped, tied weights removed, then `revert_weight_conversion`: the original-format names), describe
it as a checkpoint inventory (dtypes and shapes only) and compare. A type whose model transformers loads back from
its own checkpoint should match; anything else is an archviz bug or a transformers one, to be told apart by hand
(known on transformers 5.23: deepseek_v4, whose loader renames the final norm it saves; maskformer, whose default
in-memory config names its backbone `swin` where a saved config.json says `maskformer-swin`).

    python bench/sweep_checkpoints.py                  # every type, 2 at a time, one JSON line each, then a summary
    python bench/sweep_checkpoints.py --types llama,bert --jobs 4
    python bench/sweep_checkpoints.py --one llama     # one type in this process (what each worker runs)
    python bench/sweep_checkpoints.py --shapes --causal   # the meta pass instead: which causal LMs get shapes

With `--shapes` each type is built the same way and run through the meta forward pass on its default inputs
(verdict `shapes`, or `no shapes` with the one-line error: most non-causal types need an image or audio input given
with --input, and some of transformers' default configs leave a field unset that the forward needs).

Each type runs in its own subprocess (a fresh import of its modeling code; a crash or hang costs one line). A full
sweep takes about half an hour on two cores. It is not part of `make test`: it measures transformers' whole zoo, whose
defaults fail to build for some types on their own.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _dtype_code(dtype: Any) -> str:
    import torch

    return {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.float64: "F64",
            torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
            torch.bool: "BOOL"}.get(dtype, "F32")


def _build(model_type: str) -> Any:
    """The model type built on meta with 2 layers where it takes `num_hidden_layers` (else its defaults), or the
    sweep's `no build` row."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    sys.path.insert(0, ROOT)
    import archviz
    from archviz.errors import ArchvizError

    try:
        try:
            return archviz.build(f"hf:{model_type}", overrides={"num_hidden_layers": 2})
        except ArchvizError:
            return archviz.build(f"hf:{model_type}")
    except ArchvizError as e:
        return {"type": model_type, "verdict": "no build", "error": e.line()[:300]}


def check_one(model_type: str) -> dict[str, Any]:
    """The sweep's verdict for one model type (a dict, JSON-ready)."""
    built = _build(model_type)
    if isinstance(built, dict):
        return built
    from archviz.checkpoint import CheckpointInventory, ShardInfo, TensorInfo, compare
    from archviz.walk import walk
    from transformers.core_model_loading import revert_weight_conversion
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    model = built.model
    state = model.state_dict()
    for key in getattr(model, "_keys_to_ignore_on_save", None) or ():
        state.pop(key, None)
    state = remove_tied_weights_from_state_dict(state, model)
    state = revert_weight_conversion(model, state)
    shard = "model.safetensors"
    tensors = {k: TensorInfo(k, _dtype_code(v.dtype), tuple(v.shape), shard) for k, v in state.items()}
    inventory = CheckpointInventory("save_pretrained (meta)", None, (ShardInfo(shard, 0, 0),), tensors)
    result = compare(walk(built), inventory).extra("checkpoint")
    summary = result["summary"]
    out: dict[str, Any] = {"type": model_type, "verdict": result["verdict"], "class": type(model).__name__,
                           "matched": summary["matched"], "parameters": summary["model_parameters"],
                           "ruleset": result["rules"]["ruleset"]["name"]}
    if result["verdict"] != "match":
        out["differences"] = [{k: t.get(k) for k in ("model", "checkpoint", "verdict", "note")}
                              for t in result["tensors"] if t.get("verdict") in ("mismatch", "missing")][:5]
        out["unexplained_checkpoint_only"] = [c["name"] for c in result["checkpoint_only"]
                                              if not c.get("explained")][:5]
    return out


def shapes_one(model_type: str) -> dict[str, Any]:
    """The meta pass on one model type's default inputs: called modules, or the error line."""
    built = _build(model_type)
    if isinstance(built, dict):
        return built
    from archviz.errors import ArchvizError
    from archviz.shapes import trace_shapes
    from archviz.walk import walk

    try:
        record = trace_shapes(built, walk(built))
    except ArchvizError as e:
        return {"type": model_type, "verdict": "no shapes", "error": e.line()[:300]}
    return {"type": model_type, "verdict": "shapes", "class": type(built.model).__name__,
            "called": sum(1 for m in record.modules if m.called), "modules": len(record.modules)}


def _worker(model_type: str, timeout: float, shapes: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", model_type] + (["--shapes"] if shapes else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"type": model_type, "verdict": "no build", "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (p.stderr or p.stdout).strip().splitlines()
    return {"type": model_type, "verdict": "no build", "error": tail[-1][:300] if tail else f"exit {p.returncode}"}


def all_types(causal: bool = False) -> list[str]:
    sys.path.insert(0, ROOT)
    from archviz.sources.hf_types import model_types

    return model_types("causal" if causal else "all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", help="check one model type in this process")
    parser.add_argument("--types", help="comma-separated model types (default: all of transformers')")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per type")
    parser.add_argument("--shapes", action="store_true", help="run the meta pass instead of the checkpoint check")
    parser.add_argument("--causal", action="store_true", help="only the types with a causal-LM class")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(shapes_one(args.one) if args.shapes else check_one(args.one)))
        return
    types = args.types.split(",") if args.types else all_types(args.causal)
    counts: Counter[str] = Counter()
    with cf.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for row in pool.map(lambda t: _worker(t, args.timeout, args.shapes), types):
            counts[row["verdict"]] += 1
            print(json.dumps(row), flush=True)
    print(json.dumps({"summary": dict(counts), "types": len(types)}))


if __name__ == "__main__":
    main()

"""Shapes from a real CPU run: every module call's input and output tensor shapes, by forward hooks, for tests that
compare the meta pass with running the same model for real at small sizes."""

from __future__ import annotations

from typing import Any

import torch


def _shapes(value: Any) -> list[list[int]]:
    """Tensor shapes in a value, in the order the meta pass flattens them (tuples, lists, dicts by insertion)."""
    if isinstance(value, torch.Tensor):
        return [list(value.shape)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _shapes(v)]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _shapes(v)]
    return []


def real_calls(model: torch.nn.Module, *args: Any, train: bool = False, **kwargs: Any) -> dict[str, list[dict]]:
    """{module path: [{"inputs": shapes, "outputs": shapes}] per call} of one real forward on CPU."""
    calls: dict[str, list[dict]] = {}
    hooks = []
    for path, module in model.named_modules():
        def hook(mod, a, kw, out, path=path):
            calls.setdefault(path, []).append({"inputs": _shapes((a, kw)), "outputs": _shapes(out)})
        hooks.append(module.register_forward_hook(hook, with_kwargs=True))
    model.train(train)
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for h in hooks:
            h.remove()
    return calls


def record_calls(records: dict, *, numeric: dict[str, int] | None = None) -> dict[str, list[dict]]:
    """The same from archviz's records JSON, symbols replaced by their values in `numeric` ({"B": 2, ...})."""
    numeric = numeric or {}

    def num(shape):
        return [numeric.get(d, d) if isinstance(d, str) else d for d in shape]

    return {m["path"]: [{"inputs": [num(s) for s in c["inputs"]], "outputs": [num(s) for s in c["outputs"]]}
                        for c in m["calls"]] for m in records["modules"] if m.get("calls")}

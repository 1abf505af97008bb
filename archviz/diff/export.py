"""A ModelDiff as JSON-able data (`archviz diff`'s JSON), deterministic: schema `archviz.diff/1`."""

from __future__ import annotations

from typing import Any

from .result import Change, Folded, ModelDiff

SCHEMA = "archviz.diff/1"


def _change(c: Change) -> dict[str, Any]:
    return {"aspect": c.aspect, "what": c.what, "a": c.before, "b": c.after, "parameters": c.parameters}


def _folded(f: Folded) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": f.kind, "a": list(f.a), "b": list(f.b), "count": f.count,
                         "multiplicity": f.multiplicity, "class_name": f.class_name,
                         "parameters_each": f.parameters_each, "parameters": f.parameters}
    if f.changes:
        d["changes"] = [_change(c) for c in f.changes]
    if f.kind == "renamed":
        d["how"] = f.how
        if f.rule:
            d["rule"] = f.rule
    return d


def to_json(d: ModelDiff) -> dict[str, Any]:
    return {  # "summary" last: what reads first on the terminal and the site, here beside the full lists
        "schema": SCHEMA,
        "verdict": "identical" if d.identical else "different",
        "a": {"source": d.a, "name": d.a_name, "modules": d.modules_a},
        "b": {"source": d.b, "name": d.b_name, "modules": d.modules_b},
        "compared": list(d.compared), "ignored": list(d.ignored), "matched": d.matched,
        "totals": [{"name": t.name, "a": t.a, "b": t.b, "delta": t.delta} for t in d.totals],
        "groups": [_folded(f) for f in d.folded],
        "renamed": [{"a": p.a, "b": p.b, "how": p.how, **({"rule": p.rule} if p.rule else {})} for p in d.renamed],
        "added": [{"path": s.path, "class_name": s.class_name, "parameters": s.parameters,
                   "scale_elements": s.scale_elements, "buffer_elements": s.buffer_elements, "bytes": s.bytes,
                   "modules": s.modules} for s in d.added],
        "removed": [{"path": s.path, "class_name": s.class_name, "parameters": s.parameters,
                     "scale_elements": s.scale_elements, "buffer_elements": s.buffer_elements, "bytes": s.bytes,
                     "modules": s.modules} for s in d.removed],
        "modules": [{"a": n.a, "b": n.b, "how": n.how, "parameters": n.parameters,
                     "changes": [_change(c) for c in n.changes]} for n in d.nodes],
        "notes": list(d.notes),
        "summary": _summary(d),
    }


def _summary(d: ModelDiff) -> dict[str, Any] | None:
    s = d.summary
    if s is None:
        return None
    return {"config": [{"key": c.key, "a": c.a, "b": c.b} for c in s.config],
            "stacks": [{"path": x.path, "a": x.a, "b": x.b, "kinds_a": x.kinds_a, "kinds_b": x.kinds_b}
                       for x in s.stacks],
            "totals": [{"name": t.name, "a": t.a, "b": t.b, "delta": t.delta} for t in s.totals],
            "lines_only": s.lines_only}


__all__ = ["SCHEMA", "to_json"]

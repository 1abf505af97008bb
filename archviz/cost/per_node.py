"""FLOPs per call of a node of the grouped tree, from the records' cost extra (pure: no torch).

A module's subtree FLOPs over a pass are its own (`flops[path]`) plus its children's; one call's are those over
`calls[path]`. A node stands for `instances` identical modules (2 groups × 5 layers), so it shows the representative's
FLOPs per call, × the multiplicity, as it shows parameters; and beside it the pass's sum over every instance, which
differs where a module runs more than once or experts receive different numbers of tokens. A node whose subtree has
a module with unknown FLOPs says which and why, never a silent zero.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping


class PassFlops:
    """One pass (`extras["cost"]["prefill"]` or `["decode"]`) indexed by module subtree."""

    def __init__(self, record: Any, d: Mapping[str, Any]):
        self.B, self.T, self.start = d["B"], d["T"], d["start"]
        flops: Mapping[str, int] = d.get("flops") or {}
        self.calls: Mapping[str, int] = d.get("calls") or {}
        self.unknown: dict[str, list[str]] = {p: list(w) for p, w in (d.get("unknown") or {}).items()}
        self.subtree: dict[str, int] = {}
        for m in reversed(record.modules):
            self.subtree[m.path] = flops.get(m.path, 0) + sum(self.subtree.get(c, 0) for c in m.children)

    def unknown_under(self, path: str) -> list[tuple[str, list[str]]]:
        head = path + "." if path else ""
        return sorted((p, w) for p, w in self.unknown.items() if p == path or p.startswith(head))

    def node(self, representative: str, paths: Iterable[str], instances: int) -> dict[str, Any]:
        """{"per_call", "calls", "instances", "times" (per_call × instances), "over_pass" (summed over the paths),
        "unknown": [[path, [why]]], "called"}; per_call None where the module never ran in this pass."""
        calls = int(self.calls.get(representative, 0))
        total = self.subtree.get(representative, 0)
        per_call = (total // calls if total % calls == 0 else total / calls) if calls else None
        over = sum(self.subtree.get(p, 0) for p in paths)
        unknown = self.unknown_under(representative)
        return {"per_call": per_call, "calls": calls, "instances": instances,
                "times": per_call * instances if per_call is not None else None, "over_pass": over,
                "unknown": [[p, w] for p, w in unknown], "called": bool(calls)}


class CostIndex:
    """The prefill and decode passes of a record's cost extra, for node figures; empty without the extra."""

    def __init__(self, record: Any):
        c = record.extra("cost")
        self.cost = c if isinstance(c, Mapping) and c.get("prefill") else None
        self.prefill = PassFlops(record, c["prefill"]) if self.cost else None
        self.decode = PassFlops(record, c["decode"]) if self.cost and c.get("decode") else None

    def node(self, representative: str, paths: Iterable[str], instances: int) -> dict[str, Any] | None:
        if self.prefill is None:
            return None
        paths = list(paths)
        return {"prefill": self.prefill.node(representative, paths, instances),
                "decode": self.decode.node(representative, paths, instances) if self.decode else None,
                "B": self.prefill.B, "T": self.prefill.T, "context": self.decode.start if self.decode else None}


def nodes_json(record: Any) -> list[dict[str, Any]]:
    """Every node of the grouping (`extra("grouping")["nodes"]`) with its FLOPs per call, × its multiplicity: what
    the site's node pages show, for `archviz cost`'s JSON."""
    index = CostIndex(record)
    grouping = record.extra("grouping")
    if index.prefill is None or not isinstance(grouping, Mapping):
        return []
    out = []
    for d in grouping.get("nodes") or ():
        rep = d.get("representative")
        paths = [p for p in (d.get("paths") or ()) if isinstance(p, str)]
        if not isinstance(rep, str):
            rep = paths[0] if paths else ""
        mult = [{"factor": int(x.get("factor", 1)), "name": str(x.get("name", ""))}
                for x in (d.get("multiplicity") or ()) if isinstance(x, Mapping)]
        count = math.prod(max(1, x["factor"]) for x in mult)  # instances, as the site multiplies parameters
        out.append({"id": str(d.get("id")), "title": str(d.get("title") or ""), "representative": rep,
                    "multiplicity": mult, **(index.node(rep, paths or [rep], count) or {})})
    return out


__all__ = ["PassFlops", "CostIndex", "nodes_json"]

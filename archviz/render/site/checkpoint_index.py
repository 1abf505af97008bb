"""The checkpoint check's results by module path, for the node pages (verdict, mismatches, notes)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ... import format as fmt


class CheckpointIndex:
    """The checkpoint comparison's per-module verdicts, summed over every ancestor path (for groups of modules)."""

    def __init__(self, ck: Mapping[str, Any]):
        self.ck = ck
        self.direct: dict[str, Mapping[str, Any]] = {}
        self.agg: dict[str, dict[str, Any]] = {}
        for path, v in sorted((ck.get("modules") or {}).items()):
            if not isinstance(v, Mapping):
                continue
            self.direct[path] = v
            p: str | None = path
            while p is not None:
                a = self.agg.setdefault(p, {"model": 0, "checkpoint": 0, "verdicts": {}, "notes": []})
                a["model"] += int(v.get("model") or 0)
                a["checkpoint"] += int(v.get("checkpoint") or 0)
                vd = str(v.get("verdict", "?"))
                a["verdicts"][vd] = a["verdicts"].get(vd, 0) + 1
                if vd != "match":
                    for note in v.get("notes") or ():
                        if len(a["notes"]) < 6:
                            a["notes"].append(f"{path}: {note}")
                p = None if not p else (p.rsplit(".", 1)[0] if "." in p else "")

    def for_paths(self, paths: Sequence[str]) -> dict[str, Any] | None:
        out = {"model": 0, "checkpoint": 0, "verdicts": {}, "notes": [], "instances": 0, "bad": []}
        for p in paths:
            a = self.direct.get(p)
            if a is not None:
                a = {"model": int(a.get("model") or 0), "checkpoint": int(a.get("checkpoint") or 0),
                     "verdicts": {str(a.get("verdict", "?")): 1},
                     "notes": [f"{p}: {n}" for n in (a.get("notes") or ())] if a.get("verdict") != "match" else []}
            else:
                a = self.agg.get(p)
            if a is None:
                continue
            out["instances"] += 1
            out["model"] += a["model"]
            out["checkpoint"] += a["checkpoint"]
            for k, v in a["verdicts"].items():
                out["verdicts"][k] = out["verdicts"].get(k, 0) + v
            if any(k != "match" for k in a["verdicts"]):
                if len(out["bad"]) < 5:
                    out["bad"].append(p)
            for n in a["notes"]:
                if len(out["notes"]) < 6:
                    out["notes"].append(n)
        return out if out["instances"] else None


def checkpoint_text(agg: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if agg is None:
        return None
    bad = {k: v for k, v in agg["verdicts"].items() if k != "match"}
    if not bad and agg["model"] == agg["checkpoint"]:
        return {"ok": True, "text": "the model total matches the checkpoint’s tensors "
                                    f"({fmt.count(agg['checkpoint'])} parameters).", "notes": [], "paths": []}
    diff = agg["model"] - agg["checkpoint"]
    what = ", ".join(f"{v:,} {k}" for k, v in sorted(bad.items()))
    text = (f"mismatch: the model holds {fmt.count(agg['model'])} parameters, the checkpoint "
            f"{fmt.count(agg['checkpoint'])} ({'+' if diff > 0 else ''}{fmt.count(diff)})"
            + (f"; {what}" if what else "") + ".")
    return {"ok": False, "text": text, "notes": list(agg["notes"]), "paths": list(agg["bad"])}

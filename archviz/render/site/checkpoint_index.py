"""The checkpoint check's results by module path, for the node pages (verdict, mismatches, notes)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ... import format as fmt
from ...paths import HOLE, NAMES_PER_ENTRY, bounded_names, compress_paths, pattern_count, split_indices



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
        self._stored: dict[str, dict[str, list[int]]] | None = None

    def stored(self, path: str) -> dict[str, list[int]]:
        """{stored type: [logical elements, bytes]} of what the checkpoint stores for the model tensors under
        `path` (every tensor paired with one, whatever its verdict); empty where the check kept no bytes."""
        if self._stored is None:
            self._stored = {}
            for e in self.ck.get("tensors") or ():
                b = e.get("checkpoint_bytes") if isinstance(e, Mapping) else None
                if not isinstance(b, int) or isinstance(b, bool) or e.get("verdict") == "checkpoint-only":
                    continue
                dtype, el = str(e.get("checkpoint_dtype") or "?"), e.get("checkpoint_elements")
                el = el if isinstance(el, int) and not isinstance(el, bool) else 0
                for name in _model_names(e):
                    p: str | None = name.rsplit(".", 1)[0] if "." in name else ""
                    while p is not None:
                        row = self._stored.setdefault(p, {}).setdefault(dtype, [0, 0])
                        row[0] += el
                        row[1] += b
                        p = None if not p else (p.rsplit(".", 1)[0] if "." in p else "")
        return self._stored.get(path, {})

    def names_by_module(self) -> dict[str, list[str]]:
        """Model module path -> the checkpoint tensor names stored for its own tensors (`layers.7.attn.wo_b.weight`
        for `model.layers.7.self_attn.o_b_proj`), for the search. A checkpoint name's indices are the model name's
        where their ranges agree, position by position (the layer number); the rest stay ranges (the experts of a
        fused tensor: `layers.7.ffn.experts.{0-255}.w1.weight`)."""
        out: dict[str, list[str]] = {}
        for e in self.ck.get("tensors") or ():
            if not isinstance(e, Mapping) or not isinstance(e.get("model"), str):
                continue
            stored = e.get("checkpoint")
            names = [c for c in stored if isinstance(c, str)] if isinstance(stored, list) else []
            if not names or "." not in e["model"] or any(pattern_count(c) > NAMES_PER_ENTRY for c in names):
                continue
            try:
                for model_name in _model_names(e):
                    _, idx = split_indices(model_name)
                    held = out.setdefault(model_name.rsplit(".", 1)[0], [])
                    held.extend(_indexed(c, idx) for c in names)
            except ValueError:  # a range that does not read: that entry names nothing
                continue
        return out

    def for_paths(self, paths: Sequence[str]) -> dict[str, Any] | None:
        out = {"model": 0, "checkpoint": 0, "verdicts": {}, "notes": [], "instances": 0, "bad": [],
               "stored": {}, "uniform": True}
        first: dict[str, list[int]] | None = None
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
            held = self.stored(p)
            first = held if first is None else first
            out["uniform"] = out["uniform"] and held == first
            for dtype, (el, b) in held.items():
                row = out["stored"].setdefault(dtype, [0, 0])
                row[0] += el
                row[1] += b
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


def _model_names(e: Mapping[str, Any]) -> list[str]:
    """The model tensor names a tensors entry stands for (`paths.bounded_names`)."""
    model = e.get("model")
    return bounded_names(model) if isinstance(model, str) else []


def _indexed(pattern: str, idx: tuple[int, ...]) -> str:
    """`pattern`'s first range segments filled with `idx` in order where each range holds its value; the pattern as
    it is where the first does not (the names disagree on what their indices are)."""
    segs = pattern.split(".")
    k = 0
    for i, seg in enumerate(segs):
        if k == len(idx):
            break
        if seg.startswith("{") and seg.endswith("}"):
            if idx[k] not in fmt.parse_ranges(seg[1:-1]):
                return pattern
            segs[i] = str(idx[k])
            k += 1
        elif seg.isdigit():
            k += 1
    return ".".join(segs)


def search_names(names: Sequence[str], most: int = 16) -> list[str]:
    """Checkpoint names written as few patterns as cover them (at most `most`), for a node's search entry."""
    plain = [n for n in dict.fromkeys(names) if HOLE not in n]
    return compress_paths(plain)[:most]


def stored_text(agg: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the checkpoint stores for a node's tensors, for its facts: the bytes over every instance (and per
    instance where each holds the same), and per stored type its bytes and bits per logical weight."""
    stored = agg.get("stored") or {}
    if not stored:
        return None
    total = sum(b for _, b in stored.values())
    types = [{"type": k, "bytes": fmt.count(b), "bits": f"{8 * b / el:.2f}" if el else None}
             for k, (el, b) in sorted(stored.items(), key=lambda kv: (-kv[1][1], kv[0]))]
    per = total // agg["instances"] if agg["uniform"] and agg["instances"] > 1 else None
    return {"bytes": fmt.count(total), "human": fmt.nbytes(total), "types": types,
            "per_instance": fmt.count(per) if per is not None else None}


def checkpoint_text(agg: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if agg is None:
        return None
    bad = {k: v for k, v in agg["verdicts"].items() if k != "match"}
    stored = stored_text(agg)
    if not bad and agg["model"] == agg["checkpoint"]:
        return {"ok": True, "text": "the model total matches the checkpoint’s tensors "
                                    f"({fmt.count(agg['checkpoint'])} parameters).", "notes": [], "paths": [],
                "stored": stored}
    if set(bad) == {"model-only"}:  # all it holds matches; the rest has no place in its format (a GGUF tensor set)
        n, extra = bad["model-only"], agg["model"] - agg["checkpoint"]
        return {"ok": True, "text": f"the checkpoint’s tensors match the model’s ({fmt.count(agg['checkpoint'])} "
                                    f"parameters); {n:,} model-only tensor{'s' if n != 1 else ''} "
                                    f"({fmt.count(extra)} parameters) have no place in the checkpoint’s format.",
                "notes": list(agg["notes"]), "paths": [], "stored": stored}
    diff = agg["model"] - agg["checkpoint"]
    what = ", ".join(f"{v:,} {k}" for k, v in sorted(bad.items()))
    text = (f"mismatch: the model holds {fmt.count(agg['model'])} parameters, the checkpoint "
            f"{fmt.count(agg['checkpoint'])} ({'+' if diff > 0 else ''}{fmt.count(diff)})"
            + (f"; {what}" if what else "") + ".")
    return {"ok": False, "text": text, "notes": list(agg["notes"]), "paths": list(agg["bad"]), "stored": stored}

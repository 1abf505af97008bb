"""Module verdicts: every entry's verdict and counts aggregated up the module tree, so each ancestor path
carries its subtree's."""

from __future__ import annotations

from typing import Any, Iterable

from archviz.records import ModelRecord

from .entries import Entry


def _ancestors(path: str) -> Iterable[str]:
    yield path
    while path:
        path = path.rsplit(".", 1)[0] if "." in path else ""
        yield path


def module_verdicts(record: ModelRecord, entries: list[Entry]) -> dict[str, dict[str, Any]]:
    stats: dict[str, list[Any]] = {}
    # [model, checkpoint, ck_only, match, mismatch, missing, ck_explained, ck_unexplained, notes]
    for e in entries:
        path = e.module or ""
        note = None
        if e.verdict in ("mismatch", "missing") or (e.verdict == "checkpoint-only" and not e.explained):
            local = (e.model or (e.checkpoint[0] if e.checkpoint else "?"))
            local = local[len(path) + 1:] if path and local.startswith(path + ".") else local
            note = f"{local}: {e.verdict}" + (f" ({e.tag})" if e.tag else "")
        elif e.verdict == "checkpoint-only":
            note = f"checkpoint-only: {e.kind}"
        elif e.tag:
            note = e.tag
        for p in _ancestors(path):
            s = stats.get(p)
            if s is None:
                s = stats[p] = [0, 0, 0, 0, 0, 0, 0, 0, {}]
            if e.verdict == "checkpoint-only":
                s[2] += e.checkpoint_elements if e.parameter else 0
                s[6 if e.explained else 7] += 1
            else:
                if e.parameter:
                    s[0] += e.model_elements
                    if e.verdict != "missing":
                        s[1] += e.checkpoint_elements
                s[{"match": 3, "mismatch": 4, "missing": 5}[e.verdict]] += 1
            if note is not None and len(s[8]) < 4:
                s[8][note] = None
            elif note is not None and note not in s[8]:
                s[8]["…"] = None
    out: dict[str, dict[str, Any]] = {}
    order = {m.path: i for i, m in enumerate(record.modules)}
    for p in sorted(stats, key=lambda p: (order.get(p, len(order)), p)):
        model, ck, ck_only, n_match, n_mis, n_missing, n_expl, n_unexpl, notes = stats[p]
        if n_mis or n_unexpl:
            verdict = "mismatch"
        elif n_match == 0 and n_missing == 0:
            verdict = "checkpoint-only"
        elif n_missing and n_match == 0:
            verdict = "missing"
        elif n_missing:
            verdict = "partial"
        else:
            verdict = "match"
        d: dict[str, Any] = {"verdict": verdict, "model": model, "checkpoint": ck}
        # A matching module whose notes are its parent's says nothing new (256 experts × 3 projections of the same
        # "fp4 on disk" note would be most of the JSON); mismatches always keep theirs.
        parent = (p.rsplit(".", 1)[0] if "." in p else "") if p else None
        if notes and not (verdict == "match" and parent is not None and stats.get(parent, [None] * 9)[8] == notes):
            d["notes"] = [n for n in notes if n != "…"] + (["… more notes below"] if "…" in notes else [])
        if ck_only:
            d["checkpoint_only"] = ck_only
        if p not in order:
            d["in_model"] = False
        out[p] = d
    return out

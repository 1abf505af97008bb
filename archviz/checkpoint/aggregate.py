"""Module verdicts: every entry's verdict and counts aggregated up the module tree, so each ancestor path
carries its subtree's."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from archviz.records import ModelRecord

from .entries import Entry


#: Levels of a checkpoint-only path below the model's own modules that get a module row each (the MTP layer's
#: ``model.layers.61.shared_head.head`` needs 3). Deeper levels are counted in the deepest row kept, so a hostile
#: name of 40,000 dots costs 40,000 steps, not 40,000 paths of 40,000 characters.
EXTRA_DEPTH = 8


def _ancestors(path: str, known: Mapping[str, Any] | None = None) -> Iterable[str]:
    """``path`` and each of its ancestors, ending with ``""``. With ``known`` (the model's module paths, closed
    under taking a parent): of a path not in it, only the model's modules and at most :data:`EXTRA_DEPTH` levels
    below them (a truncated path stands for everything under it)."""
    if known is None or path in known:
        yield path
        while path:
            path = path.rsplit(".", 1)[0] if "." in path else ""
            yield path
        return
    kept = [""]
    extra = 0
    at = path.find(".")
    while at != -1 and extra < EXTRA_DEPTH:
        prefix = path[:at]
        if prefix not in known:
            extra += 1
        kept.append(prefix)
        at = path.find(".", at + 1)
    if at == -1 and extra < EXTRA_DEPTH:
        kept.append(path)
    yield from reversed(kept)


#: Module paths up to this depth get their ancestor chains memoised (a chain per path: deeper ones, hostile
#: nestings, are walked each time instead, so memory stays linear).
_CHAIN_DEPTH = 64
_VERDICT_SLOT = {"match": 3, "mismatch": 4, "missing": 5}


def module_verdicts(record: ModelRecord, entries: list[Entry]) -> dict[str, dict[str, Any]]:
    stats: dict[str, list[Any]] = {}
    order = {m.path: i for i, m in enumerate(record.modules)}
    chains: dict[str, tuple[str, ...]] = {"": ("",)}

    def chain(path: str) -> tuple[str, ...]:
        """``_ancestors`` of a model module's path, built from its parent's (the model's paths are closed under
        taking a parent)."""
        c = chains.get(path)
        if c is not None:
            return c
        todo = []  # the path and its ancestors up to the first already known (no recursion)
        while c is None:
            todo.append(path)
            path = path.rsplit(".", 1)[0] if "." in path else ""
            c = chains.get(path)
        for p in reversed(todo):
            c = chains[p] = (p,) + c
        return c

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
        # what this entry adds to each ancestor's row, worked out once
        if e.verdict == "checkpoint-only":
            slot, add = (6 if e.explained else 7), ((2, e.checkpoint_elements if e.parameter else 0),)
        else:
            slot = _VERDICT_SLOT[e.verdict]
            add = (((0, e.model_elements),) + (((1, e.checkpoint_elements),) if e.verdict != "missing" else ())
                   if e.parameter else ())
        chained = path in order and path.count(".") < _CHAIN_DEPTH
        for p in (chain(path) if chained else _ancestors(path, order)):
            s = stats.get(p)
            if s is None:
                s = stats[p] = [0, 0, 0, 0, 0, 0, 0, 0, {}]
            for i, n in add:
                s[i] += n
            s[slot] += 1
            if note is not None:
                ns = s[8]
                if len(ns) < 4:
                    ns[note] = None
                elif note not in ns:
                    ns["…"] = None
    out: dict[str, dict[str, Any]] = {}
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

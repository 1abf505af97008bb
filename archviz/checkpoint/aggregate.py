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
_VERDICT_SLOT = {"match": 3, "mismatch": 4, "missing": 5, "model-only": 10}


def module_verdicts(record: ModelRecord, entries: list[Entry], positions: list[int] | None = None
                    ) -> dict[str, dict[str, Any]]:
    """Every path with an entry in its subtree: ``{verdict, model, checkpoint, notes?, checkpoint_only?,
    in_model?}``, the model's modules in record order, then the paths beyond the model's, sorted.

    Each entry counts once at its own module; one pass up the tree (children before parents) then adds every
    module's row into its parent's, so the work is entries + modules, not entries × depth. Identical rows (256
    experts alike) are one shared dict. A path beyond the model's modules (a checkpoint-only name) gets rows for at
    most :data:`EXTRA_DEPTH` levels below them, counted entry by entry.

    ``positions``: each entry's place in the per-tensor order, where ``entries`` holds ``FamilyEntry`` objects
    (families.py: one verdict for many pairs, each at its own place)."""
    paths = record.column("path")  # (a records file's modules are not made)
    order = {p: i for i, p in enumerate(paths)}
    n = len(paths)
    parent = [-1] * n
    for i in range(1, n) if n and paths[0] == "" else ():
        p = paths[i]
        j = order.get(p.rpartition(".")[0], -1)
        if j < 0 or j >= i:
            break
        parent[i] = j
    else:
        if n and paths[0] == "" and len(order) == n:
            return _bottom_up(paths, order, parent, entries, positions)
    if positions is not None:  # one entry per pair, as the per-tensor path gives them
        entries = [e for _, e in sorted(_spelled_out(entries, positions), key=lambda x: x[0])]
    return _per_entry(record, entries)


def _spelled_out(entries: list[Any], positions: list[int]) -> Iterable[tuple[int, Entry]]:
    for e, pos in zip(entries, positions):
        if e.members is None:
            yield pos, e
            continue
        first = e.first
        for p, mt, u in e.members:
            yield p, Entry(mt.name, mt.module, u.names, first.verdict, first.kind, first.model_elements,
                           first.checkpoint_elements, first.parameter, first.model_shape, first.checkpoint_shape,
                           first.model_dtype, first.checkpoint_dtype, first.note, first.tag, first.explained,
                           first.fused, first.checkpoint_bytes)


def _entry_parts(e: Entry, path: str) -> tuple[str | None, int, tuple[tuple[int, int], ...]]:
    """(note for the module rows, the count slot, (field, amount) additions) of one entry."""
    note = None
    if e.verdict in ("mismatch", "missing") or (e.verdict == "checkpoint-only" and not e.explained):
        local = (e.model or (e.checkpoint[0] if e.checkpoint else "?"))
        local = local[len(path) + 1:] if path and local.startswith(path + ".") else local
        note = f"{local}: {e.verdict}" + (f" ({e.tag})" if e.tag else "")
    elif e.verdict == "checkpoint-only":
        note = f"checkpoint-only: {e.kind}"
    elif e.verdict == "model-only":
        note = f"model-only: {e.tag}"
    elif e.tag:
        note = e.tag
    if e.verdict == "checkpoint-only":
        return note, (6 if e.explained else 7), ((2, e.checkpoint_elements if e.parameter else 0),)
    add = (((0, e.model_elements),) + (((1, e.checkpoint_elements),) if e.verdict in ("match", "mismatch") else ())
           if e.parameter else ())
    return note, _VERDICT_SLOT[e.verdict], add


def _bottom_up(paths: list[str], order: dict[str, int], parent: list[int], entries: list[Entry],
               positions: list[int] | None = None) -> dict[str, dict[str, Any]]:
    n = len(paths)
    # [model, checkpoint, ck_only, match, mismatch, missing, ck_explained, ck_unexplained, notes, more notes,
    #  model_only]
    # notes: the first 4 distinct notes, each with the position of the entry that first gave it (a module's first
    # 4 are among its children's first 4: merging them by position is exact); more: whether there were others.
    stats: list[list[Any] | None] = [None] * n
    extra: dict[str, list[Any]] = {}
    memo: dict[tuple, tuple] = {}
    add_note = _add if positions is None else _add_any_order
    for k, e in enumerate(entries) if positions is None else zip(positions, entries):
        if e.members is not None:  # a family: one verdict, each pair at its own module and place
            note, slot, add = _entry_parts(e.first, e.first.module or "")
            alone = [0, 0, 0, 0, 0, 0, 0, 0, None, False, 0]  # a module's row when this is its first entry
            for f, v in add:
                alone[f] += v
            alone[slot] += 1
            for p, mt, _ in e.members:
                r = mt.row
                s = stats[r]
                if s is None:
                    s = stats[r] = alone.copy()
                    s[8] = {note: p} if note is not None else {}
                else:
                    _add_any_order(s, add, slot, note, p)
            continue
        path = e.module or ""
        key = (e.verdict, e.tag, e.kind, e.explained, e.parameter, e.model_elements, e.checkpoint_elements,
               e.model, e.checkpoint[0] if e.checkpoint else None, path) if e.verdict != "match" else \
            (e.tag, e.parameter, e.model_elements, e.checkpoint_elements)
        parts = memo.get(key)
        if parts is None:
            parts = memo[key] = _entry_parts(e, path)
        note, slot, add = parts
        i = order.get(path)
        if i is None:  # beyond the model's modules: its own rows walked here, the model's part added below
            deepest = 0
            for p in _ancestors(path, order):
                j = order.get(p)
                if j is not None:
                    deepest = max(deepest, j)
                    continue
                s = extra.get(p)
                if s is None:
                    s = extra[p] = [0, 0, 0, 0, 0, 0, 0, 0, {}, False, 0]
                add_note(s, add, slot, note, k)
            i = deepest
        s = stats[i]
        if s is None:
            s = stats[i] = [0, 0, 0, 0, 0, 0, 0, 0, {}, False, 0]
        add_note(s, add, slot, note, k)
    _roll_up(stats, parent)
    return _rows_of(paths, parent, stats, extra, order)


def _roll_up(stats: list[list[Any] | None], parent: list[int]) -> None:
    """Each module's tallies added into its parent's, deepest first (a module's row follows its parent's in
    `stats`); notes merged by position, the first 4 kept."""
    n = len(stats)
    for i in range(n - 1, 0, -1):
        s = stats[i]
        if s is None:
            continue
        j = parent[i]
        t = stats[j]
        if t is None:
            stats[j] = [*s[:8], dict(s[8]), s[9], s[10]]
            continue
        t[0] += s[0]
        t[1] += s[1]
        t[2] += s[2]
        t[3] += s[3]
        t[4] += s[4]
        t[5] += s[5]
        t[6] += s[6]
        t[7] += s[7]
        t[10] += s[10]
        if s[8]:
            tn = t[8]
            for note, at in s[8].items():
                old = tn.get(note)
                if old is None or at < old:
                    tn[note] = at
            if len(tn) > 4:
                kept = sorted(tn.items(), key=lambda kv: kv[1])
                t[8] = dict(kept[:4])
                t[9] = True
        if s[9]:
            t[9] = True


def _rows_of(paths: list[str], parent: list[int], stats: list[list[Any] | None], extra: dict[str, list[Any]],
             order: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The rows by path: the model's modules, then the checkpoint's own paths beyond them."""
    n = len(paths)
    notes_of: list[Any] = [None] * n
    rows: dict[tuple, dict[str, Any]] = {}
    out: dict[str, dict[str, Any]] = {}
    for i, s in enumerate(stats):
        if s is None:
            continue
        notes = notes_of[i] = _notes_key(s)
        out[paths[i]] = _row(rows, s, notes, notes_of[parent[i]] if i else None, True)
    for p in sorted(extra):
        s = extra[p]
        q = p.rpartition(".")[0]
        j = order.get(q)
        up = notes_of[j] if j is not None else (_notes_key(extra[q]) if q in extra else None)
        out[p] = _row(rows, s, _notes_key(s), up, False)
    return out


def _add(s: list[Any], add: tuple[tuple[int, int], ...], slot: int, note: str | None, k: int) -> None:
    for f, v in add:
        s[f] += v
    s[slot] += 1
    if note is not None:
        ns = s[8]
        if note not in ns:
            if len(ns) < 4:
                ns[note] = k
            else:
                s[9] = True


def _add_any_order(s: list[Any], add: tuple[tuple[int, int], ...], slot: int, note: str | None, k: int) -> None:
    """``_add`` for entries taken in any order: the notes kept are the 4 first given (by position), as ``_add``
    keeps them for entries taken in order."""
    for f, v in add:
        s[f] += v
    s[slot] += 1
    if note is not None:
        ns = s[8]
        at = ns.get(note)
        if at is None:
            ns[note] = k
            if len(ns) > 4:
                del ns[max(ns, key=ns.__getitem__)]
                s[9] = True
        elif k < at:
            ns[note] = k


def _notes_key(s: list[Any]) -> tuple[str, ...]:
    """A row's notes in order, "…" last when there were more."""
    ns = s[8]
    return tuple(sorted(ns, key=ns.__getitem__)) + (("…",) if s[9] else ())


def _verdict(n_match: int, n_mis: int, n_missing: int, n_unexpl: int, n_model_only: int = 0) -> str:
    """A module row's verdict from its counts."""
    if n_mis or n_unexpl:
        return "mismatch"
    if n_match == 0 and n_missing == 0:
        return "model-only" if n_model_only else "checkpoint-only"
    if n_missing:
        return "missing" if n_match == 0 else "partial"
    return "match"


def _row(rows: dict[tuple, dict[str, Any]], s: list[Any], notes: tuple[str, ...], parent_notes: tuple[str, ...] | None,
         in_model: bool) -> dict[str, Any]:
    model, ck, ck_only, n_match, n_mis, n_missing, n_expl, n_unexpl = s[:8]
    verdict = _verdict(n_match, n_mis, n_missing, n_unexpl, s[10])
    # A matching module whose notes are its parent's says nothing new (256 experts × 3 projections of the same
    # "fp4 on disk" note would be most of the JSON); mismatches always keep theirs.
    shown = bool(notes) and not (verdict == "match" and parent_notes is not None
                                 and set(parent_notes) == set(notes))
    key = (verdict, model, ck, notes if shown else None, ck_only, in_model)
    d = rows.get(key)
    if d is None:
        d = {"verdict": verdict, "model": model, "checkpoint": ck}
        if shown:
            d["notes"] = [x for x in notes if x != "…"] + (["… more notes below"] if "…" in notes else [])
        if ck_only:
            d["checkpoint_only"] = ck_only
        if not in_model:
            d["in_model"] = False
        rows[key] = d
    return d


def _per_entry(record: ModelRecord, entries: list[Entry]) -> dict[str, dict[str, Any]]:
    """``module_verdicts`` for module paths that do not form a tree (hand-made records): entry by entry up each
    entry's ancestors."""
    stats: dict[str, list[Any]] = {}
    order = {p: i for i, p in enumerate(record.column("path"))}
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

    # [model, checkpoint, ck_only, match, mismatch, missing, ck_explained, ck_unexplained, notes, (unused), model_only]
    for e in entries:
        path = e.module or ""
        note, slot, add = _entry_parts(e, path)  # what this entry adds to each ancestor's row, worked out once
        chained = path in order and path.count(".") < _CHAIN_DEPTH
        for p in (chain(path) if chained else _ancestors(path, order)):
            s = stats.get(p)
            if s is None:
                s = stats[p] = [0, 0, 0, 0, 0, 0, 0, 0, {}, False, 0]
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
        model, ck, ck_only, n_match, n_mis, n_missing, n_expl, n_unexpl, notes, _, n_model_only = stats[p]
        verdict = _verdict(n_match, n_mis, n_missing, n_unexpl, n_model_only)
        d: dict[str, Any] = {"verdict": verdict, "model": model, "checkpoint": ck}
        # A matching module whose notes are its parent's says nothing new (256 experts × 3 projections of the same
        # "fp4 on disk" note would be most of the JSON); mismatches always keep theirs.
        parent = (p.rsplit(".", 1)[0] if "." in p else "") if p else None
        if notes and not (verdict == "match" and parent is not None and stats.get(parent, [None] * 11)[8] == notes):
            d["notes"] = [n for n in notes if n != "…"] + (["… more notes below"] if "…" in notes else [])
        if ck_only:
            d["checkpoint_only"] = ck_only
        if p not in order:
            d["in_model"] = False
        out[p] = d
    return out

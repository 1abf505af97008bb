"""`archviz diff`: what changed between two models, or two versions of one. Pure functions of two ModelRecords
(no torch, no transformers).

    from archviz.diff import diff
    d = diff(record_a, record_b, ignore=("lines",))
    d.identical, d.folded, d.totals

Modules are matched by path, then by rename rules, then by structure (`match`); each matched pair is compared in
the aspects asked for (`compare`); added and removed subtrees carry their parameter totals; the differences are
folded as the explorer groups modules (`fold`), and the model totals set side by side (`totals`).
"""

from __future__ import annotations

from typing import Iterable

from ..errors import ArchvizError, option
from ..gcpause import collector_paused
from ..records import ModelRecord
from .compare import compare, pass_dims
from .fold import Kinds, fold
from .match import Rename, match, rename_functions
from .result import (
    ASPECTS, BY_PATH, BY_RULE, BY_STRUCTURE, WITHIN, Change, Delta, Folded, ModelDiff, NodeDiff, Pair, Subtree,
)
from .summary import summarize
from .totals import totals


def parse_ignore(values: Iterable[str] | None) -> tuple[str, ...]:
    """The ignore option, `lines,call-sites` (repeatable) -> the aspects, checked against ASPECTS."""
    out: list[str] = []
    for v in values or ():
        for part in v.split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part == "call_sites":
                part = "call-sites"
            if part not in ASPECTS:
                raise ArchvizError(f"{option('ignore')} {part!r}: not something diff compares",
                                   hint=f"use any of {', '.join(ASPECTS)}, comma-separated")
            if part not in out:
                out.append(part)
    return tuple(out)


def check_tree(record: ModelRecord, label: str) -> None:
    """A records file is data from elsewhere: refuse (exit 2) one whose modules do not form the tree they say."""
    def bad(what: str) -> ArchvizError:
        return ArchvizError(f"{label}: records are inconsistent: {what}",
                            hint="write the records again with `archviz walk SOURCE -o records.json`")

    if not record.modules:
        raise bad("no modules")
    seen: dict[str, int] = {}
    for i, m in enumerate(record.modules):
        if m.path in seen:
            raise bad(f"module {m.path!r} recorded twice")
        seen[m.path] = i
    root = record.modules[0].path
    for i, m in enumerate(record.modules):
        for c in m.children:
            j = seen.get(c)
            if j is None:
                raise bad(f"module {m.path!r} lists child {c!r}, which is not recorded")
            if j <= i or c.rpartition(".")[0] != m.path:
                raise bad(f"module {c!r} is listed as a child of {m.path!r}, which is not its parent")
        if m.path != root and (m.parent not in seen or m.path not in record.modules[seen[m.parent]].children):
            raise bad(f"module {m.path!r} is not among its parent's children")


def _has_shapes(record: ModelRecord) -> bool:
    return any(m.calls or m.called is not None for m in record.modules)


def _count_subtrees(record: ModelRecord, tops: list[str]) -> dict[str, int]:
    """Modules in each top's subtree, in one pass over the pre-order modules."""
    counts = dict.fromkeys(tops, 0)
    top_set = set(tops)
    current: list[str] = []
    for m in record.modules:
        p = m.path
        while current and not (p == current[-1] or p.startswith(current[-1] + ".")):
            current.pop()
        if p in top_set:
            current.append(p)
        if current:
            counts[current[-1]] += 1  # nested tops cannot happen (a top's parent is matched)
    return counts


@collector_paused()
def diff(a: ModelRecord, b: ModelRecord, *, rules: object | None = None, renames: Iterable[Rename] | None = None,
         ignore: Iterable[str] = (), spec_a: str | None = None, spec_b: str | None = None) -> ModelDiff:
    """The differences from model A to model B.

    rules: an `archviz.checkpoint.rules.Rules` whose rulesets' renames match modules renamed between A and B
    (`load_rules()` for the built-in ones, `load_rules(path)` with a user file); renames: more (name, function)
    pairs. ignore: aspects left out (see ASPECTS)."""
    check_tree(a, spec_a or a.source.spec)
    check_tree(b, spec_b or b.source.spec)
    ignored = tuple(x for x in ASPECTS if x in set(ignore))
    aspects = frozenset(x for x in ASPECTS if x not in ignored)
    fns = rename_functions(rules) + list(renames or ())
    ia, ib = a.index(), b.index()
    pairs = match(a, b, fns, (ia, ib))
    notes, shapes, sized, dims = _pass_notes(a, b, aspects)
    changes_of: dict[str, list[Change]] = {}
    renamed: list[Pair] = []
    same = len(pairs) == len(a.modules) == len(b.modules)  # every module paired with an equal record
    for m in a.modules:
        p = pairs.get(m.path)
        if p is None:
            continue
        mb = ib[p.b]
        if m == mb:
            continue
        same = False
        changes = compare(m, mb, aspects, shapes, sized, dims)
        if changes:
            changes_of[m.path] = changes
        if p.how in (BY_RULE, BY_STRUCTURE) and "renames" in aspects:
            renamed.append(p)
    kinds: tuple[Kinds, Kinds] | None = None  # the grouping of each model, made once, when first needed
    if "multiplicity" in aspects and not same:
        kinds = Kinds(a), Kinds(b)
        _multiplicity_changes(a, pairs, kinds, changes_of)
    nodes: list[NodeDiff] = []
    for m in a.modules:
        changes = changes_of.get(m.path)
        if changes:
            p = pairs[m.path]
            nodes.append(NodeDiff(m.path, p.b, p.how, tuple(changes), ib[p.b].own.parameters - m.own.parameters))
    added: list[Subtree] = []
    removed: list[Subtree] = []
    if "structure" in aspects:
        added, removed = _subtrees(a, b, pairs, (ia, ib))
    deltas = totals(a, b)
    folded = fold(a, b, nodes, renamed, added, removed, kinds, (ia, ib)) if (nodes or renamed or added or removed) \
        else ()
    return ModelDiff(
        a=spec_a or a.source.spec, b=spec_b or b.source.spec, a_name=a.source.name, b_name=b.source.name,
        compared=tuple(x for x in ASPECTS if x in aspects), ignored=ignored, matched=len(pairs),
        modules_a=len(a.modules), modules_b=len(b.modules), renamed=tuple(renamed), nodes=tuple(nodes),
        added=tuple(added), removed=tuple(removed), totals=deltas, folded=folded, notes=tuple(notes),
        summary=summarize(a, b, deltas, folded),
    )


def _pass_notes(a: ModelRecord, b: ModelRecord, aspects: frozenset[str]) -> tuple[list[str], bool, bool, tuple]:
    """What the two records' passes let the diff compare: the notes saying what is left out, whether both carry a
    meta pass, whether the passes ran at one size, and each pass's named dims."""
    notes: list[str] = []
    shapes = _has_shapes(a) and _has_shapes(b)
    if not shapes and ({"shapes", "call-sites", "kernels", "notes"} & aspects):
        which = " and ".join(x for x, r in (("A", a), ("B", b)) if not _has_shapes(r))
        notes.append(f"shapes, call sites, kernels and the meta pass's notes not compared: {which} "
                     f"{'has' if ' and ' not in which else 'have'} no meta pass (write records with "
                     f"`archviz walk {option('shapes')}`, or give the model source)")
    pa, pb = a.extra("shapes") or {}, b.extra("shapes") or {}
    sized = shapes and (pa.get("B"), pa.get("T")) == (pb.get("B"), pb.get("T"))
    if shapes and not sized and ({"shapes", "notes"} & aspects):
        notes.append(f"shapes and the meta pass's notes not compared: the meta passes ran at different sizes (A: "
                     f"B={pa.get('B')}, T={pa.get('T')}; B: B={pb.get('B')}, T={pb.get('T')}), and a shape or a note "
                     f"quoting one may differ for that alone; run both with the same {option('batch')} and "
                     f"{option('seq')}")
    dims = (pass_dims(pa), pass_dims(pb))
    costed = [x for x, r in (("A", a), ("B", b)) if r.extra("cost")]
    if len(costed) == 1 and "totals" in aspects:
        notes.append(f"FLOPs and KV-cache figures not compared: only {costed[0]} carries a cost pass (records of "
                     "`archviz cost -o`)")
    return notes, shapes, sized, dims


def _multiplicity_changes(a: ModelRecord, pairs: dict[str, Pair], kinds: tuple[Kinds, Kinds],
                          changes_of: dict[str, list[Change]]) -> None:
    """Multiplicity compared on the top module whose multiplicity changed (its descendants change with it); the
    grouping is a function of the records, so two models whose records are all equal group alike."""
    from ..group import multiplicity_text

    ka, kb = kinds
    mult_changed: set[str] = set()
    for m in a.modules:
        p = pairs.get(m.path)
        if p is None:
            continue
        x, y = ka.multiplicity(m.path), kb.multiplicity(p.b)
        if x != y:
            mult_changed.add(m.path)
            if m.parent not in mult_changed:
                changes_of.setdefault(m.path, []).append(
                    Change("multiplicity", "multiplicity", multiplicity_text(x) or "× 1",
                           multiplicity_text(y) or "× 1"))


def _subtrees(a: ModelRecord, b: ModelRecord, pairs: dict[str, Pair],
              indexes: tuple[dict, dict]) -> tuple[list[Subtree], list[Subtree]]:
    """The subtrees added in B and removed from A, each at its top module, with what it carries."""
    ia, ib = indexes
    added: list[Subtree] = []
    removed: list[Subtree] = []
    taken = {p.b for p in pairs.values()}
    tops_a = [m.path for m in a.modules if m.path not in pairs and m.parent in pairs]
    tops_b = [m.path for m in b.modules if m.path not in taken and m.parent in taken]
    for record, index, tops, side, out in ((a, ia, tops_a, "removed", removed), (b, ib, tops_b, "added", added)):
        counts = _count_subtrees(record, tops)
        for t in tops:
            m = index[t]
            out.append(Subtree(side, t, m.class_name, m.totals.parameters, m.totals.scale_elements,
                               m.totals.buffer_elements, m.totals.bytes, counts[t]))
    return added, removed


__all__ = ["diff", "parse_ignore", "check_tree", "match", "compare", "fold", "totals", "rename_functions", "ASPECTS",
           "BY_PATH", "BY_RULE", "BY_STRUCTURE", "WITHIN", "Change", "Delta", "Folded", "ModelDiff", "NodeDiff",
           "Pair", "Subtree"]

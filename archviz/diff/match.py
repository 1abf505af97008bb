"""Module matching between two models' records: by path, then by rename rules, then by structure.

`match(a, b, renames)` walks both trees from the roots down. The children of a matched pair are paired by name
(the same path, or the same name under a renamed parent); what is left on either side is paired by a rename rule
(`renames`: named functions from a path to another, tried in both directions), then by structure: a subtree with
the same classes, tensors and children under another name is a rename, not one removal and one addition. A
subtree matched by nothing among its siblings is tried against every unmatched subtree (moved elsewhere) by rule
and by exact structure before it is called added or removed. Pure function of records (no torch).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Sequence

from ..records import ModelRecord, ModuleRecord
from .result import BY_PATH, BY_RULE, BY_STRUCTURE, WITHIN, Pair

Rename = tuple[str, Callable[[str], str]]  # (ruleset name, path -> path)


def _rel(parent: str, child: str) -> str:
    return child[len(parent) + 1:] if parent else child


class _Signatures:
    """Structural signatures of every subtree, bottom-up, interned to small ints: `exact` (classes, tensors with
    shapes and dtypes, children by name) and `loose` (the same without shapes, dtypes and counts)."""

    def __init__(self, record: ModelRecord):
        self.exact: dict[str, int] = {}
        self.loose: dict[str, int] = {}
        ids_e: dict[tuple, int] = {}
        ids_l: dict[tuple, int] = {}
        for m in reversed(record.modules):
            kids_e = tuple((_rel(m.path, c), self.exact[c]) for c in m.children if c in self.exact)
            kids_l = tuple((_rel(m.path, c), self.loose[c]) for c in m.children if c in self.loose)
            key_e = (m.class_name, tuple((t.name, t.kind, t.shape, t.dtype, t.elements) for t in m.tensors), kids_e)
            key_l = (m.class_name, tuple((t.name, t.kind) for t in m.tensors), kids_l)
            self.exact[m.path] = ids_e.setdefault(key_e, len(ids_e))
            self.loose[m.path] = ids_l.setdefault(key_l, len(ids_l))


class _Matcher:
    def __init__(self, a: ModelRecord, b: ModelRecord, renames: Sequence[Rename],
                 indexes: tuple[dict[str, ModuleRecord], dict[str, ModuleRecord]] | None = None):
        self.ia, self.ib = indexes or (a.index(), b.index())
        self.a, self.b = a, b
        self.renames = list(renames)
        self.pairs: dict[str, Pair] = {}  # A path -> pair
        self.taken: set[str] = set()  # B paths paired
        self.queue: deque[tuple[str, str]] = deque()
        self._sa: _Signatures | None = None
        self._sb: _Signatures | None = None

    # -- signatures, computed only when some module is left over ---------------------------------------------------

    @property
    def sa(self) -> _Signatures:
        if self._sa is None:
            self._sa = _Signatures(self.a)
        return self._sa

    @property
    def sb(self) -> _Signatures:
        if self._sb is None:
            self._sb = _Signatures(self.b)
        return self._sb

    # -- pairing --------------------------------------------------------------------------------------------------

    def add(self, pa: str, pb: str, how: str, rule: str = "") -> None:
        self.pairs[pa] = Pair(pa, pb, how, rule)
        self.taken.add(pb)
        self.queue.append((pa, pb))

    def renamed(self, path: str, targets: set[str] | dict[str, ModuleRecord]) -> tuple[str, str] | None:
        """(target, ruleset) when a rename maps `path` onto one of `targets`. Rules rename tensor names, so a rule
        anchored on a tensor's name (`...weight$`) is tried on `path.weight` as well."""
        for name, fn in self.renames:
            for probe, cut in ((path, 0), (f"{path}.weight" if path else "weight", 7)):
                q = fn(probe)
                if cut:
                    if not q.endswith(".weight") or q == probe:
                        continue
                    q = q[:-cut]
                if q != path and q in targets:
                    return q, name
        return None

    def siblings(self, pa: str, pb: str) -> None:
        ma, mb = self.ia[pa], self.ib[pb]
        kids_b = {_rel(pb, c): c for c in mb.children}
        left_a: list[str] = []
        for c in ma.children:
            if c in self.pairs:
                continue
            other = kids_b.get(_rel(pa, c))
            if other is not None and other not in self.taken:
                self.add(c, other, BY_PATH if c == other else WITHIN)
            else:
                left_a.append(c)
        left_b = [c for c in mb.children if c not in self.taken]
        if left_a and left_b:
            self.leftovers(left_a, left_b)

    def leftovers(self, left_a: list[str], left_b: list[str]) -> None:
        """Pair modules left over on both sides: by rule (either direction), exact structure, loose structure."""
        if self.renames:
            set_b = set(left_b)
            for c in left_a:
                hit = self.renamed(c, set_b)
                if hit is not None and hit[0] not in self.taken:
                    self.add(c, hit[0], BY_RULE, hit[1])
            set_a = {c for c in left_a if c not in self.pairs}
            for c in left_b:
                if c in self.taken:
                    continue
                hit = self.renamed(c, set_a)
                if hit is not None and hit[0] not in self.pairs:
                    self.add(hit[0], c, BY_RULE, hit[1])
        for sig_a, sig_b, unique in ((self.sa.exact, self.sb.exact, False), (self.sa.loose, self.sb.loose, True)):
            rest_a = [c for c in left_a if c not in self.pairs]
            rest_b = [c for c in left_b if c not in self.taken]
            if not rest_a or not rest_b:
                return
            by_sig: dict[int, list[str]] = {}
            for c in rest_b:
                by_sig.setdefault(sig_b[c], []).append(c)
            count_a: dict[int, int] = {}
            for c in rest_a:
                count_a[sig_a[c]] = count_a.get(sig_a[c], 0) + 1
            for c in rest_a:
                cands = by_sig.get(sig_a[c])
                if not cands or (unique and (len(cands) > 1 or count_a[sig_a[c]] > 1)):
                    continue
                # a loose match is a rename only for a module with something to recognise it by
                if unique and not (self.ia[c].tensors or self.ia[c].children):
                    continue
                self.add(c, cands.pop(0), BY_STRUCTURE)

    def drain(self) -> None:
        while self.queue:
            self.siblings(*self.queue.popleft())

    def run(self) -> dict[str, Pair]:
        # by path first, everywhere: a path in both models has its parent in both too
        ib, pairs = self.ib, self.pairs
        for p in self.ia:
            if p in ib:
                pairs[p] = Pair(p, p, BY_PATH)
        self.taken = set(pairs)
        ra, rb = self.a.modules[0].path, self.b.modules[0].path
        if ra not in pairs:
            self.add(ra, rb, WITHIN)
        # then what is left under each pair, from the top down
        taken = self.taken
        for m in self.a.modules:
            if m.path in pairs and m.path in ib:
                if any(c not in pairs for c in m.children) or any(c not in taken for c in ib[m.path].children):
                    self.queue.append((m.path, m.path))
        self.drain()
        # moved subtrees: the top unmatched modules of each side, tried against each other anywhere in the tree
        tops_a = [m.path for m in self.a.modules if m.path not in self.pairs and m.parent in self.pairs]
        tops_b = [m.path for m in self.b.modules if m.path not in self.taken and m.parent in self.taken]
        if tops_a and tops_b:
            # only by rule or exact structure: a loose match across the tree would pair unrelated modules
            rest = [c for c in tops_a if c not in self.pairs]
            if self.renames:
                set_b = set(tops_b)
                for c in rest:
                    hit = self.renamed(c, set_b)
                    if hit is not None and hit[0] not in self.taken:
                        self.add(c, hit[0], BY_RULE, hit[1])
            by_sig: dict[int, list[str]] = {}
            for c in tops_b:
                if c not in self.taken and (self.ib[c].children or self.ib[c].tensors):
                    by_sig.setdefault(self.sb.exact[c], []).append(c)
            for c in tops_a:
                if c in self.pairs or not (self.ia[c].children or self.ia[c].tensors):
                    continue
                cands = [x for x in by_sig.get(self.sa.exact[c], ()) if x not in self.taken]
                if cands:
                    self.add(c, cands[0], BY_STRUCTURE)
            self.drain()
        return self.pairs


def match(a: ModelRecord, b: ModelRecord, renames: Sequence[Rename] = (),
          indexes: tuple[dict[str, ModuleRecord], dict[str, ModuleRecord]] | None = None) -> dict[str, Pair]:
    """A path -> its pair in B, for every module of A that matches one of B (each B module at most once);
    `indexes`: the records' `index()`, when already made."""
    return _Matcher(a, b, renames, indexes).run()


def rename_functions(rules: object | None) -> list[Rename]:
    """The rename functions of a `archviz.checkpoint.rules.Rules` (built-in rulesets, and a user file's), one per
    ruleset that renames anything, the user's top-level renames applied before each, as a checkpoint load does."""
    if rules is None:
        return []
    from ..checkpoint.rules import renamer

    user = getattr(rules, "user", None)
    out: list[Rename] = []
    if user is not None and user.renames:
        out.append((user.name, renamer(user)))
    for rs in getattr(rules, "rulesets", ()):
        if rs.renames:
            out.append((rs.name, renamer(user, rs)))
    return out


__all__ = ["match", "rename_functions", "Rename"]

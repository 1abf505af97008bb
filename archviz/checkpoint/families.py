"""Compare by families: the checkpoint's tensors whose names differ only in their layer/expert indices are mapped
once per family, and each pair of a checkpoint family and a kind of model tensor gets one verdict.

``compare`` (compare.py) maps every checkpoint tensor and works out every model tensor's verdict on its own: 45,000
expert projections of a 671B model are 45,000 renames, lookups and entries. Their names split at the index
components (``split_name``) into a handful of templates: a digit-blind rename is a rename of the template, and the
prefix step adds or strips the same text for every index. So a family is renamed once, its lookup in the model is
one template and one set of indices, and a verdict is shared by every pair of one checkpoint family and one kind of
model tensor (one tensor record, one set of scales).

This path gives what the per-tensor path gives, to the byte. It is taken only when that holds by construction:

- the chosen ruleset (and a user's rules) rename digit-blind, with no mapper and no fuse rule that could pick up a
  tensor the renames leave unmapped;
- the prefix step is decided per family: for each family at most one candidate template (the name as is, a prefix
  added or stripped) names any model tensor, so which prefix wins never depends on the order of the lookups;
- one checkpoint tensor per model tensor, none landing on an alias (a tied copy, a second copy);
- scales pair one to one, and a scale's name differs from its weight's in the last component only;
- no name holds ``"{}"`` or a NUL character, and the module paths form a tree (as every walk writes them).

Anything else raises :class:`Fallback` before anything is written, and the per-tensor path runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from .entries import DirectEntries, Entry, missing_entry
from .mapping import Resolver
from .rules import Rules, Ruleset, chained_renames
from .templates import HOLE, fill, sibling_template, split_name
from .units import ModelTensor, Unit

__all__ = ["Fallback", "FamilyEntry", "ModelNames", "compare_families", "family_score"]


class Fallback(Exception):
    """This comparison needs the per-tensor path (the reason is the message)."""


@dataclass
class FamilyEntry:
    """One verdict shared by the pairs of a checkpoint family and a kind of model tensor: the fields of the
    ``Entry`` its first pair gives (``first``), and every pair as (position among the model's tensors, model tensor,
    checkpoint unit), in position order."""

    first: Entry
    members: list[tuple[int, ModelTensor, Unit]] = field(default_factory=list)
    scale_templates: tuple[str, ...] = ()  # of the checkpoint's scales (their indices are their weight's)

    def __getattr__(self, name: str) -> Any:  # verdict, kind, counts, note, ...: the shared fields
        if name in ("first", "members", "scale_templates"):
            raise AttributeError(name)
        return getattr(self.first, name)

    @property
    def count(self) -> int:
        return len(self.members)

    def to_json(self) -> dict[str, Any]:
        return self.first.to_json()


def _canonical(template: str) -> bool:
    """Whether ``template`` is the split of every name it fills to: each component a hole, or no hole and not an
    index (so ``split_name(fill(template, nums)) == (template, nums)`` for index components ``nums``)."""
    for c in template.split("."):
        if c == HOLE:
            continue
        if HOLE in c or (c.isdigit() and c.isascii()):
            return False
    return True


class _TemplateRenamer:
    """The renames of a user's rules then a ruleset's, on templates (they are all digit-blind)."""

    def __init__(self, user: Ruleset | None, ruleset: Ruleset):
        apply, blind = chained_renames((user, ruleset))
        if not blind:
            raise Fallback("a rename is not digit-blind")
        self.apply = apply or (lambda t: t)

    def __call__(self, template: str, holes: int) -> str:
        t = self.apply(template)
        if t.count(HOLE) != holes or not _canonical(t):
            raise Fallback(f"a rename moves an index: {template!r}")
        return t


def _candidates(template: str, ops: list[tuple[str, str]]) -> Iterator[tuple[tuple[str, str] | None, str]]:
    """(prefix op or None for the name as is, the template it gives) in the resolver's order of trying them."""
    yield None, template
    literal = template.split(HOLE, 1)[0]
    for op in ops:
        kind, p = op
        if kind == "add":
            c = p + template
        else:
            if len(p) > len(literal):  # past the text before the first index (or longer than the name)
                if p.startswith(literal) and HOLE in template:
                    raise Fallback(f"prefix {p!r} reaches an index of {template!r}")
                continue
            if not template.startswith(p):
                continue
            c = template[len(p):]
        if not _canonical(c):
            raise Fallback(f"prefix {p!r} of {template!r} gives no template")
        yield op, c


@dataclass
class _CkFamily:
    template: str
    scale_templates: tuple[str, ...]
    units: list[Unit] = field(default_factory=list)  # in checkpoint order
    at: list[int] = field(default_factory=list)  # each unit's place in the checkpoint's order


class ModelNames:
    """The model's tensor names by template: template → {indices: the target's position in ``targets``, -1 for
    another name (a non-persistent buffer, a paired scale), -2 for an alias}. Each name is filed under its split
    (``ModelTensor.template``/``nums``); the other names' indices are filed only when a lookup needs them."""

    def __init__(self, targets: dict[str, ModelTensor], aliases: dict[str, str], others: dict[str, ModelTensor]):
        self.target_list = list(targets.values())
        index: dict[str, dict[tuple[str, ...], int]] = {}
        for pos, mt in enumerate(self.target_list):
            d = index.get(mt.template)
            if d is None:
                d = index[mt.template] = {}
            d[mt.nums] = pos
        self.index = index
        self._others = others
        self._other_templates = {mt.template for mt in others.values()}
        if self._other_templates & index.keys():
            self._add_others()
        for name in aliases:
            t, nums = split_name(name)
            index.setdefault(t, {})[nums] = -2

    def _add_others(self) -> None:
        index = self.index
        for mt in self._others.values():
            index.setdefault(mt.template, {})[mt.nums] = -1
        self._other_templates = set()

    def get(self, template: str) -> dict[tuple[str, ...], int] | None:
        """The indices of the names of this template (None: no name has it)."""
        if template in self._other_templates:
            self._add_others()
        return self.index.get(template)


def family_score(sample: list[Unit], ruleset: Ruleset, user: Ruleset | None, names: ModelNames,
                 resolver: Resolver) -> int | None:
    """``map_units(sample, ruleset, user, resolver, write=False)`` (how many land on a model tensor), worked out per
    template: None where that cannot be (a mapper, a rename that is not digit-blind or moves an index). The units
    carry their splits. A fuse rule sees each name the templates leave unmapped, as ``map_units`` shows it."""
    if ruleset.mapper is not None:
        return None
    try:
        rename = _TemplateRenamer(user, ruleset)
    except Fallback:
        return None
    fuse = (user.fuse if user else ()) + ruleset.fuse
    seen: dict[str, tuple[str, list[dict[tuple[str, ...], int]]]] = {}
    hits = 0
    for u in sample:
        got = seen.get(u.template)
        if got is None:
            try:
                renamed = rename(u.template, len(u.nums))
                found = [d for _, c in _candidates(renamed, resolver.ops) if (d := names.get(c)) is not None]
            except Fallback:
                return None
            got = seen[u.template] = (renamed, found)
        renamed, found = got
        nums = u.nums
        if any(nums in d for d in found):
            hits += 1
            continue
        if fuse:
            name = fill(renamed, nums)
            for f in fuse:
                t = f.target(name)
                if t is not None and resolver.resolve(t) is not None:
                    hits += 1
                    break
    return hits


def compare_families(units: list[Unit], names: ModelNames, ruleset: Ruleset, rules: Rules, block: tuple[int, int],
                     resolver: Resolver) -> tuple[list[Any], list[int], list[Unit]]:
    """Map ``units`` with ``ruleset`` family by family and give each model tensor its verdict: (the entries in the
    per-tensor path's order — a ``FamilyEntry`` where many pairs share a verdict, an ``Entry`` for the rest, both at
    their first position; those positions (a model tensor's place in ``targets``); the checkpoint-only units, in
    checkpoint order). Writes each unit's mapping (``mapped``, ``target``) as ``map_units`` does where a unit is
    left over, and the resolver's counts of the prefixes used.
    Raises :class:`Fallback` before writing anything when the per-tensor path is needed."""
    user = rules.user
    if ruleset.mapper is not None:
        raise Fallback("the ruleset maps names with code")
    mapped = _FamilyMapping(names, _TemplateRenamer(user, ruleset), resolver.ops,
                            bool((user.fuse if user else ()) + ruleset.fuse))
    for fam in _checkpoint_families(units).values():
        mapped.add(fam)

    # what is written: the resolver's counts, in the order the prefixes were first used; the leftovers' mapping
    resolver.hits = {op: mapped.used[op] for op in sorted(mapped.first_use, key=mapped.first_use.__getitem__)}
    left = sorted(mapped.left, key=lambda x: x[0])
    for _, u, to, target in left:
        u.mapped, u.target, u.fuse, u.split = to, target, None, ()

    entries = _pair_entries(mapped.pairs.values(), DirectEntries(block, rules, ruleset, user, resolver))
    taken, target_list = mapped.taken, names.target_list
    pos = taken.find(0)
    while pos >= 0:
        entries.append((pos, missing_entry(target_list[pos])))
        pos = taken.find(0, pos + 1)
    entries.sort(key=lambda x: x[0])
    return [e for _, e in entries], [p for p, _ in entries], [u for _, u, _, _ in left]


def _checkpoint_families(units: list[Unit]) -> dict[tuple, _CkFamily]:
    """The checkpoint's families: units of one template, with their scales' templates, alike in all a verdict reads
    of the tensor (dtype, shape, packing, the scales' dtypes and shapes), in checkpoint order."""
    families: dict[tuple, _CkFamily] = {}
    for i, u in enumerate(units):
        info = u.info
        t = u.template  # (split by compare, before the ruleset was chosen)
        scales = u.scales
        if len(scales) == 1:  # (what a verdict reads beyond the name is part of the key)
            sc = scales[0]
            st = sibling_template(info.name, t, sc.name)
            if st is None:
                raise Fallback(f"a scale's name is not its weight's but for the last component: {sc.name!r}")
            sts: tuple[str, ...] = (st,)
            key: tuple = (t, st, info.dtype, info.shape, u.packed, sc.dtype, sc.shape)
        elif scales:
            sts = tuple(sibling_template(info.name, t, sc.name) for sc in scales)  # type: ignore[misc]
            if None in sts:
                raise Fallback(f"a scale's name is not its weight's but for the last component: {info.name!r}")
            key = (t, sts, info.dtype, info.shape, u.packed, tuple((sc.dtype, sc.shape) for sc in scales))
        else:
            sts = ()
            key = (t, info.dtype, info.shape, u.packed)
        fam = families.get(key)
        if fam is None:
            fam = families[key] = _CkFamily(t, sts)
        fam.units.append(u)
        fam.at.append(i)
    return families


Member = tuple[int, ModelTensor, Unit]  # (the model tensor's place in ``targets``, it, the checkpoint unit on it)


class _FamilyMapping:
    """Each family mapped: its template renamed, the one candidate template that names model tensors, its indices
    looked up. Collects the pairs by (family, kind of model tensor), the units left over (checkpoint place, unit,
    mapped name, target), which model tensors are taken, and the prefixes' uses."""

    def __init__(self, names: ModelNames, rename: _TemplateRenamer, ops: list[tuple[str, str]], fuse: bool):
        self.names, self.rename, self.ops, self.fuse = names, rename, ops, fuse
        self.taken = bytearray(len(names.target_list))
        self.pairs: dict[tuple, tuple[_CkFamily, list[Member]]] = {}
        self.left: list[tuple[int, Unit, str, str | None]] = []
        self.first_use: dict[tuple[str, str], int] = {}  # prefix op → the first checkpoint place it maps
        self.used: dict[tuple[str, str], int] = {}  # prefix op → the units it maps
        self._renamed: dict[str, str] = {}

    def add(self, fam: _CkFamily) -> None:
        renamed = self._renamed.get(fam.template)
        if renamed is None:
            renamed = self._renamed[fam.template] = self.rename(fam.template, len(fam.units[0].nums))
        names = self.names
        found = [(op, c, d) for op, c in _candidates(renamed, self.ops) if (d := names.get(c)) is not None]
        if len(found) > 1:
            raise Fallback(f"{len(found)} prefixes give model names for {renamed!r}")
        if not found:
            if self.fuse:
                raise Fallback("a fuse rule may take an unmapped tensor")
            self.left.extend((i, u, fill(renamed, u.nums), None) for i, u in zip(fam.at, fam.units))
            return
        op, c, filed = found[0]
        n_used = 0
        by_kind: dict[Any, list[Member]] = {}
        for i, u in zip(fam.at, fam.units):
            pos = filed.get(u.nums)
            if pos is None:
                if self.fuse:
                    raise Fallback("a fuse rule may take an unmapped tensor")
                self.left.append((i, u, fill(renamed, u.nums), None))
                continue
            if not n_used and op is not None and (op not in self.first_use or i < self.first_use[op]):
                self.first_use[op] = i
            n_used += 1
            if pos < 0:
                if pos == -2:
                    raise Fallback("a checkpoint tensor lands on an alias")
                self.left.append((i, u, fill(renamed, u.nums), fill(c, u.nums)))
                continue
            self._pair(fam, by_kind, pos, u)
        if op is not None and n_used:
            self.used[op] = self.used.get(op, 0) + n_used

    def _pair(self, fam: _CkFamily, by_kind: dict[Any, list[Member]], pos: int, u: Unit) -> None:
        """The unit ``u`` of ``fam`` on the model tensor at ``pos``, filed with its family's pairs of that kind."""
        if self.taken[pos]:
            raise Fallback("two checkpoint tensors land on one model tensor")
        self.taken[pos] = 1
        mt = self.names.target_list[pos]
        group = by_kind.get(mt.kind_key)
        if group is None:
            if mt.scales and u.scales and not (len(mt.scales) == 1 and len(u.scales) == 1):
                raise Fallback("scales that do not pair one to one")
            group = by_kind[mt.kind_key] = []
            self.pairs[(id(fam), mt.kind_key)] = (fam, group)
        group.append((pos, mt, u))


def _pair_entries(pairs: Iterable[tuple[_CkFamily, list[Member]]], direct: DirectEntries) -> list[tuple[int, Any]]:
    """One verdict per pair family (per instance where an explain rule's dtypes hold: its pattern sees the names),
    at its first model position."""
    entries: list[tuple[int, Any]] = []
    for fam, members in pairs:
        members.sort(key=lambda m: m[0])
        _, mt, u = members[0]
        explains = direct.explains_for(mt.rec.dtype, u.info.dtype)
        groups = [members]
        if explains:  # the pairs an explain rule's pattern picks apart (it reads the names)
            by_applies: dict[tuple[bool, ...], list[Member]] = {}
            for m in members:
                by_applies.setdefault(tuple(ex.matches(m[1].name, m[2].name) for ex in explains), []).append(m)
            groups = list(by_applies.values())
        for group in groups:
            pos, mt, u = group[0]
            first = direct(mt, u)
            packed, ok = u.packed, u.scales_ok
            for _, _, v in group:
                v.packed, v.scales_ok = packed, ok
            entries.append((pos, FamilyEntry(first, group, fam.scale_templates) if len(group) > 1 else first))
    return entries

"""Mapping checkpoint names to model names: the renames of each candidate ruleset, the prefix step, and the
best-scoring ruleset chosen on a sample."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from archviz.records import ModelRecord

from .rules import IDENTITY, Fuse, Rules, Ruleset, renamer, split_renamer
from .templates import split_name
from .units import Unit


class Resolver:
    """Finds a model name for a renamed checkpoint name: as is, then with a common prefix added or removed."""

    def __init__(self, names: set[str], prefixes: Sequence[str]):
        self.names = names
        self.ops: list[tuple[str, str]] = [("add", p) for p in prefixes] + [("strip", p) for p in prefixes]
        self.last: tuple[str, str] | None = None
        self.hits: dict[tuple[str, str], int] = {}

    def _apply(self, op: tuple[str, str], name: str) -> str | None:
        kind, p = op
        if kind == "add":
            return p + name
        return name[len(p):] if name.startswith(p) else None

    def resolve(self, name: str) -> str | None:
        names = self.names
        if name in names:
            return name
        last = self.last
        if last is not None:
            c = self._apply(last, name)
            if c is not None and c in names:
                self.hits[last] = self.hits.get(last, 0) + 1
                return c
        for op in self.ops:  # _apply, inlined: most names of a checkpoint no rule maps try every op
            kind, p = op
            if kind == "add":
                c = p + name
            elif name.startswith(p):
                c = name[len(p):]
            else:
                continue
            if c in names:
                self.last = op
                self.hits[op] = self.hits.get(op, 0) + 1
                return c
        return None

    def lookup(self, name: str) -> str | None:
        """What :meth:`resolve` gives for ``name`` now, leaving what it counts unchanged: a scale's name, looked up
        to pair it with the model's, is no evidence of where the checkpoint's weights sit."""
        names = self.names
        if name in names:
            return name
        last = self.last
        for op in (last, *self.ops) if last is not None else self.ops:
            c = self._apply(op, name)
            if c is not None and c in names:
                return c
        return None

    def place(self, name: str) -> str:
        """Where a name with no model tensor would sit in the model's namespace (the most used prefix op)."""
        if not self.hits:
            return name
        op = max(self.hits.items(), key=lambda kv: kv[1])[0]
        return self._apply(op, name) or name


def map_units(units: Iterable[Unit], ruleset: Ruleset, user: Ruleset | None, resolver: Resolver,
         write: bool) -> int:
    """Map units with one ruleset; returns how many land on a model tensor. ``write`` stores the result."""
    hits = 0
    fuse = (user.fuse if user else ()) + ruleset.fuse
    rename = renamer(user, ruleset)
    split_rename = split_renamer(user, ruleset)
    mapper = ruleset.mapper
    resolve = resolver.resolve
    for u in units:
        if write:  # the split kept for the compact tensor list
            template, nums = u.template, u.nums = split_name(u.info.name)
            name = split_rename(u.info.name, template, nums)
        else:
            name = rename(u.info.name)
        via: Fuse | None = None
        split: tuple[str, ...] = ()
        if mapper is not None:
            name, via, others = mapper(name)
            if others:
                split = tuple(resolve(o) or "" for o in others)
        target = resolve(name)
        if target is None:
            via = None
            for f in fuse:
                t = f.target(name)
                if t is not None:
                    target = resolve(t)
                    if target is not None:
                        via = f
                        break
        if target is not None:
            hits += 1
        if write:
            u.mapped, u.target, u.fuse = name, target, via
            u.split = split if target is not None and split and all(split) else ()
    return hits


def _relevant(rs: Ruleset, sample: Sequence[Unit], config: Mapping[str, Any]) -> bool:
    """Whether a ruleset has anything to say about these names (a rename, ignore or explain rule that applies)."""
    rename = renamer(rs)
    for u in sample:
        n = u.name
        if rename(n) != n or (rs.mapper is not None and rs.mapper(n)[0] != n):
            return True
        if any(x.regex.search(n) for x in rs.explain) or any(x.matches(n, config) for x in rs.ignore):
            return True
    return False


def choose_ruleset(units: list[Unit], rules: Rules, record: ModelRecord, resolver: Resolver,
            extra: tuple[Ruleset, ...] = (),
            scorer: Callable[[list[Unit], Ruleset], int | None] | None = None) -> tuple[Ruleset, dict[str, int]]:
    """The ruleset that maps the most of an even sample of the checkpoint's tensors; ties go to a user's ruleset,
    then one made for the config's model_type whose rules apply to these names, then any whose rules apply, then
    file order (the hand-written rulesets, then transformers' own conversions). ``scorer(sample, ruleset)``, when
    given, counts a ruleset's hits as ``map_units`` would, or says None (then ``map_units`` counts them)."""
    config = dict(record.source.config)
    model_type = config.get("model_type")
    sample = units
    if len(sample) > 3000:
        step = len(sample) / 3000
        sample = [sample[int(i * step)] for i in range(3000)]
    scores: dict[str, int] = {}
    tried: list[tuple[int, int, Ruleset]] = []
    for order, rs in enumerate((IDENTITY,) + rules.rulesets + extra):
        if rs.source_kinds and record.source.kind not in rs.source_kinds:
            continue
        hits = scorer(sample, rs) if scorer is not None else None
        if hits is None:
            hits = map_units(sample, rs, rules.user, resolver, write=False)
        scores[rs.name] = hits
        tried.append((hits, order, rs))
    top = max(h for h, _, _ in tried)

    def preference(t: tuple[int, int, Ruleset]) -> tuple[bool, bool, bool, int]:
        relevant = _relevant(t[2], sample, config)  # a ruleset that changes nothing here is identity by another name
        return (t[2].name in rules.user_rulesets, relevant and bool(model_type and model_type in t[2].model_types),
                relevant, -t[1])

    best = max((t for t in tried if t[0] == top), key=preference)
    return best[2], scores

"""Repeated blocks run once: layers and experts identical in structure are answered from one traced instance's
shapes (pure functions of their input shapes), and their records copied with their own paths."""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import operator
from typing import Any, Callable

import torch

from ..records import CallSite, ModelRecord, ModuleRecord
from .attrreads import (HOOKS, SHIM, WHOLE, Reads, held, holds_all, hooked, own_class, same, uneven, unwatch,
                        watch)
from .cachememo import CacheMemo
from .codereads import CodeReads, code_reads
from .layerpaths import Decision, Log, Tracked, holds, is_number, plain, track, used
from .policy import Uncacheable, memo_key, output_spec, rebuild_output
from .tracer import MAX_CALLS, Tracer

Attr = tuple[str, str, Any]  # an attribute a block's forward read: (path below the block, name, value)

FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ModuleRecord))


ALL_FIELDS = operator.attrgetter(*FIELD_NAMES)


CALLS_FIELD = FIELD_NAMES.index("calls")


def weight_uses(modules: list[ModuleRecord], spans: Any) -> list[ModuleRecord]:
    """A module the forward never calls may still be used: its parent's forward reads `self.<name>.weight`
    (DeepSeek's MLA absorbs wkv_b into an einsum over a view of its weight). Such uses become its call sites."""
    index = {m.path: i for i, m in enumerate(modules)}
    for i, m in enumerate(modules):
        if m.called or not m.path or not m.own.parameters:
            continue
        parent = modules[index.get(m.parent or "", 0)]
        fs = parent.forward_span
        if fs is None:
            continue
        absolute = spans.files.get(fs.file)
        if not absolute:
            continue
        needle = f"self.{m.name}."
        sites = []
        for n in range(fs.start, fs.end + 1):
            text = linecache.getline(absolute, n)
            if needle in text:
                sites.append(CallSite(fs.file, n, text.strip()))
        if sites:
            modules[i] = dataclasses.replace(m, call_sites=tuple(sites))
    return modules


# Attributes that number a block: read as tracked numbers, so that two layers (or experts) differing in these are
# answered one from another where their forwards decide the same from them (archviz/shapes/layerpaths.py), where any
# other attribute read must hold the same value (archviz/shapes/attrreads.py).
_INDEX_ATTRS = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "layer_num", "idx", "index",
                          "block_idx", "block_id", "block_index", "expert_idx", "expert_id", "expert_index"})


def _memo_targets(record: ModelRecord) -> list[str]:
    """Modules answered from the memo: every MoE block and its routed experts, and every repeated block -- an
    entry with sub-modules of a ModuleList, ModuleDict or Sequential (the decoder layers)."""
    index = record.index()
    targets: list[str] = []
    for moe in record.summary.moe:
        lst = index.get(moe.path)
        if lst is None:
            continue
        if lst.parent is not None and lst.parent in index and lst.parent != "":
            targets.append(lst.parent)  # the MoE block: gate, experts, shared experts
        if lst.class_name in ("ModuleList", "ModuleDict"):
            targets.extend(lst.children)
        else:
            targets.append(lst.path)  # fused experts
    for m in record.modules:
        if m.class_name in ("ModuleList", "ModuleDict", "Sequential") and len(m.children) > 1:
            targets.extend(c for c in m.children if index[c].children)
    return list(dict.fromkeys(targets))


def _kinds(record: ModelRecord) -> dict[str, int]:
    """{memo target: its kind}. A block's kind, bottom-up: its own classes and tensors and its children's kinds by
    name -- each module's part made once, however many targets nest around it. Attributes are no part of it: what a
    forward reads of them decides whether one block answers for another (archviz/shapes/attrreads.py)."""
    targets = _memo_targets(record)
    # A kind is a number: equal parts (own, and the children's kinds by name) are one number, so a kind compares and
    # hashes at once however deep its block; a module's own part is worked out once for the records it shares with
    # others (the walk shares tensors and attributes between repeated blocks).
    number: dict[tuple, int] = {}
    own_of: dict[tuple, int] = {}
    tree: dict[str, int] = {}
    for m in reversed(record.modules):
        shared = (m.class_module, m.class_name, id(m.tensors))  # the record keeps it alive
        own = own_of.get(shared)
        if own is None:
            own = own_of[shared] = number.setdefault(
                (m.class_module, m.class_name, tuple((t.name, t.shape, t.dtype, t.kind) for t in m.tensors)),
                len(number))
        key = (own, tuple((c.rpartition(".")[2], tree[c]) for c in m.children))
        tree[m.path] = number.setdefault(key, len(number))
    return {t: tree[t] for t in targets}


# Parameters of a block's forward that pass it the layer number (zamba's `layer(h, original, layer_idx, ...)`);
# the bare "idx" / "index" are not among them, being as often a position or a tensor of ids as a layer's number.
_NUMBER_ARGS = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "layer_num", "block_idx",
                          "block_id", "block_index"})
_NUMBERED: dict[type, tuple[frozenset[int], frozenset[str]]] = {}


def _number_arguments(cls: type) -> tuple[frozenset[int], frozenset[str]]:
    """(positions after self, names) of `cls.forward`'s parameters named as a layer number (`_NUMBER_ARGS`: zamba's
    layers take `layer_idx` as an argument): the number a layer is called with is no more part of its kind than the
    one it holds, so two layers alike but for it are answered from one. Empty where the signature is unknown."""
    found = _NUMBERED.get(cls)
    if found is None:
        try:
            params = list(inspect.signature(cls.forward).parameters.values())[1:]  # type: ignore[attr-defined]
        except (TypeError, ValueError, AttributeError):
            params = []
        named = [p for p in params if p.name in _NUMBER_ARGS and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        found = _NUMBERED[cls] = (frozenset(params.index(p) for p in named if p.kind is p.POSITIONAL_OR_KEYWORD),
                                  frozenset(p.name for p in named))
    return found


def unnumbered(module: Any, args: tuple, kwargs: dict | None = None) -> tuple[tuple, dict | None]:
    """A block's call (args, kwargs) as the memo keys it: the layer numbers among them (ints passed to a parameter
    `_number_arguments` names) left out; anything else there is kept. archviz.cost keys its FLOPs runs the same."""
    positions, names = _number_arguments(type(module))
    if positions:
        args = tuple(None if i in positions and is_number(v) else v for i, v in enumerate(args))
    if names and kwargs:
        kwargs = {k: v for k, v in kwargs.items() if not (k in names and is_number(v))}
    return args, kwargs


def _slots(objects: tuple[Any, ...]) -> tuple[dict, ...]:
    """What module-level objects a block's code reads or sets hold (codereads.CodeReads.state), as copies."""
    return tuple(dict(object.__getattribute__(o, "__dict__")) for o in objects)


class BlockMemo:
    """Repeated blocks (decoder layers, MoE blocks, routed experts) are taken as pure functions of their inputs'
    shapes and what the pass knows they hold (a mask's layout, a range of ids): once one has run for given inputs,
    every other of the same kind -- same classes and tensors below it -- answers from the memo where its forward takes
    the same path: every decision the one that ran made from its layer numbers, held or passed, gives the same answer
    on this one's (archviz/shapes/layerpaths.py), and every other attribute it read holds the same value on this
    one (archviz/shapes/attrreads.py). The answer: its outputs made from the recorded shapes,
    its sub-modules' calls, call sites, assumptions and kernels copied from the one that ran (the policy answers
    data-dependent values the same way for both). On a 671B MoE this runs 2 of 61 layers. Installed as an instance
    `forward`, so the module's own hooks still record its call and call site. Tests check that the records are the
    same as without the memo for every model they trace."""

    def __init__(self, tracer: Tracer, record: ModelRecord, like: "BlockMemo | None" = None):
        """`like`: a memo of the same record (the first pass's), whose blocks' kinds this one takes as they are."""
        self.tracer = tracer
        # memo key -> [(the decisions the block's forward made from its layer numbers, the attributes it read,
        # (path, output, cache, (module-level slots its code reads before the run, after it)))]
        self.memo: dict[tuple, list[tuple[tuple[Decision, ...], tuple[Attr, ...], tuple[str, Any, Any, Any]]]] = {}
        self.log = Log()
        self.reads = Reads()
        self._numbered: dict[int, tuple[tuple[str, str], ...]] = {}
        self.installed: list[Any] = []
        self.hits = 0
        self._code: dict[int, CodeReads] = {}  # kind -> what its code reads outside its modules (codereads.py)
        self.unkeyed: dict[str, str] = {}  # blocks run every time, their code reading what no key holds: why
        self.record = record
        if like is not None:
            self.position, self._rels, self.kind = like.position, like._rels, like.kind
        else:
            self.position = {m.path: i for i, m in enumerate(record.modules)}
            self._rels: dict[str, tuple[str, ...]] = {}
            self.kind: dict[str, int] = _kinds(record)
        if like is not None and like.tracer.paths is tracer.paths:  # the same modules under the same paths
            self.by_path = like.by_path
        else:
            self.by_path = {path: tracer.objects_by_id[i] for i, path in tracer.paths.items()}
        by_path = self.by_path
        self.hooked = hooked(by_path.values())  # modules with hooks of their own: a block's are part of its path
        for path in self.kind:
            mod = by_path.get(path)
            if mod is None:
                continue
            if "forward" in mod.__dict__:  # already wrapped (a module under two paths) or patched by its code
                continue
            mod.forward = self._shim(path, mod.forward, CacheMemo(mod))
            self.installed.append(mod)

    def remove(self) -> None:
        for mod in self.installed:
            mod.__dict__.pop("forward", None)
        self.installed.clear()

    def _shim(self, path: str, forward: Callable[..., Any], caches: CacheMemo) -> Callable[..., Any]:
        def memoized(*args: Any, **kwargs: Any) -> Any:
            code = self._code_reads(path)
            if code.opaque:
                self.unkeyed[path] = code.opaque
                return forward(*args, **kwargs)
            try:
                bare, bare_kw = unnumbered(caches.module, args, kwargs)
                # a number the block around passes on (tracked) in another argument is keyed by its value: a use
                bare, bare_kw = tuple(map(used, bare)), {k: used(v) for k, v in (bare_kw or {}).items()}
                # a transformers cache in the kwargs is keyed by the state of the block's own cache layer
                kw, cache = caches.key(bare_kw or {})
                key = (self.kind[path], memo_key(bare), kw, self._contents((bare, bare_kw)))
            except Uncacheable:
                return forward(*args, **kwargs)
            slots = _slots(code.state)  # module-level slots the code reads: what they hold now
            for decisions, attrs, hit in self.memo.get(key, ()):
                if (not decisions or holds(decisions, lambda slot: self._number(path, slot, args, kwargs))) and \
                        (not attrs or holds_all(attrs, lambda rel: self.by_path.get(path + rel))) and \
                        (not slots or same(hit[3][0], slots)):
                    if self.log.running:  # the block around this one decided what this one's did
                        self.log.decisions.extend(((path + s[1], s[2]), o, t, a) for s, o, t, a in decisions
                                                  if s[0] == "attr")
                    if self.reads.running:  # and read what this one's read
                        self.reads.reads.extend((self.by_path.get(path + rel), name, value)
                                                for rel, name, value in attrs)
                    if cache is not None:
                        caches.apply(cache, hit[2])
                    for obj, held_after in zip(code.state, hit[3][1] if slots else ()):
                        object.__getattribute__(obj, "__dict__").update(held_after)  # what the run set in them
                    self._copy(hit[0], path)
                    self.hits += 1
                    return rebuild_output(hit[1])
            before = caches.snapshot(cache) if cache is not None else None
            out, decisions, attrs = self._tracked(path, caches.module, forward, (args, kwargs), code.indexed)
            spec = output_spec(out)
            after = caches.effect(cache, before) if cache is not None else None
            if spec is not None and (cache is None or after is not None):
                self.memo.setdefault(key, []).append((decisions, attrs, (path, spec, after,
                                                                          (slots, _slots(code.state)))))
            return out

        setattr(memoized, SHIM, True)
        return memoized

    def _contents(self, obj: Any, depth: int = 0) -> tuple:
        """What the pass knows the tensors among a call's inputs hold beyond their shapes, in order: the policy's
        provenance (a range of ids, a density, a value) and the observer's tag (a mask's layout); () where nothing."""
        if isinstance(obj, torch.Tensor):
            prov, tag = self.tracer.policy.get(obj), self.tracer.tensor_tag
            known = (prov.range, prov.density, prov.value, prov.k) if prov is not None else None
            seen = tag(obj) if tag is not None else None
            return ((known, seen),) if known is not None or seen is not None else ()
        if depth < 4 and isinstance(obj, (tuple, list)):
            return tuple(c for x in obj for c in self._contents(x, depth + 1))
        if depth < 4 and isinstance(obj, dict):
            return tuple(c for x in obj.values() for c in self._contents(x, depth + 1))
        return ()

    def _numbers(self, path: str) -> tuple[tuple[str, str], ...]:
        """(path below `path`, attribute) of the layer numbers its modules hold, the same for every block of its
        kind."""
        kind = self.kind[path]
        found = self._numbered.get(kind)
        if found is None:
            modules, position = self.record.modules, self.position
            found = self._numbered[kind] = tuple(
                (rel, k) for rel in ("", *self.rels(path)) for k, v in modules[position[path + rel]].attributes
                if k in _INDEX_ATTRS and is_number(v))
        return found

    def _code_reads(self, path: str) -> CodeReads:
        """What the code of the block's classes reads outside its modules, once per kind."""
        kind = self.kind[path]
        found = self._code.get(kind)
        if found is None:
            modules = (self.by_path.get(path + rel) for rel in ("", *self.rels(path)))
            found = self._code[kind] = code_reads(own_class(m) for m in modules if m is not None)
        return found

    def _tracked(self, path: str, module: Any, forward: Callable[..., Any], call: tuple[tuple, dict],
                 indexed: tuple[Any, ...]) -> tuple[Any, tuple[Decision, ...], tuple[Attr, ...]]:
        """The block's forward run with its layer numbers tracked and its modules' attributes watched: (its output,
        the decisions it made from the numbers, slots relative to the block: ("attr", path below it, name) or ("arg",
        position or name); the attributes it read, (path below it, name, value first read)). `indexed`: the
        module-level lists its code subscripts (codereads.py)."""
        log, by_path, reads = self.log, self.by_path, self.reads
        args, kwargs = call
        positions, names = _number_arguments(type(module))
        own_args = object()  # this call's own arguments, apart from the calls below it
        args = tuple(track(v, (own_args, i), log) if i in positions and is_number(v) else v for i, v in enumerate(args))
        kwargs = {k: track(v, (own_args, k), log) if k in names and is_number(v) else v for k, v in kwargs.items()}
        held_numbers = []
        for rel, name in self._numbers(path):
            mod = by_path.get(path + rel)
            value = getattr(mod, "__dict__", {}).get(name)
            if is_number(value) and not hasattr(value, "_paths"):
                mod.__dict__[name] = tracked = track(value, (path + rel, name), log)
                held_numbers.append((mod, name, value, tracked))
        where = {id(m): rel for rel in ("", *self.rels(path)) if (m := by_path.get(path + rel)) is not None}
        modules = [by_path[path + rel] for rel in where.values()]
        swapped, whole = watch(modules, reads)
        start, first, mark = len(log.decisions), len(reads.reads), len(reads.followed)
        reads.reads.extend((m, WHOLE, held(m, WHOLE)) for m in whole)
        log.running += 1
        reads.running += 1
        try:
            out = forward(*args, **kwargs)
            self._indexed(args, kwargs, first, indexed)
        finally:
            log.running -= 1
            reads.running -= 1
            unwatch(swapped)
            reads.unfollow(mark)
            for mod, name, value, tracked in held_numbers:
                if mod.__dict__.get(name) is tracked:
                    mod.__dict__[name] = value
        own, prefix = [], path + "."
        for (slot, what), ops, test, answer in log.decisions[start:]:
            if slot is own_args:
                own.append((("arg", what), ops, test, answer))
            elif isinstance(slot, str) and (slot == path or slot.startswith(prefix)):
                own.append((("attr", slot[len(path):], what), ops, test, answer))
        if not log.running:
            log.decisions.clear()
        return out, tuple(dict.fromkeys(own)), self._attrs(where, first, modules if self.hooked else [])

    def _indexed(self, args: tuple, kwargs: dict, first: int, indexed: tuple[Any, ...]) -> None:
        """A layer number used where no Python method sees it (indexing a list: `self.windows[self.layer_id]`)
        leaves no decision: where the forward read a number and fetched a list or tuple whose items differ (from a
        module of the block or from an object one holds, a config, followed: attrreads.Reads; or a module-level one
        its code subscripts, `indexed`), each number it read is taken as decided by its value."""
        reads = self.reads.reads[first:]
        numbers = [v for _, _, v in reads if isinstance(v, Tracked)]
        numbers += [v for v in (*args, *kwargs.values()) if isinstance(v, Tracked)]
        seen = self.reads.seen  # objects followed: the lists fetched from them are among the reads
        if numbers and (any(uneven(v) for v in indexed) or
                        any(uneven(v, int(id(v) in seen)) for _, _, v in reads if not isinstance(v, Tracked))):
            for number in numbers:
                used(number)

    def _attrs(self, where: dict[int, str], first: int, hooks_of: list[Any]) -> tuple[Attr, ...]:
        """The attributes read since `first` by the modules `where` names, as (path below the block, name, value
        first read): the layer numbers (tracked) and the memo's own forwards aside; and the hooks of `hooks_of`
        below the block (its own run around the memo's answer)."""
        reads = self.reads
        out: dict[tuple[str, str], Any] = {}
        for mod, name, value in reads.reads[first:]:
            rel = where.get(id(mod))
            if rel is None or isinstance(value, Tracked) or getattr(value, SHIM, False):
                continue
            if (rel, name) not in out:
                out[(rel, name)] = held(mod, WHOLE) if name == WHOLE else value
        for mod in hooks_of:
            rel = where[id(mod)]
            if rel:
                out.update({(rel, h): held(mod, h) for h in HOOKS})
        if not reads.running:
            reads.reads.clear()
        return tuple((rel, name, value) for (rel, name), value in out.items())

    def _number(self, path: str, slot: tuple, args: tuple, kwargs: dict) -> Any:
        """The number `slot` reads for the block at `path` called with (args, kwargs); None where there is none."""
        if slot[0] == "arg":
            where = slot[1]
            value = (args[where] if where < len(args) else None) if isinstance(where, int) else kwargs.get(where)
        else:
            value = getattr(self.by_path.get(path + slot[1]), "__dict__", {}).get(slot[2])
        return plain(value) if is_number(value) else None

    def rels(self, target: str) -> tuple[str, ...]:
        """Paths below `target`, relative to it (".attn", ".attn.wq", ...)."""
        rels = self._rels.get(target)
        if rels is None:
            modules = self.record.modules
            prefix = target + "."
            out = []
            for i in range(self.position[target] + 1, len(modules)):
                path = modules[i].path
                if not path.startswith(prefix):
                    break
                out.append(path[len(target):])
            rels = self._rels[target] = tuple(out)
        return rels

    def _copy(self, source: str, target: str) -> None:
        t = self.tracer
        if t.copied is not None:  # the tracer takes the copy as said, not made (the second pass: see evidence.py)
            t.copied[target] = source
            return
        flows = t.flows
        for rel in self.rels(target):
            src = source + rel
            dst = target + rel
            if src in t.calls:
                lst = t.calls.setdefault(dst, [])
                for entry in t.calls[src]:
                    if entry not in lst and len(lst) < MAX_CALLS:
                        lst.append(entry)
                t.fired += 1
            for table in (t.sites, t.assumptions, t.kernels) if t.record_sites else ():
                if src in table:
                    table.setdefault(dst, {}).update(table[src])
            if src in flows:
                flows.setdefault(dst, flows[src])
        if source in flows:  # flows name children relative to their module: shared as they are
            flows.setdefault(target, flows[source])
        for table in (t.assumptions, t.kernels) if t.record_sites else ():  # what the block's own forward noted
            if source in table:                                                   # (its hooks record the rest)
                table.setdefault(target, {}).update(table[source])
        if t.on_memo is not None:
            t.on_memo(source, target)


assert FIELD_NAMES[CALLS_FIELD:CALLS_FIELD + 5] == ("calls", "call_sites", "called", "assumptions", "kernels")

"""Grouping: fold a model's ~60,000 modules into the few dozen kinds they come in, each with how many there are.

A pure function of records (no torch). `group(record)` returns `record.with_extra("grouping", G)`:

1. Every module gets a structural signature: class, own tensors (name, kind, shape, dtype, counted elements), the
   scalar attributes that change what it does, the kernels it calls, and its children's signatures (computed bottom-up
   in one reverse pre-order pass, interned to small ids). Attributes that merely number a module (`layer_id`,
   `layer_idx`, ... or any int equal to the item's index plus a constant) are left out. Equal signatures: same kind.
2. The numbered children of a list (layers, experts) are split into runs of one kind; repeating patterns of runs are
   found (the longest tandem repeat first, then recursively left and right) and become group nodes ("2 groups of 6
   layers"). Runs and groups are named by the attributes that distinguish their kinds ("5 reusing layers"); a names
   mapping (`load_names`, `names=`) overrides any title, and its `[groups]` gather named children of a module
   under one virtual node ("Grouped output" over `wo_a`, `wo_b`).
3. Every node carries its per-instance count, its multiplicity path (`× 2 groups × 5 layers`) and its total; totals
   add up exactly: a node's children plus its own tensors make its total, and the root's make the model's.

G's layout is documented in `group`'s docstring.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Iterable

from ..errors import ArchvizError
from ..records import ModelRecord, ModuleRecord
from .kinds import Kinds
from .names import Gatherings, Titles, load_names
from .runs import decompose, rle
from .titles import Features, nouns, phrase

NAMES_ENV = "ARCHVIZ_NAMES"  # a names file applied when `group` is called without `names`

_CONTAINERS = frozenset(("ModuleList", "Sequential", "ModuleDict"))
_SEP = " › "


# ---------------------------------------------------------------------------------------------------------------------
# The grouped tree


class _Builder:
    def __init__(self, record: ModelRecord, kinds: Kinds, groups: Gatherings | None = None):
        self.record = record
        self.groups = groups
        self.index = record.index()
        self.kinds = kinds
        self.kid = kinds.kid
        self.features = Features(self.index, kinds)
        self.nodes: list[dict] = []
        self.modules_of: dict[str, ModuleRecord | None] = {}  # node id -> representative module (None: virtual)
        self.by_path: dict[str, dict] = {}
        self.entries: list[tuple[dict, str]] = []  # (by_path entry, node id) to fill "group" later
        self.chain: dict[str, list[str]] = {}  # node id -> ids of the fold nodes (list runs, groups) down to it
        self.layers: dict | None = None
        try:
            from .layers import main_layer_list

            self.main_list = main_layer_list(record).path
        except ArchvizError:
            self.main_list = None

    # -- nodes ----------------------------------------------------------------------------------------------------

    def _node(self, parent: dict | None, *, title: str, kind: str, class_name: str, representative: str,
              paths: list[str], count: int, factor_name: str | None, per_instance: int, own: int, scales: int,
              buffers: int, fold: bool, module: ModuleRecord | None, extra: dict | None = None) -> dict:
        mult = list(parent["multiplicity"]) if parent else []
        if count > 1:
            mult.append({"factor": count, "name": factor_name or "instances"})
        prod = 1
        for f in mult:
            prod *= f["factor"]
        nid = f"n{len(self.nodes)}"
        node = {
            "id": nid, "parent": parent["id"] if parent else None, "children": [], "title": title, "kind": kind,
            "class_name": class_name, "representative": representative, "paths": paths, "count": count,
            "multiplicity": mult, "per_instance": per_instance, "total": per_instance * prod,
            "own_total": own * prod, "scale_elements_total": scales * prod, "buffer_elements_total": buffers * prod,
            "breadcrumb": [],
        }
        if extra:
            node.update(extra)
        self.nodes.append(node)
        self.modules_of[nid] = module
        chain = list(self.chain[parent["id"]]) if parent else []
        if fold:
            chain.append(nid)
        self.chain[nid] = chain
        if parent is not None:
            parent["children"].append(nid)
        return node

    def _entry(self, node: dict, paths: Iterable[str], total: int | None = None,
               multiplicity: list | None = None) -> None:
        e = {"node": node["id"], "multiplicity": node["multiplicity"] if multiplicity is None else multiplicity,
             "total": node["total"] if total is None else total, "group": None}
        self.entries.append((e, node["id"]))
        for p in paths:
            self.by_path[p] = e

    def module_node(self, parent: dict | None, m: ModuleRecord, paths: list[str], count: int,
                    factor_name: str | None, title: str, fold: bool = False, extra: dict | None = None) -> dict:
        t = m.totals
        node = self._node(parent, title=title, kind=self.kinds.hash(self.kid[m.path]), class_name=m.class_name,
                          representative=m.path, paths=paths, count=count, factor_name=factor_name,
                          per_instance=t.parameters, own=m.own.parameters, scales=t.scale_elements,
                          buffers=t.buffer_elements, fold=fold, module=m, extra=extra)
        self._entry(node, paths)
        self.expand(node, m, paths)
        return node

    def expand(self, node: dict, m: ModuleRecord, paths: list[str]) -> None:
        cut = len(m.path) + 1 if m.path else 0
        siblings = [c[cut:] for c in m.children]
        gathers = self.groups.match(node, m) if self.groups and siblings else None
        if not gathers:
            for c, name in zip(m.children, siblings):
                self.child(node, c, name, paths, siblings)
            return
        # [groups]: named children move, in the order given, under one virtual node where the first of them stood
        where: dict[str, int] = {}
        plan: list[tuple[str, list[str]]] = []
        have = set(siblings)
        for title, members in gathers:
            present = [x for x in members if x in have and x not in where]
            if present:
                for x in present:
                    where[x] = len(plan)
                plan.append((title, present))
        done: set[int] = set()
        for c, name in zip(m.children, siblings):
            gi = where.get(name)
            if gi is None:
                self.child(node, c, name, paths, siblings)
            elif gi not in done:
                done.add(gi)
                self.gather(node, m, paths, siblings, *plan[gi])

    def child(self, node: dict, c: str, name: str, paths: list[str], siblings: list[str]) -> None:
        cm = self.index[c]
        cpaths = [f"{p}.{name}" if p else name for p in paths]
        ccut = len(c) + 1
        if cm.children and all(x[ccut:].isdigit() for x in cm.children):
            self.list_node(node, cm, name, cpaths, siblings)
        else:
            self.module_node(node, cm, cpaths, 1, None, f"{name} ({cm.class_name})")

    def gather(self, node: dict, m: ModuleRecord, paths: list[str], siblings: list[str], title: str,
               members: list[str]) -> None:
        """A virtual node titled `title` over the children `members` of the module node (each of its instances)."""
        mods = [self.index[f"{m.path}.{x}" if m.path else x] for x in members]
        kind = "gather:" + hashlib.blake2b(repr((title, [(x, self.kinds.hash(self.kid[cm.path]))
                                                         for x, cm in zip(members, mods)])).encode(),
                                           digest_size=8).hexdigest()
        vnode = self._node(node, title=title, kind=kind, class_name="", representative=m.path,
                           paths=[f"{p}.{x}" if p else x for x in members for p in paths], count=1,
                           factor_name=None, per_instance=sum(cm.totals.parameters for cm in mods), own=0,
                           scales=sum(cm.totals.scale_elements for cm in mods),
                           buffers=sum(cm.totals.buffer_elements for cm in mods), fold=True, module=None,
                           extra={"virtual": True, "segment": "gather", "period": len(members), "items": members})
        for x, cm in zip(members, mods):
            self.child(vnode, cm.path, x, paths, siblings)

    # -- lists ------------------------------------------------------------------------------------------------------

    def list_node(self, parent: dict, lst: ModuleRecord, name: str, lpaths: list[str], siblings: list[str]) -> None:
        items = list(lst.children)
        cut = len(lst.path) + 1 if lst.path else 0
        item_names = [c[cut:] for c in items]
        kinds = [self.kid[c] for c in items]
        tokens = rle(kinds)
        rep_of: dict[int, str] = {}
        for c, k in zip(items, kinds):
            rep_of.setdefault(k, c)
        group = tuple(sorted(rep_of))
        sing, plural = nouns(name, siblings)
        is_main = lst.path == self.main_list
        classes = [self.index[rep_of[k]].class_name for k in group]
        by_class = not is_main and len(set(classes)) > 1
        ctx = {"items": items, "names": item_names, "kinds": kinds, "rep_of": rep_of, "sing": sing,
               "plural": plural, "group": group, "main": is_main, "by_class": by_class}
        segs = decompose(tokens, 0, len(tokens))
        elide = len(tokens) == 1 and lst.class_name in _CONTAINERS and not lst.tensors
        if elide:
            run_nodes = self.emit(parent, segs, [(p, 0) for p in lpaths], ctx, top=True)
            # The list module itself: the run node stands for it, with the list's own count.
            prod = 1
            for f in parent["multiplicity"]:
                prod *= f["factor"]
            self._entry(run_nodes[0], lpaths, total=lst.totals.parameters * prod, multiplicity=parent["multiplicity"])
            holder = parent
        else:
            t = lst.totals
            holder = self._node(parent, title=f"{len(items)} {plural}", kind=self.kinds.hash(self.kid[lst.path]),
                                class_name=lst.class_name, representative=lst.path, paths=lpaths, count=1,
                                factor_name=None, per_instance=t.parameters, own=lst.own.parameters,
                                scales=t.scale_elements, buffers=t.buffer_elements, fold=False, module=lst)
            self._entry(holder, lpaths)
            run_nodes = self.emit(holder, segs, [(p, 0) for p in lpaths], ctx, top=True)
        if is_main and self.layers is None:
            self.layers = self._layers_info(lst, ctx, segs, run_nodes, run_nodes[0] if elide else holder)

    def emit(self, parent: dict, segs: list[tuple], bases: list[tuple[str, int]], ctx: dict,
             top: bool) -> list[dict]:
        out = []
        names = ctx["names"]
        for seg in segs:
            if seg[0] == "run":
                k, start, count = seg[1]
                paths = [f"{lp}.{names[off + start + j]}" if lp else names[off + start + j]
                         for lp, off in bases for j in range(count)]
                rep = self.index[ctx["items"][start]]
                if len(ctx["group"]) > 1:
                    pre, post = self.features.words(ctx["rep_of"], k, ctx["group"] if top else ctx["unit_group"])
                else:
                    pre, post = [], []
                if count > 1:
                    title = phrase(count, pre, ctx["plural"], post)
                elif top:
                    title = phrase(None, pre, ctx["sing"], post, names[start])
                else:
                    title = phrase(None, pre, ctx["sing"], post)
                if top and count == 1 and not pre and not post and ctx["sing"][:1].islower():
                    title = f"{ctx['sing']} {names[start]} ({rep.class_name})"
                if ctx["by_class"]:  # a stack of different modules (Sequential(conv, act, ...)): say the class
                    title = f"{names[start]} ({rep.class_name})" if count == 1 else \
                        f"{names[start]}–{names[start + count - 1]} ({count} × {rep.class_name})"
                extra = {"segment": "run", "items": [names[start + j] for j in range(count)]}
                out.append(self.module_node(parent, rep, paths, count, ctx["plural"].split()[-1], title, fold=True,
                                            extra=extra))
            else:
                _, unit, r, unit_items, first, _ntok = seg
                new_bases = [(lp, off + rho * unit_items) for lp, off in bases for rho in range(r)]
                unit_kinds = tuple(sorted({ctx["kinds"][i] for i in range(first, first + unit_items)}))
                paths = [f"{lp}.{names[off + first + j]}" if lp else names[off + first + j]
                         for lp, off in new_bases for j in range(unit_items)]
                params = scales = buffers = 0
                for j in range(unit_items):
                    t = self.index[ctx["items"][first + j]].totals
                    params += t.parameters
                    scales += t.scale_elements
                    buffers += t.buffer_elements
                kind = "group:" + hashlib.blake2b(
                    repr([self.kinds.hash(ctx["kinds"][first + j]) for j in range(unit_items)]).encode(),
                    digest_size=8).hexdigest()
                title = f"{r} groups of {unit_items} {ctx['plural'].split()[-1]}"
                node = self._node(parent, title=title, kind=kind, class_name="", representative=paths[0],
                                  paths=paths, count=r, factor_name="groups", per_instance=params, own=0,
                                  scales=scales, buffers=buffers, fold=True, module=None,
                                  extra={"virtual": True, "segment": "group", "period": unit_items, "repeats": r,
                                         "items": [names[first + j] for j in range(unit_items)]})
                sub = dict(ctx, unit_group=unit_kinds)
                self.emit(node, unit, new_bases, sub, top=False)
                out.append(node)
        return out

    def _layers_info(self, lst: ModuleRecord, ctx: dict, segs: list[tuple], top_nodes: list[dict],
                     node: dict) -> dict:
        names = ctx["names"]
        kinds_out = []
        kind_name: dict[int, str] = {}
        order: list[int] = []
        for k in ctx["kinds"]:
            if k not in kind_name:
                kind_name[k] = ""
                order.append(k)
        for k in order:
            if len(ctx["group"]) > 1:
                pre, post = self.features.words(ctx["rep_of"], k, ctx["group"])
            else:
                pre, post = [], []
            kind_name[k] = phrase(None, pre, ctx["sing"], post)
            kinds_out.append({"name": kind_name[k], "class_name": self.index[ctx["rep_of"][k]].class_name,
                              "layers": [_num(names[i]) for i, kk in enumerate(ctx["kinds"]) if kk == k],
                              "signature": self.kinds.hash(k),
                              "parameters": self.index[ctx["rep_of"][k]].totals.parameters})
        runs = []
        for seg, node in zip(segs, top_nodes):
            if seg[0] == "run":
                k, start, count = seg[1]
                runs.append({"node": node["id"], "title": node["title"], "first": _num(names[start]),
                             "last": _num(names[start + count - 1]), "repeats": count, "period": 1,
                             "unit": [{"kind": kind_name[k], "count": count}]})
            else:
                _, unit, r, unit_items, first, _ntok = seg
                toks = rle(ctx["kinds"][first:first + unit_items])
                runs.append({"node": node["id"], "title": node["title"], "first": _num(names[first]),
                             "last": _num(names[first + r * unit_items - 1]), "repeats": r, "period": unit_items,
                             "unit": [{"kind": kind_name[k], "count": c} for k, _, c in toks]})
        return {"path": lst.path, "count": len(ctx["items"]), "node": node["id"], "kinds": kinds_out, "pattern": "",
                "runs": runs}

    # -- finishing ---------------------------------------------------------------------------------------------------

    def finish(self, names: Titles) -> None:
        nodes = self.nodes
        by_id = {n["id"]: n for n in nodes}
        if names:
            exact = bool(names.exact_paths)
            for n in nodes[1:]:
                hit = names.title_for(n, self.modules_of[n["id"]], n["title"], exact)
                if hit is not None:
                    n["title"] = hit
            if self.layers:
                for k in self.layers["kinds"]:
                    k["name"] = names.titles.get(k["name"], k["name"])
        for n in nodes:
            parent = by_id.get(n["parent"]) if n["parent"] else None
            n["breadcrumb"] = (parent["breadcrumb"] + [n["title"]]) if parent is not None else []
        for e, nid in self.entries:
            chain = self.chain[nid]
            e["group"] = _SEP.join(by_id[c]["title"] for c in chain) if chain else None
        if self.layers:
            rename = names.titles if names else {}
            parts = []
            for r in self.layers["runs"]:
                r["title"] = by_id[r["node"]]["title"]
                for u in r["unit"]:
                    u["kind"] = rename.get(u["kind"], u["kind"])
                if r["period"] == 1:
                    parts.append(r["title"])
                else:
                    inner = ", ".join(f"{u['count']} × {u['kind']}" if u["count"] > 1 else u["kind"]
                                      for u in r["unit"])
                    parts.append(f"{r['repeats']} × ({inner})")
            text = parts[0] if parts else ""
            if len(parts) > 1:
                text = ", ".join(parts[:-1]) + ", then " + parts[-1]
            self.layers["pattern"] = text


def _num(name: str) -> int | str:
    return int(name) if name.isdigit() else name


def group(record: ModelRecord, names: dict[str, Any] | None = None) -> ModelRecord:
    """Fold the record's modules into kinds and counts; returns `record.with_extra("grouping", G)`.

    G = {"nodes": [...], "by_path": {...}, "layers": {...} | None}:
    - nodes, pre-order, nodes[0] the model: id, parent, children, title, kind (signature hash; "group:…" for a
      repeating group, "gather:…" for a names-file gathering), class_name ("" for both), representative (one module
      path standing for all), paths (every module path the node stands for), count (instances folded at this
      level), multiplicity (factors > 1 from the root down: [{"factor": 2, "name": "groups"}, {"factor": 5,
      "name": "layers"}]), per_instance (parameters of one instance), total (per_instance × the factors), own_total
      (own tensors' parameters × the factors), scale_elements_total, buffer_elements_total, breadcrumb (titles below
      the root down to the node); list runs and groups also carry segment ("run" | "group") and items (item names
      of one instance), groups virtual, period and repeats. A gathering (`[groups]` in the names file) is a virtual
      node with segment "gather", items (the gathered children's attribute names), period (how many), the
      parent's multiplicity, per_instance the sum of its children's, representative the parent module's path and
      paths every gathered module's path (each child's paths in turn); it owns nothing and no by_path entry points
      at it.
    - by_path: module path -> {"node", "multiplicity", "total", "group"}; group is the chain of list runs,
      repeating groups and gatherings above the module ("2 groups of 6 layers › 5 reusing layers"), or None.
    - layers: the main layer list: path, count, node, kinds [{name, class_name, layers, signature, parameters}],
      pattern (one line a person reads), runs [{node, title, first, last, repeats, period, unit}].

    `names` maps keys to titles, and "groups" to gatherings (see `load_names`); without it, the file named by
    $ARCHVIZ_NAMES applies."""
    if names is None:
        env = os.environ.get(NAMES_ENV)
        if env:
            names = load_names(env)
    kinds = Kinds(record)
    b = _Builder(record, kinds, Gatherings(names))
    root = record.modules[0]
    b.module_node(None, root, [root.path], 1, None, record.source.name or root.class_name)
    described = Titles(names.get("descriptions") if isinstance((names or {}).get("descriptions"), dict) else None)
    for n in b.nodes if described else ():  # keyed as titles are; a kind by its default title, before renaming
        hit = described.title_for(n, b.modules_of[n["id"]], n["title"], bool(described.exact_paths))
        if hit is not None:
            n["description"] = hit
    b.finish(Titles(names))
    g = {"nodes": b.nodes, "by_path": b.by_path, "layers": b.layers}
    if isinstance((names or {}).get("dims"), dict):
        g["dims"] = dict(names["dims"])  # read by archviz.render.dims.dim_renames
    return record.with_extra("grouping", g)


def grouping(record: ModelRecord) -> dict:
    """The record's grouping, computing it if the record has none."""
    g = record.extra("grouping")
    if g is None:
        g = group(record).extra("grouping")
    return g


def multiplicity_text(multiplicity: list[dict]) -> str:
    """[{2, groups}, {5, layers}] -> '× 2 groups × 5 layers'."""
    return " ".join(f"× {f['factor']:,} {f['name']}" for f in multiplicity)


def layer_membership(record: ModelRecord, path: str) -> str | None:
    """'layer 3 belongs to 2 groups of 6 layers › 5 reusing layers (kind reusing compress-ratio-2 layer)' for an item
    of the main layer list; None for any other path."""
    g = grouping(record)
    layers = g.get("layers")
    if not layers or not path:
        return None
    lp = layers["path"]
    prefix = f"{lp}." if lp else ""
    if not path.startswith(prefix) or not path[len(prefix):].isdigit():
        return None
    n = _num(path[len(prefix):])
    entry = g["by_path"].get(path)
    kind = next((k["name"] for k in layers["kinds"] if n in k["layers"]), None)
    where = entry.get("group") if entry else None
    count = len({i for k in layers["kinds"] for i in k["layers"]})
    text = f"layer {n} is the model's only layer" if count == 1 else f"layer {n} belongs to {where or 'the layer list'}"
    if kind:
        text += f" (kind {kind})"
    return text


__all__ = ["group", "grouping", "load_names", "layer_membership", "multiplicity_text", "NAMES_ENV"]

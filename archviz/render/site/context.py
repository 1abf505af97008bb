"""The page contexts of one model: `ModelSite` turns a record into the data each template renders (overview
and one node page per node); it reads no template and writes nothing."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Mapping

from ... import format as fmt
from ..dims import DimNames, width_names
from ...errors import ArchvizError, option
from ...records import (
    ALIAS,
    BIAS,
    BUFFER,
    SCALE,
    TABLE,
    WEIGHT,
    CallSite,
    ModelRecord,
    ModuleRecord,
    SourceSpan,
)
from ..views import tied_text
from ...cost.provenance import built_dtype_said, config_said
from .checkpoint_index import CheckpointIndex, checkpoint_text, search_names
from .code import CodeBank
from .dataflow import flow_picture
from .cost import SiteCost
from .describe import DTYPE_BYTES, calc_text, component_text, describe, linear_dims, logical_shape, main_weight
from .nodes import CONTAINERS, Node, build_nodes, instances, mult_text, page_names
from .treemap import treemap
from .upstream import Upstream

_REPORT_ROWS = 40  # rows per table of the overview's checkpoint report; `archviz check`'s JSON lists them all


def _owner(index: Mapping[str, ModuleRecord], path: str) -> tuple[ModuleRecord | None, str]:
    """The nearest ancestor that is not a container, and the attribute name it builds `path` under."""
    segs = path.split(".")
    i = len(segs) - 1
    while i > 0:
        anc = ".".join(segs[:i])
        m = index.get(anc)
        if m is not None and m.class_name not in CONTAINERS:
            return m, segs[i]
        i -= 1
    top = index.get("")
    return (top, segs[0]) if top is not None and path else (None, "")


class ModelSite:
    def __init__(self, record: ModelRecord, slug: str, code: CodeBank, source_url: str | None,
                 annotations: Mapping[str, Any] | None):
        self.record = record
        self.slug = slug
        self.code = code
        code.vouch(record)
        self.index = record.index()
        self.files = dict(record.source.files)  # display path -> absolute path
        self.nodes, self.root = build_nodes(record)
        page_names(self.nodes, self.root)
        # module path -> the most specific node holding it: a layer of a periodic group is in the group's node and
        # in its kind's node below it; the kind's node is the one that describes the layer.
        self.node_of: dict[str, str] = {}
        for nid, n in self.nodes.items():
            for p in n.paths:
                held = self.node_of.get(p)
                if held is None or self.nodes[held].depth < n.depth:
                    self.node_of[p] = nid
        self.names = DimNames.for_record(record, candidates=True)  # config fields, renamed by the names file's [dims]
        self.kids: dict[str | None, list[ModuleRecord]] = {}
        for x in record.modules:
            self.kids.setdefault(x.parent, []).append(x)
        self.upstream = Upstream(record, source_url)
        ck = record.extra("checkpoint")
        self.checkpoint = ck if isinstance(ck, Mapping) else None
        self.ck_index = CheckpointIndex(self.checkpoint) if self.checkpoint else None
        probe = record.extra("probe")
        self.probe = (probe.get("modules") or {}) if isinstance(probe, Mapping) else {}
        ranks = record.extra("ranks")
        self.ranks = (ranks.get("modules") or {}) if isinstance(ranks, Mapping) else {}
        self.annotations = annotations or {}
        self.cost = SiteCost(record)  # FLOPs and KV figures where the records carry the cost extra

    # --- pieces

    def widths(self, m: ModuleRecord) -> dict[int, str]:
        """The width names of `m`'s page: its own, then those its children and siblings agree on."""
        siblings = self.kids.get(m.parent, ()) if m.parent is not None else ()
        return width_names(m, [x for x in (*self.kids.get(m.path, ()), *siblings) if x is not m])

    def excerpt(self, title: str, span: SourceSpan | tuple[str, int, int], marks: Mapping[int, str] | None = None,
                absolute: str | None = None) -> dict[str, Any] | None:
        display, start, end = (span.file, span.start, span.end) if isinstance(span, SourceSpan) else span
        absolute = absolute or self.files.get(display)
        key = self.code.key(absolute, display)
        if key is None:
            return None
        link = self.upstream.link(display, start, end)
        return {"title": title, "file": display, "start": start, "end": end, "key": key,
                "marks": " ".join(str(k) for k in sorted(marks or {})), "mark_list": sorted((marks or {}).items()),
                "url": link[0] if link else None, "rev": link[1] if link else None,
                "repo": self.upstream.repository(link[0]) if link else ""}

    def _find_line(self, span: SourceSpan, needle: re.Pattern[str]) -> int | None:
        absolute = self.files.get(span.file)
        key = self.code.key(absolute, span.file)
        if key is None:
            return None
        lines = self.code._files[key]["lines"]
        for i in range(span.start, min(span.end, len(lines)) + 1):
            if needle.search(lines[i - 1]):
                return i
        return None

    def static_call_sites(self, m: ModuleRecord) -> list[dict[str, Any]]:
        """Without a traced forward pass: the lines of the owner's forward that call `self.<name>(`."""
        owner, attr = _owner(self.index, m.path) if m.path else (None, "")
        if owner is None or owner.forward_span is None or attr.isdigit():
            return []
        span = owner.forward_span
        absolute = self.files.get(span.file)
        lines = self.code.lines(absolute) if absolute else None
        if not lines:
            return []
        rx = re.compile(rf"self\.{re.escape(attr)}\(")
        out = []
        for i in range(span.start, min(span.end, len(lines)) + 1):
            hit = rx.search(lines[i - 1])
            if hit:
                out.append({"code": lines[i - 1][hit.start():].strip(), "line": i, "file": span.file,
                            "traced": False})
        return out[:4]

    def gathered(self, n: Node, m: ModuleRecord) -> list[ModuleRecord]:
        """The members of a virtual node gathering some of `m`'s children under one title (a names file's
        [groups]: "Grouped output" over wo_a and wo_b), in order; [] for any other node."""
        if not n.virtual:
            return []
        members = [self.index.get(self.nodes[c].representative) for c in n.children]
        if not members or any(x is None or x.parent != m.path for x in members):
            return []
        return [x for x in members if x is not None]

    def gathered_excerpts(self, m: ModuleRecord, members: list[ModuleRecord]) -> list[dict[str, Any]]:
        """Where the members are built (the lines of `m`'s __init__ assigning them) and used (their call sites and
        the lines of `m`'s forward naming them): the code of `m`, the module that holds them."""
        out: list[dict[str, Any]] = []
        names = [x.name for x in members]
        words = ", ".join(names)
        init, fwd = m.init_span, m.forward_span
        if init is not None:
            start = init.start
            cs = m.class_span
            if cs is not None and cs.file == init.file and cs.start <= init.start <= cs.end:
                start = cs.start
            built = [self._find_line(init, re.compile(rf"self\.{re.escape(a)}\s*(?::[^=]*)?=(?!=)")) for a in names]
            ex = self.excerpt(f"{m.class_name}.__init__ — where {words} are built", (init.file, start, init.end),
                              {b: "built" for b in built if b})
            if ex:
                out.append(ex)
        if fwd is not None:
            marks: dict[int, str] = {}
            for x in members:
                sites = list(x.call_sites) or [CallSite(s["file"], s["line"], s["code"])
                                               for s in self.static_call_sites(x)]
                for site in sites:
                    if site.file == fwd.file and fwd.start <= site.line <= fwd.end:
                        marks[site.line] = "called"
            lines = self.code.lines(self.files.get(fwd.file)) if self.files.get(fwd.file) else None
            if lines:  # a member used without a call (self.wo_a.weight.view(...)) is used on that line all the same
                rx = re.compile(r"self\.(?:" + "|".join(re.escape(a) for a in names) + r")\b")
                for i in range(fwd.start, min(fwd.end, len(lines)) + 1):
                    if rx.search(lines[i - 1]):
                        marks.setdefault(i, "used")
            ex = self.excerpt(f"{m.class_name}.forward — where {words} are called", fwd, marks)
            if ex:
                out.append(ex)
        return out

    def code_excerpts(self, n: Node, m: ModuleRecord) -> list[dict[str, Any]]:
        members = self.gathered(n, m)
        if members:
            return self.gathered_excerpts(m, members)
        out: list[dict[str, Any]] = []
        owner, attr = _owner(self.index, m.path) if m.path else (None, "")
        sites = list(m.call_sites) or [CallSite(s["file"], s["line"], s["code"]) for s in self.static_call_sites(m)]
        if owner is not None:
            init = owner.init_span
            if init is not None:
                start = init.start
                cs = owner.class_span
                if cs is not None and cs.file == init.file and cs.start <= init.start <= cs.end:
                    start = cs.start
                built = self._find_line(init, re.compile(rf"self\.{re.escape(attr)}\b"))
                ex = self.excerpt(f"{owner.class_name}.__init__ — where {attr} is built",
                                  (init.file, start, init.end), {built: "built"} if built else None)
                if ex:
                    out.append(ex)
            fwd = owner.forward_span
            marks = {s.line: "called" for s in sites if fwd is not None and s.file == fwd.file}
            if fwd is not None and (not sites or any(fwd.start <= s.line <= fwd.end for s in sites
                                                     if s.file == fwd.file)):
                ex = self.excerpt(f"{owner.class_name}.forward — where {attr} is called", fwd, marks)
                if ex:
                    out.append(ex)
            for s in sites:
                if fwd is not None and s.file == fwd.file and fwd.start <= s.line <= fwd.end:
                    continue
                ex = self.excerpt("call site", (s.file, max(1, s.line - 6), s.line + 6), {s.line: "called"})
                if ex:
                    out.append(ex)
        own = []
        if m.init_span is not None:
            own.append((f"{m.class_name}.__init__", m.init_span))
        if m.forward_span is not None:
            own.append((f"{m.class_name}.forward", m.forward_span))
        for title, span in own:
            ex = self.excerpt(title, span)
            if ex:
                ex["own"] = True
                out.append(ex)
        return out

    def calculation(self, n: Node, m: ModuleRecord) -> tuple[list[dict[str, str]], list[str]]:
        rows: list[dict[str, str]] = []
        notes: list[str] = []
        if n.virtual:  # a repeating group of list items: its parts are the runs below, it owns no tensors
            m = dataclasses.replace(m, tensors=(), attributes=(), assumptions=(), kernels=(), called=None)
        lin = linear_dims(m)
        has_bias = any(t.kind == BIAS for t in m.tensors)
        for t in m.tensors:
            if t.kind == ALIAS:
                rows.append({"component": component_text(t), "calc": f"the same tensor as {t.alias_of}",
                             "params": "0", "kind": "alias"})
                continue
            shape = logical_shape(t)
            is_param = t.kind in (WEIGHT, BIAS)
            rows.append({"component": component_text(t) + ("" if is_param else " (not parameters)"),
                         "calc": calc_text(shape, t.elements), "params": fmt.count(t.elements) if is_param else "—",
                         "kind": t.kind})
        if lin and not has_bias and main_weight(m) is not None:
            rows.append({"component": "Bias", "calc": "none", "params": "0", "kind": "none"})
        for cid in n.children:
            c = self.nodes[cid]
            per_parent = max(1, instances(c) // instances(n))
            calc = f"{fmt.count(c.per_instance)} × {per_parent}" if per_parent > 1 else fmt.count(c.per_instance)
            rows.append({"component": c.title, "calc": calc, "params": fmt.count(c.per_instance * per_parent),
                         "kind": "child", "href": c.file})
        rows.append({"component": "Per-instance total", "calc": "", "params": fmt.count(n.per_instance),
                     "kind": "total"})

        # notes
        w = main_weight(m)
        if lin and w is not None:
            if not has_bias:
                notes.append("This projection has no bias parameter.")
            i, o = lin
            local = self.widths(m)
            oi = [f"{fmt.count(d)} {self.names.name(d, local, near) or ''}".strip()
                  for near in [self.names.names_near([i, o], local)] for d in (o, i)]
            if logical_shape(w) == (o, i):
                notes.append(f"The module holds the weight output by input, [out, in] = [{oi[0]}, {oi[1]}].")
            elif logical_shape(w) == (i, o):
                notes.append(f"The weight is stored input by output, [in, out] = [{oi[1]}, {oi[0]}].")
        stored: dict[str, list[str]] = {}  # dtype -> parameter tensors, in order: one sentence per dtype
        for t in m.tensors:
            if t.kind in (WEIGHT, BIAS) and t.dtype:
                stored.setdefault(t.dtype, []).append(f"`{t.name}`")
        for dtype, names in stored.items():
            per = DTYPE_BYTES.get(dtype)
            who = names[0] + " is" if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]} are"
            notes.append(f"{who} stored as {dtype}" + (f" ({per} per value)" if per else "") + ".")
        for t in m.tensors:
            if t.packing:
                notes.append(f"`{t.name}` packs {t.packing}: stored {fmt.shape(t.shape)} holds "
                             f"{fmt.shape(logical_shape(t))} values.")
            if t.kind == SCALE:
                target = next((x for x in m.tensors if x.name == t.scales), None)
                block = ""
                if target is not None and len(logical_shape(target)) == len(t.shape) and all(t.shape):
                    block = " × ".join(str(-(-a // b)) for a, b in zip(logical_shape(target), t.shape))
                    block = f", one per {block} block of `{target.name}`"
                notes.append(f"`{t.name}` {fmt.shape(t.shape)} {t.dtype}: {fmt.count(t.elements)} quantization "
                             f"scales{block} — not parameters.")
            if t.kind == TABLE:
                notes.append(f"`{t.name}` {self.names.shape(t.shape, self.widths(m))} {t.dtype} is an integer table "
                             f"held as a parameter — not counted as parameters.")
            if t.kind == BUFFER:
                notes.append(f"`{t.name}` {self.names.shape(t.shape, self.widths(m))} {t.dtype} is a "
                             f"{'persistent' if t.persistent else 'non-persistent'} buffer — not parameters.")
            if t.note:
                notes.append(f"`{t.name}`: {t.note}")
        if n.multiplicity:
            notes.append(f"Across {mult_text(n.multiplicity)[2:]}: {fmt.count(n.total)} parameters "
                         f"({fmt.count(instances(n))} instances).")
        notes += self.rank_notes(m)
        if m.called is False:
            notes.append("The meta forward pass never called this module.")
        for a in m.assumptions:
            notes.append(f"Assumed: {a}")
        if m.kernels:
            notes.append("Stubbed kernels in its forward: " + ", ".join(m.kernels) + ".")
        return rows, notes

    def rank_notes(self, m: ModuleRecord) -> list[str]:
        """Each tensor's shape on every rank, when the records were made with world_size (all ranks: the ranks
        extra of `archviz build` of world_size N; one rank: the shapes are that rank's)."""
        src = self.record.source
        if src.world_size <= 1 or not m.tensors:
            return []
        per = self.ranks.get(m.path)
        if not per:
            return [f"Shapes are rank {src.rank}’s of {src.world_size} ({option('world-size')} {src.world_size} "
                    f"{option('rank')} "
                    f"{src.rank}); `archviz build {option('world-size')} {src.world_size}` shows every rank’s."]
        notes = []
        for t in m.tensors:
            shapes = per.get(t.name)
            if not shapes:
                continue
            held = [(r, s) for r, s in enumerate(shapes) if s is not None]
            if all(s == held[0][1] for _, s in held) and len(held) == len(shapes):
                notes.append(f"`{t.name}` per rank: {fmt.shape(tuple(held[0][1]))} on each of the {len(shapes)} "
                             "ranks.")
            else:
                notes.append(f"`{t.name}` per rank: " + ", ".join(
                    f"rank {r} {fmt.shape(tuple(s)) if s is not None else 'not held'}" for r, s in enumerate(shapes))
                    + ".")
        return notes

    def confirmed(self, n: Node) -> bool:
        hits = [self.probe[p] for p in n.paths if p in self.probe]
        return bool(hits) and all(isinstance(h, Mapping) and h.get("confirmed") for h in hits)

    def moe_facts(self, n: Node, m: ModuleRecord) -> list[tuple[str, str, str]]:
        """An experts node's or an MoE block's figures, each (name, figure, what it counts): routed experts, top-k,
        one expert's parameters, the shared experts' and the active parameters a token reaches; [] elsewhere."""
        moes = [x for x in self.record.summary.moe if x.path in n.paths]
        block = not moes
        if block:  # an MoE block: the routed experts it holds directly (one level of attribute below it)
            moes = [x for x in self.record.summary.moe
                    if any(x.path.startswith(f"{p}.") and "." not in x.path[len(p) + 1:] for p in n.paths)]
        if not moes:
            return []
        x = moes[0]
        rows = [("routed experts", fmt.count(x.experts), "" if x.local_experts == x.experts
                 else f"{fmt.count(x.local_experts)} on this rank")]
        rows.append(("experts per token (top-k)", fmt.count(x.top_k) if x.top_k else "—",
                     "" if x.top_k else "not found in the config or the module"))
        rows.append(("one expert", fmt.count(x.per_expert), "parameters"))
        active = (x.top_k or 0) * x.per_expert
        if block:
            mod = self.index.get(n.representative)
            shared = [c for c in self.record.modules if c.path.startswith(f"{n.representative}.")
                      and "shared" in c.path[len(n.representative) + 1:].split(".")[0]
                      and "." not in c.path[len(n.representative) + 1:]]
            shared_p = sum(c.totals.parameters for c in shared)
            if shared:
                rows.append(("shared experts", fmt.count(shared_p), "parameters, every token"))
            if mod is not None:
                rest = mod.totals.parameters - x.parameters  # router, shared experts, norms: every token's
                active = active + rest
        if x.top_k:
            rows.append(("active per token", fmt.count(active),
                         f"{x.top_k} × {fmt.count(x.per_expert)}" + (" + the router and shared experts" if block
                                                                      else "")))
        return rows

    def node_context(self, nid: str) -> dict[str, Any]:
        n = self.nodes[nid]
        m = self.index.get(n.representative) or self.record.modules[0]
        ann = self.annotations.get(nid) or {}
        crumbs = []
        p = n.parent
        while p is not None:
            a = self.nodes[p]
            factor = instances(a) // instances(self.nodes[a.parent]) if a.parent is not None else 1
            crumbs.append({"title": (self.annotations.get(p) or {}).get("title") or a.title, "href": a.file,
                           "factor": factor if a.folded and factor > 1 else None})
            p = a.parent
        crumbs.reverse()
        if crumbs:
            crumbs[0]["title"] = self.record.source.name
        sites = [{"code": cs.code.strip(), "line": cs.line, "file": cs.file, "traced": True} for cs in m.call_sites]
        if n.virtual:
            sites = []
        elif not sites:
            sites = self.static_call_sites(m)
        calls = list(m.calls) if not n.virtual else []
        shapes = None
        if calls:
            c = calls[0]
            pm = self.index.get(m.parent) if m.parent is not None else None
            near = [d for x in (c, *(pm.calls[:1] if pm is not None else ())) for s in (*x.inputs, *x.outputs)
                    for d in s]  # a size is named by those beside it: its module's and its parent's in and out
            local = self.widths(m)
            shapes = {"inputs": [self.names.shape(s, local, near=near) for s in c.inputs],
                      "outputs": [self.names.shape(s, local, near=near) for s in c.outputs],
                      "input_dtypes": list(c.input_dtypes), "output_dtypes": list(c.output_dtypes),
                      "calls": len(calls)}
        rows, notes = self.calculation(n, m)
        ck = checkpoint_text(self.ck_index.for_paths(n.paths)) if self.ck_index else None
        children = [{"title": (self.annotations.get(c) or {}).get("title") or self.nodes[c].title,
                     "href": self.nodes[c].file, "class_name": self.nodes[c].class_name,
                     "per_instance": fmt.count(self.nodes[c].per_instance), "count": self.nodes[c].count,
                     "total": fmt.count(self.nodes[c].total), "mult": mult_text(self.nodes[c].multiplicity)}
                    for c in n.children]
        own = self.own_part(n, n.file + "#parameters")
        if own:
            children.append(own)
        patterns = n.patterns
        return {
            "node": n, "module": m, "title": ann.get("title") or n.title,
            "description": ann.get("description") or (
                f"A repeating group of consecutive list items, {mult_text(n.multiplicity[-1:])[2:]}: each group "
                f"holds the parts below, in order." if n.virtual and n.count > 1 else
                f"{len(n.children)} parts of {m.class_name} gathered under one title." if n.virtual  # names [groups]
                else describe(m, self.names, len(n.children), self.widths(m))),
            "generated_description": not ann.get("description"),
            "crumbs": crumbs, "parent_href": self.nodes[n.parent].file if n.parent is not None else None,
            "call_sites": sites,
            "shapes": shapes, "per_instance": fmt.count(n.per_instance), "mult": mult_text(n.multiplicity),
            "total": fmt.count(n.total), "count": instances(n), "rows": rows, "notes": notes, "checkpoint": ck,
            "confirmed": self.confirmed(n), "excerpts": self.code_excerpts(n, m), "children": children,
            "patterns": patterns[:8], "more_patterns": max(0, len(patterns) - 8),
            "evidence": [self.evidence(c) for c in ann.get("claims", ())],
            "learned": m.totals.parameters > 0, "flops": self.cost.node(n), "moe": self.moe_facts(n, m),
            "dataflow": flow_picture(self, n, m, "../" * n.file.count("/"), ann.get("title") or n.title),
        }

    def evidence(self, claim: Mapping[str, Any]) -> dict[str, Any]:
        ex = self.excerpt(str(claim.get("id", "")), (claim["file"], claim["start"], claim["end"]),
                          {ln: "quoted" for ln in claim.get("quoted_lines", ())}, absolute=claim.get("absolute"))
        return {"id": claim.get("id"), "text": claim.get("text") or "", "file": claim["file"],
                "start": claim["start"], "end": claim["end"], "quote": claim.get("quote"), "excerpt": ex}

    # --- overview

    def layer_map(self) -> dict[str, Any] | None:
        """One cell per layer of the main layer list, coloured by the layer's kind, linking to its node."""
        from ...group.layers import main_layer_list

        try:
            lst = main_layer_list(self.record)
        except ArchvizError:
            return None
        grouping = self.record.extra("grouping")
        info = grouping.get("layers") if isinstance(grouping, Mapping) else None
        kind_of: dict[str, tuple[str, str]] = {}  # layer name -> (kind key, kind title)
        if isinstance(info, Mapping) and info.get("path") == lst.path:
            for k in info.get("kinds") or ():
                for n in k.get("layers") or ():
                    kind_of[str(n)] = (str(k.get("signature") or k.get("name")), str(k.get("name") or ""))
        kinds: dict[str, int] = {}
        legend_of: dict[str, dict[str, Any]] = {}
        cells = []
        for path in lst.children:
            name = path.rsplit(".", 1)[-1]
            nid = self.node_of.get(path)
            if nid is None:
                cells.append({"n": name, "href": None, "kind": None, "title": f"layer {name}", "hue": 0})
                continue
            n = self.nodes[nid]
            ntitle = (self.annotations.get(nid) or {}).get("title") or n.title
            key, ktitle = kind_of.get(name, (nid, ntitle))
            k = kinds.setdefault(key, len(kinds))
            hue = (k * 137 + 200) % 360
            cells.append({"n": name, "href": n.file, "kind": k, "title": f"layer {name}: {ktitle or ntitle}",
                          "hue": hue})
            if key not in legend_of:
                m = self.index.get(n.representative)
                legend_of[key] = {"kind": k, "hue": hue, "href": n.file, "layers": 0, "title": ktitle or ntitle,
                                  "class_name": n.class_name,
                                  "per_instance": fmt.count(m.totals.parameters if m else n.per_instance)}
            legend_of[key]["layers"] += 1
        return {"path": lst.path, "cells": cells, "legend": list(legend_of.values()),
                "pattern": str(info.get("pattern") or "") if isinstance(info, Mapping) else ""}

    def outline(self) -> list[dict[str, Any]]:
        out = []
        own = self.own_part(self.nodes[self.root], "#own-tensors")
        if own:
            out.append({**own, "depth": 1})
        for nid, n in self.nodes.items():
            if nid == self.root:
                continue
            out.append({"depth": n.depth, "title": (self.annotations.get(nid) or {}).get("title") or n.title,
                        "href": n.file, "class_name": n.class_name, "total": fmt.count(n.total),
                        "mult": mult_text(n.multiplicity)})
        return out

    def checkpoint_report(self) -> dict[str, Any]:
        """The overview's checkpoint section: the same views as `archviz check` prints (summary rows, modules that
        differ, checkpoint-only tensors by kind, notes), from the comparison kept in the records."""
        from ...checkpoint.report import checkpoint_only_groups, note_groups, problem_modules, summary_rows

        result = self.checkpoint or {}
        rows = [(k, v) for k, v in summary_rows(result) if k not in ("verdict", "checkpoint")] \
            if isinstance(result.get("summary"), Mapping) else []
        problems = problem_modules(result)
        notes = note_groups(result)
        return {
            "source": str(result.get("source", "")),
            "revision": str(result.get("revision") or "")[:12] or None,
            "verdict": str(result.get("verdict", "")),
            "root": checkpoint_text(self.ck_index.for_paths([""])) if self.ck_index else None,
            "rows": rows,
            "problems": [{**r, "model": fmt.count(r["model"]), "checkpoint": fmt.count(r["checkpoint"]),
                          "difference": f"{r['difference']:+,}"} for r in problems[:_REPORT_ROWS]],
            "problems_more": max(0, len(problems) - _REPORT_ROWS),
            "only": [{**g, "tensors": fmt.count(g["tensors"]), "elements": fmt.count(g["elements"])}
                     for g in checkpoint_only_groups(result)],
            "notes": [(fmt.count(n), note) for note, n in notes[:_REPORT_ROWS]],
            "notes_more": max(0, len(notes) - _REPORT_ROWS),
        }

    def overview_context(self) -> dict[str, Any]:
        r = self.record
        s = r.summary
        src = r.source
        params_by = dict(s.parameters_by_dtype)
        bytes_by = dict(s.bytes_by_dtype)
        dtypes = [{"dtype": d, "parameters": fmt.count(params_by.get(d)) if d in params_by else "—",
                   "bytes": fmt.count(bytes_by.get(d, 0)), "human": fmt.nbytes(bytes_by.get(d, 0))}
                  for d in sorted(set(params_by) | set(bytes_by))]
        ck = None
        if self.checkpoint:
            ck = self.checkpoint_report()
        moe = None
        if s.moe:
            moe = {"layers": len(s.moe), "experts": "/".join(str(e) for e in sorted({m.experts for m in s.moe})),
                   "top_k": "/".join(str(k) for k in sorted({m.top_k for m in s.moe if m.top_k})),
                   "per_expert": "/".join(fmt.count(p) for p in sorted({m.per_expert for m in s.moe}))}
        rootn = self.nodes[self.root]
        ann = self.annotations.get(self.root) or {}
        return {
            "name": ann.get("title") or src.name, "description": ann.get("description"),
            "evidence": [self.evidence(c) for c in ann.get("claims", ())],
            "source": src, "summary": s, "dtypes": dtypes, "checkpoint": ck, "moe": moe,
            "config_said": config_said(src.spec), "dtype_said": built_dtype_said(src.spec, dict(src.config)),
            "parameters": fmt.count(s.parameters), "parameters_human": fmt.human(s.parameters),
            "active": fmt.count(s.active_parameters) if s.active_parameters is not None else None,
            "active_human": fmt.human(s.active_parameters), "bytes": fmt.count(s.bytes),
            "bytes_human": fmt.nbytes(s.bytes), "scales": fmt.count(s.scale_elements),
            "tables": fmt.count(s.table_elements), "buffers": fmt.count(s.buffer_elements),
            "tied": tied_text(r),
            "modules": fmt.count(s.modules), "nodes": len(self.nodes),
            "all_ranks": fmt.count(s.parameters * src.world_size) if src.world_size > 1 else None,
            "layer_map": self.layer_map(), "treemap": treemap(self.nodes, self.root),
            "treemap_hrefs": {nid: n.file for nid, n in self.nodes.items()}, "outline": self.outline(),
            "children": [{"title": (self.annotations.get(c) or {}).get("title") or self.nodes[c].title,
                          "href": self.nodes[c].file, "class_name": self.nodes[c].class_name,
                          "total": fmt.count(self.nodes[c].total), "mult": mult_text(self.nodes[c].multiplicity)}
                         for c in rootn.children] + [x for x in [self.own_part(rootn, "#own-tensors")] if x],
            "own_tensors": self.own_tensors() if self.own_part(rootn, "#own-tensors") else [],
            "config": [(k, json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v)
                       for k, v in sorted(src.config)][:400],
            "overrides": [(k, json.dumps(v, ensure_ascii=False)) for k, v in src.overrides],
            "versions": [f"{k} {v}" for k, v in sorted(src.versions)], "shapes": any(m.calls for m in r.modules),
            "shapes_pass": _shapes_pass(r.extra("shapes")), "cost": self.cost.overview(),
            "excerpts": self.code_excerpts(rootn, self.index[rootn.representative])
            if rootn.representative in self.index else [],
            "dataflow": self.overview_flow(rootn, ann.get("title") or src.name),
        }

    def overview_flow(self, rootn: Node, title: str) -> dict[str, Any] | None:
        """The overview's picture: the forward of the module that runs the layer list (the block sequence, folded
        by kind), which is the root's own or one below it (transformers' `model` under the LM head)."""
        from .dataflow import overview_module

        m = overview_module(self.record, self.index)
        if m is None:
            return None
        nid = self.node_of.get(m.path) if m.path else self.root
        return flow_picture(self, self.nodes[nid] if nid else rootn, m, "",
                            title if not m.path else f"{title} · {m.path}", collapse=4)

    def own_part(self, n: Node, href: str) -> dict[str, Any] | None:
        """A node's own parameter tensors as one more part beside its children (the top module's image_start,
        image_end, image_newline), so the parts add up to the node's total; None where it holds none or has no
        children (its page's table lists them)."""
        m = self.index.get(n.representative)
        if n.virtual or not n.children or m is None or m.own.parameters <= 0:
            return None
        names = [t.name for t in m.tensors if t.kind in (WEIGHT, BIAS)]
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return {"title": f"{m.class_name}’s own tensors" if n.id != self.root else "Top-level tensors",
                "href": href, "class_name": shown, "per_instance": fmt.count(m.own.parameters), "count": n.count,
                "total": fmt.count(m.own.parameters * instances(n)), "mult": mult_text(n.multiplicity), "own": True}

    def own_tensors(self) -> list[dict[str, Any]]:
        """The top module's own tensors, one row each, for the overview's table."""
        m = self.index.get(self.nodes[self.root].representative)
        if m is None:
            return []
        return [{"name": t.name, "shape": fmt.shape(logical_shape(t)), "dtype": t.dtype,
                 "parameters": fmt.count(t.elements) if t.kind in (WEIGHT, BIAS) else "—",
                 "kind": t.kind if t.kind not in (WEIGHT, BIAS) else ""} for t in m.tensors if t.kind != ALIAS]

    def search_entries(self, model_index: int) -> list[list[Any]]:
        """One entry per node: [model, title, class, page, total, path patterns, depth, virtual (1: a group of
        other nodes), checkpoint tensor names of its modules (patterns), multiplicity ("× 2 groups × 5 layers")]."""
        stored: dict[str, list[str]] = {}
        if self.ck_index is not None:
            for path, names in self.ck_index.names_by_module().items():
                nid = self.node_of.get(path)
                if nid is not None:
                    stored.setdefault(nid, []).extend(names)
        out = []
        for nid, n in self.nodes.items():
            title = (self.annotations.get(nid) or {}).get("title") or n.title
            out.append([model_index, title, n.class_name, f"{self.slug}/{n.file}", n.total,
                        n.patterns[:16], n.depth, 1 if n.virtual else 0, search_names(stored.get(nid, ())),
                        mult_text(n.multiplicity)])
        return out


def _shapes_pass(info: Any) -> dict[str, Any] | None:
    """The meta forward pass's facts, for the overview: B, T, its notes (memo answers, the model's warnings)."""
    if not isinstance(info, dict) or "B" not in info:
        return None
    return {"B": info["B"], "T": info["T"], "clean": info.get("clean", True),
            "notes": [str(n) for n in info.get("notes") or ()]}

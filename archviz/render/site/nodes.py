"""The site's node tree: the grouping stage's tree (or the raw tree with identical list items folded), and
each node's stable page name."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ... import format as fmt
from ...errors import ArchvizError
from ...records import (
    ModelRecord,
    ModuleRecord,
)
from ...paths import compress_paths

CONTAINERS = ("ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict")


@dataclass
class Node:
    id: str
    parent: str | None
    children: list[str]
    title: str
    kind: str
    class_name: str
    representative: str  # a module path
    paths: list[str]
    count: int
    multiplicity: list[dict[str, Any]]  # [{"factor": 2, "name": "groups"}, ...]
    per_instance: int
    total: int
    breadcrumb: list[str] = field(default_factory=list)
    folded: bool = False  # a run of identical list items made into one node by this module (no grouping stage)
    virtual: bool = False  # a grouping node standing for a repeating group of list items, not one module
    _patterns: list[str] | None = None

    @property
    def patterns(self) -> list[str]:
        if self._patterns is None:
            self._patterns = compress_paths(self.paths)
        return self._patterns
    file: str = ""  # page file name, set when pages are named
    depth: int = 0


def _kind_of(m: ModuleRecord) -> str:
    c = m.class_name.lower()
    if m.class_name in CONTAINERS:
        return "list"
    for key, kind in (("embed", "embedding"), ("norm", "norm"), ("attention", "attention"), ("attn", "attention"),
                      ("expert", "expert"), ("moe", "moe"), ("gate", "router"), ("router", "router"),
                      ("linear", "linear"), ("mlp", "mlp"), ("block", "block"), ("layer", "block")):
        if key in c:
            return kind
    return "module"


def nodes_from_grouping(record: ModelRecord, grouping: Mapping[str, Any]) -> tuple[dict[str, Node], str]:
    index = record.index()
    nodes: dict[str, Node] = {}
    root = None
    for d in grouping.get("nodes", ()):
        nid = str(d["id"])
        rep = d.get("representative")
        rep = rep if isinstance(rep, str) and rep in index else None
        paths = [p for p in (d.get("paths") or ()) if isinstance(p, str)]
        if rep is None:
            rep = next((p for p in paths if p in index), "")
        m = index.get(rep)
        per = d.get("per_instance")
        per = int(per) if isinstance(per, int) else (m.totals.parameters if m else 0)
        count = int(d.get("count") or len(paths) or 1)
        total = d.get("total")
        total = int(total) if isinstance(total, int) else per * count
        mult = [{"factor": int(x.get("factor", 1)), "name": str(x.get("name", ""))}
                for x in (d.get("multiplicity") or ()) if isinstance(x, Mapping)]
        nodes[nid] = Node(
            id=nid, parent=None if d.get("parent") is None else str(d["parent"]),
            children=[str(c) for c in (d.get("children") or ())], title=str(d.get("title") or (m.name if m else nid)),
            kind=str(d.get("kind") or (_kind_of(m) if m else "module")),
            class_name=str(d["class_name"] if isinstance(d.get("class_name"), str) else (m.class_name if m else "")),
            representative=rep,
            paths=paths or ([rep] if m else []), count=count, multiplicity=mult, per_instance=per, total=total,
            breadcrumb=[str(b) for b in (d.get("breadcrumb") or ())], virtual=bool(d.get("virtual")),
        )
        if nodes[nid].parent is None and root is None:
            root = nid
    if root is None:
        raise ArchvizError(f"{record.source.name}: the grouping has no root node",
                           hint="rebuild the records with this archviz version")
    kinds = {str(k.get("signature")): str(k.get("name") or "")
             for k in ((grouping.get("layers") or {}).get("kinds") or ()) if isinstance(k, Mapping)}
    for n in nodes.values():
        n.children = [c for c in n.children if c in nodes]
        if n.parent is not None and n.parent not in nodes:
            n.parent = root
        full = kinds.get(n.kind, "")
        if full.endswith(" " + n.title):  # a layer kind named short inside its group: one name per kind
            n.title = full
    return nodes, root


def nodes_from_tree(record: ModelRecord) -> tuple[dict[str, Node], str]:
    """The raw module tree, list items of identical structure folded into one node (`layers.0–2`)."""
    index = record.index()
    canon: dict[tuple, int] = {}
    sid: dict[str, int] = {}
    for m in reversed(record.modules):
        key = (m.class_name, tuple((t.name, t.kind, t.shape, t.dtype, t.elements) for t in m.tensors),
               tuple(("#" if c.rsplit(".", 1)[-1].isdigit() else c.rsplit(".", 1)[-1], sid[c]) for c in m.children))
        sid[m.path] = canon.setdefault(key, len(canon))
    rootm = record.modules[0]
    nodes: dict[str, Node] = {}
    root = Node(id=rootm.path, parent=None, children=[], title=record.source.name, kind=_kind_of(rootm),
                class_name=rootm.class_name, representative=rootm.path, paths=[rootm.path], count=1, multiplicity=[],
                per_instance=rootm.totals.parameters, total=rootm.totals.parameters)
    nodes[root.id] = root
    stack = [root]
    while stack:
        node = stack.pop()
        rep = index[node.representative]
        groups: dict[Any, list[str]] = {}
        for c in rep.children:
            name = c.rsplit(".", 1)[-1]
            key = ("#", sid[c]) if name.isdigit() else name
            groups.setdefault(key, []).append(name)
        made = []
        for members in groups.values():
            paths = [f"{p}.{name}" if p else name for p in node.paths for name in members]
            first = f"{node.representative}.{members[0]}" if node.representative else members[0]
            m = index[first]
            folded = members[0].isdigit()
            mult = list(node.multiplicity)
            if len(members) > 1:
                mult.append({"factor": len(members), "name": rep.name or "items"})
            title = m.name if not folded else f"{rep.name}.{fmt.ranges(int(x) for x in members).replace('-', '–')}"
            pattern = compress_paths(paths)
            nid = "|".join(pattern)
            child = Node(id=nid, parent=node.id, children=[], title=title, kind=_kind_of(m), class_name=m.class_name,
                         representative=first, paths=paths, count=len(paths), multiplicity=mult,
                         per_instance=m.totals.parameters, total=m.totals.parameters * len(paths),
                         breadcrumb=node.breadcrumb + [node.title], folded=len(members) > 1, _patterns=pattern)
            nodes[nid] = child
            node.children.append(nid)
            made.append(child)
        stack.extend(reversed(made))
    return nodes, root.id


def build_nodes(record: ModelRecord) -> tuple[dict[str, Node], str]:
    grouping = record.extra("grouping")
    if isinstance(grouping, Mapping) and grouping.get("nodes"):
        nodes, root = nodes_from_grouping(record, grouping)
    else:
        nodes, root = nodes_from_tree(record)
    # depth and order: pre-order from the root; nodes not reachable from it are dropped
    order: list[str] = []
    stack = [(root, 0)]
    seen = set()
    while stack:
        nid, depth = stack.pop()
        if nid in seen:
            continue
        seen.add(nid)
        nodes[nid].depth = depth
        order.append(nid)
        stack.extend((c, depth + 1) for c in reversed(nodes[nid].children))
    return {nid: nodes[nid] for nid in order}, root


SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def page_names(nodes: Mapping[str, Node], root: str) -> None:
    """A stable file name per node, from the modules it stands for (not from positional ids): `layers.0-7.attn.wo_b`;
    a short hash of the id only where two names would collide or a name is cut short."""
    used: set[str] = {"index"}
    for nid, n in nodes.items():
        if nid == root:
            n.file = "index.html"
            continue
        pats = n.patterns if n.paths else [nid]
        text = pats[0] + (f"+{len(pats) - 1}" if len(pats) > 1 else "")
        if n.virtual:
            text = f"{text}+group"  # a virtual group node shares its paths with its first child
        text = text.replace("{", "").replace("}", "").replace("…", "to").replace(",", "_")  # {3,5,…,41} -> 3_5_to_41
        base = SAFE_NAME.sub("_", text).strip("._") or "node"
        name = base[:90]
        if name != base or name.lower() in used:
            name = f"{base[:80]}~{hashlib.sha1(nid.encode()).hexdigest()[:8]}"
        used.add(name.lower())
        n.file = f"n/{name}.html"


def instances(n: Node) -> int:
    """How many instances the node stands for: the product of its multiplicity factors."""
    return math.prod(max(1, int(x["factor"])) for x in n.multiplicity) if n.multiplicity else 1


def mult_text(mult: Sequence[Mapping[str, Any]]) -> str:
    return " ".join(f"× {fmt.count(int(x['factor']))} {x['name']}".rstrip() for x in mult if int(x["factor"]) != 1)

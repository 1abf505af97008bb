"""The static HTML explorer: records -> a folder of pages that works from `file://`.

`build_site(records, output)` renders one site for one or more models:

    index.html                    the model index (every model, its totals)
    <model>/index.html            the model's overview: totals, checkpoint summary, layer map, treemap, node tree
    <model>/n/<node>.html         one page per node of the grouped tree (a stable name, derived from the node id)
    code/<hash>.js                each cited source file once, highlighted by pygments (excerpts are cut from it)
    search.js                     the search index over every node of every model (raw module paths, compressed)
    static/                       CSS and JS (local: no CDN, no network, no fetch)

Pages come from jinja2 templates (`templates/`, autoescaped). Output is deterministic (no clocks, no absolute paths,
sorted everything) and atomic: the site is written to a temp folder beside the output and swapped into place, so an
interrupted build leaves the previous site as it was.

The tree is the grouping stage's (`record.extra("grouping")`) when present; otherwise the raw module tree with runs of
structurally identical list items folded into one node (one page per kind of item, never one per raw module).
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from . import format as fmt
from .dims import DimNames
from .gcpause import collector_paused
from .views import tied_text
from .errors import ArchvizError
from .records import (
    ALIAS, BIAS, BUFFER, SCALE, TABLE, WEIGHT, CallSite, ModelRecord, ModuleRecord, SourceSpan, TensorRecord,
)

Progress = Callable[[int, int], None]

MARKER = ".archviz-site"  # a file in every site's root: only folders holding it are ever replaced
_CONTAINERS = ("ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict")


# ---------------------------------------------------------------------------------------------------------------------
# Module paths, compressed: layers.{0-39}.ffn.experts.{0-383}.w1 stands for 15,360 paths


def _compress_rows(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Rows of one skeleton (same length, digits only where they differ) -> patterns with {ranges} segments."""
    rows = list(dict.fromkeys(rows))
    if len(rows) == 1:
        return rows
    n = len(rows[0])
    varying = [i for i in range(n) if len({r[i] for r in rows}) > 1]
    sets = [sorted({int(r[i]) for r in rows}) for i in varying]
    if math.prod(len(s) for s in sets) == len(rows):  # a full cartesian product: one pattern
        segs = list(rows[0])
        for i, s in zip(varying, sets):
            segs[i] = "{" + fmt.ranges(s) + "}"
        return [tuple(segs)]
    i = varying[0]
    by_value: dict[int, list[tuple[str, ...]]] = {}
    for r in rows:
        by_value.setdefault(int(r[i]), []).append(r)
    merged: dict[tuple, list[int]] = {}
    for v in sorted(by_value):
        sub = _compress_rows([r[:i] + ("#",) + r[i + 1:] for r in by_value[v]])
        merged.setdefault(tuple(sub), []).append(v)
    out: list[tuple[str, ...]] = []
    for sub, values in merged.items():
        label = "{" + fmt.ranges(values) + "}" if len(values) > 1 else str(values[0])
        out.extend(p[:i] + (label,) + p[i + 1:] for p in sub)
    return out


def compress_paths(paths: Sequence[str]) -> list[str]:
    """Module paths -> as few patterns as exactly cover them: ['layers.0.w', 'layers.1.w'] -> ['layers.{0-1}.w']."""
    groups: dict[tuple, list[tuple[str, ...]]] = {}
    for p in paths:
        segs = tuple(p.split(".")) if p else ("",)
        skeleton = tuple("#" if s.isdigit() else s for s in segs)
        groups.setdefault(skeleton, []).append(segs)
    out: list[str] = []
    for rows in groups.values():
        out.extend(".".join(r) for r in _compress_rows(rows))
    return out


def expand_pattern(pattern: str) -> list[str]:
    """The inverse of compress_paths for one pattern."""
    out = [""]
    for i, seg in enumerate(pattern.split(".")):
        opts = [str(v) for v in fmt.parse_ranges(seg[1:-1])] if seg.startswith("{") else [seg]
        out = [(f"{o}.{s}" if i else s) for o in out for s in opts]
    return out


# ---------------------------------------------------------------------------------------------------------------------
# The node tree


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
    if m.class_name in _CONTAINERS:
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
    for n in nodes.values():
        n.children = [c for c in n.children if c in nodes]
        if n.parent is not None and n.parent not in nodes:
            n.parent = root
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


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_REPORT_ROWS = 40  # rows per table of the overview's checkpoint report; `archviz check --json` lists them all


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
        base = _SAFE.sub("_", text).strip("._") or "node"
        name = base[:90]
        if name != base or name.lower() in used:
            name = f"{base[:80]}~{hashlib.sha1(nid.encode()).hexdigest()[:8]}"
        used.add(name.lower())
        n.file = f"n/{name}.html"


# ---------------------------------------------------------------------------------------------------------------------
# Shapes with named dims

# ---------------------------------------------------------------------------------------------------------------------
# Source code: highlighted once per file, excerpts cut from it in the browser


class CodeBank:
    def __init__(self) -> None:
        self._files: dict[str, dict[str, Any]] = {}  # key -> {"path", "lines" (text), "html" (lines)}
        self._by_abs: dict[str, str | None] = {}

    def lines(self, absolute: str) -> list[str] | None:
        key = self.key(absolute, None)
        return self._files[key]["lines"] if key else None

    def key(self, absolute: str | None, display: str | None) -> str | None:
        if not absolute:
            return None
        if absolute in self._by_abs:
            return self._by_abs[absolute]
        try:
            with open(absolute, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            self._by_abs[absolute] = None
            return None
        key = hashlib.sha1(((display or "") + "\0" + text).encode()).hexdigest()[:12]
        if key not in self._files:
            self._files[key] = {"path": display or os.path.basename(absolute), "text": text,
                                "lines": text.split("\n"), "html": None}
        self._by_abs[absolute] = key
        return key

    def used(self) -> list[str]:
        return sorted(self._files)

    def script(self, key: str) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        f = self._files[key]
        if f["html"] is None:
            html = highlight(f["text"], PythonLexer(stripnl=False, ensurenl=True), HtmlFormatter(nowrap=True))
            f["html"] = html.split("\n")[: len(f["lines"])]
        return f"(window.ARCHVIZ_CODE=window.ARCHVIZ_CODE||{{}})[{json.dumps(key)}]={_js_json(f['html'])};\n"


def _js_json(obj: Any) -> str:
    """JSON that is also safe to place anywhere a script can be: no raw `<`, U+2028 or U+2029."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return s.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


# ---------------------------------------------------------------------------------------------------------------------
# Links to the exact lines upstream, at a pinned revision


def _git(folder: str, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=10,
                           env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _web_remote(url: str) -> str | None:
    url = url.strip()
    m = re.match(r"^(?:ssh://)?git@([^:/]+)[:/](.+?)(?:\.git)?/?$", url) or \
        re.match(r"^(?:https?|git)://(?:[^@/]+@)?([^/]+)/(.+?)(?:\.git)?/?$", url)
    if not m:
        return None
    return f"https://{m.group(1)}/{m.group(2)}"


def _release(version: str | None) -> str | None:
    if not version:
        return None
    base = version.split("+", 1)[0]
    return base if re.fullmatch(r"\d+\.\d+(\.\d+)?", base) else None


class Upstream:
    """display path -> a URL template for its lines at a pinned revision, and that revision's label."""

    def __init__(self, record: ModelRecord, template: str | None):
        self.record = record
        self.template = template
        self.files = dict(record.source.files)
        self.versions = dict(record.source.versions)
        self._cache: dict[str, tuple[str, str] | None] = {}

    def _own(self, display: str) -> bool:
        top = display.split("/", 1)[0]
        if self.record.source.kind == "hf":
            return top == "transformers"
        return top not in ("torch", "transformers")

    def _resolve(self, display: str) -> tuple[str, str] | None:
        if self.template and self._own(display):
            m = re.search(r"/(?:blob|tree|raw|src)/([^/]+)/", self.template)
            return self.template.replace("{path}", display), (m.group(1) if m else "")
        top = display.split("/", 1)[0]
        if top == "transformers":
            v = _release(self.versions.get("transformers"))
            if v:
                return f"https://github.com/huggingface/transformers/blob/v{v}/src/{display}#L{{start}}-L{{end}}", \
                    f"v{v}"
            return None
        if top == "torch":
            v = _release(self.versions.get("torch"))
            if v:
                return f"https://github.com/pytorch/pytorch/blob/v{v}/{display}#L{{start}}-L{{end}}", f"v{v}"
            return None
        absolute = self.files.get(display)
        if not absolute or not os.path.isfile(absolute):
            return None
        folder = os.path.dirname(absolute)
        toplevel = _git(folder, "rev-parse", "--show-toplevel")
        commit = _git(folder, "rev-parse", "HEAD")
        if not toplevel or not commit:
            return None
        rel = os.path.relpath(os.path.realpath(absolute), os.path.realpath(toplevel)).replace(os.sep, "/")
        if _git(toplevel, "ls-files", "--error-unmatch", "--", rel) is None:
            return None  # not tracked: no revision holds these lines
        if _git(toplevel, "status", "--porcelain", "--", rel):
            return None  # edited since the commit: the pinned lines would not be these
        remotes = (_git(toplevel, "remote") or "").split()
        remote = "origin" if "origin" in remotes else (remotes[0] if remotes else None)
        web = _web_remote(_git(toplevel, "remote", "get-url", remote) or "") if remote else None
        if not web:
            return None
        return f"{web}/blob/{commit}/{rel}#L{{start}}-L{{end}}", commit[:12]

    def link(self, display: str, start: int, end: int) -> tuple[str, str] | None:
        if display not in self._cache:
            self._cache[display] = self._resolve(display)
        hit = self._cache[display]
        if hit is None:
            return None
        url, rev = hit
        return url.replace("{start}", str(start)).replace("{end}", str(end)), rev

    def repository(self, url: str) -> str:
        """'owner/repo / path/in/repo' of a blob URL (the path as the repository names it)."""
        m = re.match(r"https?://[^/]+/([^/]+/[^/]+)/(?:-/)?(?:blob|tree|raw|src)/[^/]+/([^#?]+)", url)
        if m:
            return f"{m.group(1)} / {m.group(2)}"
        m = re.match(r"https?://[^/]+/([^/]+/[^/]+)/", url)
        return m.group(1) if m else ""


# ---------------------------------------------------------------------------------------------------------------------
# Treemap (squarified), computed here so the picture is deterministic


def _worst(row: list[float], side: float) -> float:
    s = sum(row)
    if s <= 0 or side <= 0:
        return math.inf
    return max(max(side * side * r / (s * s), (s * s) / (side * side * r)) for r in row if r > 0)


def squarify(values: Sequence[float], x: float, y: float, w: float,
             h: float) -> list[tuple[float, float, float, float]]:
    """Rectangles for values (sorted descending by the caller) filling (x, y, w, h), in the values' order."""
    total = sum(values)
    if total <= 0 or w <= 0 or h <= 0:
        return [(x, y, 0.0, 0.0) for _ in values]
    scale = w * h / total
    areas = [v * scale for v in values]
    out: list[tuple[float, float, float, float]] = []
    i = 0
    while i < len(areas):
        side = min(w, h)
        row = [areas[i]]
        j = i + 1
        while j < len(areas) and _worst(row + [areas[j]], side) <= _worst(row, side):
            row.append(areas[j])
            j += 1
        s = sum(row)
        if w >= h:  # a column on the left
            cw = s / h if h else 0
            yy = y
            for a in row:
                rh = a / cw if cw else 0
                out.append((x, yy, cw, rh))
                yy += rh
            x += cw
            w -= cw
        else:  # a row on top
            rh = s / w if w else 0
            xx = x
            for a in row:
                rw = a / rh if rh else 0
                out.append((xx, y, rw, rh))
                xx += rw
            y += rh
            h -= rh
        i = j
    return out


def _hue(key: str) -> int:
    return int(hashlib.sha1(key.encode()).hexdigest()[:6], 16) % 360


def treemap(nodes: Mapping[str, Node], root: str, width: float = 960, height: float = 540,
            max_depth: int = 6) -> list[dict[str, Any]]:
    """Nested rectangles of parameter totals (a node's own tensors make an 'own' cell beside its children)."""
    rects: list[dict[str, Any]] = []

    def items(nid: str) -> list[tuple[int, str, bool]]:
        n = nodes[nid]
        kids = [(nodes[c].total, c, False) for c in n.children if nodes[c].total > 0]
        rest = n.total - sum(k[0] for k in kids)
        if rest > 0 and kids:
            kids.append((rest, nid, True))
        kids.sort(key=lambda t: (-t[0], t[1], t[2]))
        return kids

    def lay(nid: str, x: float, y: float, w: float, h: float, depth: int) -> None:
        kids = items(nid)
        boxes = squarify([k[0] for k in kids], x, y, w, h)
        for (value, cid, own), (bx, by, bw, bh) in zip(kids, boxes):
            c = nodes[cid]
            hh = _hue(c.class_name or c.title)
            label = (f"{c.title} (own tensors)" if own else c.title)
            rects.append({"x": f"{bx:.2f}", "y": f"{by:.2f}", "w": f"{bw:.2f}", "h": f"{bh:.2f}", "depth": depth,
                          "hue": hh, "node": cid, "title": label, "total": value,
                          "tip": f"{label} · {c.class_name} · {fmt.count(value)} parameters",
                          "label": label if bw > 60 and bh > 16 else "", "lx": f"{bx + 4:.2f}",
                          "ly": f"{by + 13:.2f}", "own": own})
            pad = 18.0
            branching = len(nodes[cid].children) > 1
            if not own and depth + branching < max_depth and nodes[cid].children and bw > 40 and bh > 40:
                lay(cid, bx + 2, by + pad, bw - 4, bh - pad - 2, depth + branching)

    lay(root, 0, 0, width, height, 0)
    return rects


# ---------------------------------------------------------------------------------------------------------------------
# What a node page says


def _linear_dims(m: ModuleRecord) -> tuple[int, int] | None:
    attrs = dict(m.attributes)
    i, o = attrs.get("in_features"), attrs.get("out_features")
    if isinstance(i, int) and isinstance(o, int) and not isinstance(i, bool):
        return i, o
    return None


def _main_weight(m: ModuleRecord) -> TensorRecord | None:
    for t in m.tensors:
        if t.kind == WEIGHT and t.name == "weight":
            return t
    ws = [t for t in m.tensors if t.kind == WEIGHT]
    return ws[0] if len(ws) == 1 else None


def _logical(t: TensorRecord) -> tuple[int, ...]:
    return tuple(t.logical_shape) if t.logical_shape else tuple(t.shape)


def _calc(shape: Sequence[int], elements: int) -> str:
    if not shape:
        return f"1 = {fmt.count(elements)}"
    if len(shape) == 1:
        return fmt.count(shape[0])
    return " × ".join(fmt.count(d) for d in shape) + f" = {fmt.count(elements)}"


_DTYPE_BYTES = {"float32": "4 bytes", "float16": "2 bytes", "bfloat16": "2 bytes", "float64": "8 bytes",
                "float8_e4m3fn": "1 byte", "float8_e5m2": "1 byte", "float8_e8m0fnu": "1 byte", "int8": "1 byte",
                "uint8": "1 byte", "int64": "8 bytes", "int32": "4 bytes", "float4_e2m1fn_x2": "1 byte per 2 values"}


def _component(t: TensorRecord) -> str:
    shape = _logical(t)
    if t.kind == WEIGHT:
        if len(shape) == 2:
            return f"Weight matrix `{t.name}`" if t.name != "weight" else "Weight matrix"
        if len(shape) == 1:
            return f"Weight vector `{t.name}`" if t.name != "weight" else "Weight vector"
        if len(shape) >= 3:
            return f"Stacked weights `{t.name}`"
        return f"Scalar `{t.name}`"
    return {BIAS: "Bias" if t.name == "bias" else f"Bias `{t.name}`", SCALE: f"Block scales `{t.name}`",
            TABLE: f"Integer table `{t.name}`", BUFFER: f"Buffer `{t.name}`", ALIAS: f"Alias `{t.name}`"}.get(t.kind,
                                                                                                        t.name)


def describe(m: ModuleRecord, names: DimNames, child_count: int) -> str:
    """A one-line description generated from the module and its shapes."""
    lin = _linear_dims(m)
    w = _main_weight(m)
    cls = m.class_name
    low = cls.lower()
    if lin:
        i, o = lin
        inn = names.name(i, dict(m.dims))
        src = f"the {fmt.count(i)} {'(' + inn + ') ' if inn and inn != names.width_key else ''}input features"
        if names.width is not None and i == names.width:
            src = f"the model width ({fmt.count(i)})"
        dst = f"the model width ({fmt.count(o)})" if names.width is not None and o == names.width else \
            f"{fmt.count(o)} output features"
        return f"Map {src} to {dst}."
    if "embed" in low and w is not None and len(_logical(w)) == 2:
        n, d = _logical(w)
        return f"Look up one of {fmt.count(n)} vectors of width {fmt.count(d)} per token."
    if "norm" in low:
        if w is not None and len(_logical(w)) == 1:
            return f"Normalize the last {fmt.count(_logical(w)[0])} features, then scale them by a learned vector."
        if m.calls and m.calls[0].inputs:
            return f"Normalize the last {m.calls[0].inputs[0][-1]} features (no learned scale)."
        return "Normalize its input (no learned scale)."
    if cls in _CONTAINERS:
        return f"A {cls} of {len(m.children)} modules."
    if m.doc:
        first = re.split(r"(?<=[.!?])\s", m.doc.strip(), maxsplit=1)[0]
        return first if len(first) <= 240 else first[:239] + "…"
    if m.calls and m.calls[0].inputs and m.calls[0].outputs:
        c = m.calls[0]
        return f"{cls}: {names.shape(c.inputs[0], dict(m.dims))} in, {names.shape(c.outputs[0], dict(m.dims))} out."
    parts = f"{child_count} parts, " if child_count else ""
    return f"{cls}: {parts}{fmt.count(m.totals.parameters)} parameters per instance."


def _instances(n: Node) -> int:
    """How many instances the node stands for: the product of its multiplicity factors."""
    return math.prod(max(1, int(x["factor"])) for x in n.multiplicity) if n.multiplicity else 1


def _mult_text(mult: Sequence[Mapping[str, Any]]) -> str:
    return " ".join(f"× {fmt.count(int(x['factor']))} {x['name']}".rstrip() for x in mult if int(x["factor"]) != 1)


class _CheckpointIndex:
    """The checkpoint comparison's per-module verdicts, summed over every ancestor path (for groups of modules)."""

    def __init__(self, ck: Mapping[str, Any]):
        self.ck = ck
        self.direct: dict[str, Mapping[str, Any]] = {}
        self.agg: dict[str, dict[str, Any]] = {}
        for path, v in sorted((ck.get("modules") or {}).items()):
            if not isinstance(v, Mapping):
                continue
            self.direct[path] = v
            p: str | None = path
            while p is not None:
                a = self.agg.setdefault(p, {"model": 0, "checkpoint": 0, "verdicts": {}, "notes": []})
                a["model"] += int(v.get("model") or 0)
                a["checkpoint"] += int(v.get("checkpoint") or 0)
                vd = str(v.get("verdict", "?"))
                a["verdicts"][vd] = a["verdicts"].get(vd, 0) + 1
                if vd != "match":
                    for note in v.get("notes") or ():
                        if len(a["notes"]) < 6:
                            a["notes"].append(f"{path}: {note}")
                p = None if not p else (p.rsplit(".", 1)[0] if "." in p else "")

    def for_paths(self, paths: Sequence[str]) -> dict[str, Any] | None:
        out = {"model": 0, "checkpoint": 0, "verdicts": {}, "notes": [], "instances": 0, "bad": []}
        for p in paths:
            a = self.direct.get(p)
            if a is not None:
                a = {"model": int(a.get("model") or 0), "checkpoint": int(a.get("checkpoint") or 0),
                     "verdicts": {str(a.get("verdict", "?")): 1},
                     "notes": [f"{p}: {n}" for n in (a.get("notes") or ())] if a.get("verdict") != "match" else []}
            else:
                a = self.agg.get(p)
            if a is None:
                continue
            out["instances"] += 1
            out["model"] += a["model"]
            out["checkpoint"] += a["checkpoint"]
            for k, v in a["verdicts"].items():
                out["verdicts"][k] = out["verdicts"].get(k, 0) + v
            if any(k != "match" for k in a["verdicts"]):
                if len(out["bad"]) < 5:
                    out["bad"].append(p)
            for n in a["notes"]:
                if len(out["notes"]) < 6:
                    out["notes"].append(n)
        return out if out["instances"] else None


def checkpoint_text(agg: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if agg is None:
        return None
    bad = {k: v for k, v in agg["verdicts"].items() if k != "match"}
    if not bad and agg["model"] == agg["checkpoint"]:
        return {"ok": True, "text": "the model total matches the checkpoint’s tensors "
                                    f"({fmt.count(agg['checkpoint'])} parameters).", "notes": [], "paths": []}
    diff = agg["model"] - agg["checkpoint"]
    what = ", ".join(f"{v:,} {k}" for k, v in sorted(bad.items()))
    text = (f"mismatch: the model holds {fmt.count(agg['model'])} parameters, the checkpoint "
            f"{fmt.count(agg['checkpoint'])} ({'+' if diff > 0 else ''}{fmt.count(diff)})"
            + (f"; {what}" if what else "") + ".")
    return {"ok": False, "text": text, "notes": list(agg["notes"]), "paths": list(agg["bad"])}


# ---------------------------------------------------------------------------------------------------------------------
# One model's pages


def _owner(index: Mapping[str, ModuleRecord], path: str) -> tuple[ModuleRecord | None, str]:
    """The nearest ancestor that is not a container, and the attribute name it builds `path` under."""
    segs = path.split(".")
    i = len(segs) - 1
    while i > 0:
        anc = ".".join(segs[:i])
        m = index.get(anc)
        if m is not None and m.class_name not in _CONTAINERS:
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
        self.names = DimNames.for_record(record)  # config fields, renamed by the names file's [dims]
        self.upstream = Upstream(record, source_url)
        ck = record.extra("checkpoint")
        self.checkpoint = ck if isinstance(ck, Mapping) else None
        self.ck_index = _CheckpointIndex(self.checkpoint) if self.checkpoint else None
        probe = record.extra("probe")
        self.probe = (probe.get("modules") or {}) if isinstance(probe, Mapping) else {}
        self.annotations = annotations or {}

    # --- pieces

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

    def code_excerpts(self, n: Node, m: ModuleRecord) -> list[dict[str, Any]]:
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
        lin = _linear_dims(m)
        has_bias = any(t.kind == BIAS for t in m.tensors)
        for t in m.tensors:
            if t.kind == ALIAS:
                rows.append({"component": _component(t), "calc": f"the same tensor as {t.alias_of}",
                             "params": "0", "kind": "alias"})
                continue
            shape = _logical(t)
            is_param = t.kind in (WEIGHT, BIAS)
            rows.append({"component": _component(t) + ("" if is_param else " (not parameters)"),
                         "calc": _calc(shape, t.elements), "params": fmt.count(t.elements) if is_param else "—",
                         "kind": t.kind})
        if lin and not has_bias and _main_weight(m) is not None:
            rows.append({"component": "Bias", "calc": "none", "params": "0", "kind": "none"})
        for cid in n.children:
            c = self.nodes[cid]
            per_parent = max(1, _instances(c) // _instances(n))
            calc = f"{fmt.count(c.per_instance)} × {per_parent}" if per_parent > 1 else fmt.count(c.per_instance)
            rows.append({"component": c.title, "calc": calc, "params": fmt.count(c.per_instance * per_parent),
                         "kind": "child", "href": c.file})
        rows.append({"component": "Per-instance total", "calc": "", "params": fmt.count(n.per_instance),
                     "kind": "total"})

        # notes
        w = _main_weight(m)
        if lin and w is not None:
            if not has_bias:
                notes.append("This projection has no bias parameter.")
            i, o = lin
            if _logical(w) == (o, i):
                notes.append(f"The module holds the weight output by input, [out, in] = [{fmt.count(o)}, "
                             f"{fmt.count(i)}].")
            elif _logical(w) == (i, o):
                notes.append(f"The weight is stored input by output, [in, out] = [{fmt.count(i)}, {fmt.count(o)}].")
        stored: dict[str, list[str]] = {}  # dtype -> parameter tensors, in order: one sentence per dtype
        for t in m.tensors:
            if t.kind in (WEIGHT, BIAS) and t.dtype:
                stored.setdefault(t.dtype, []).append(f"`{t.name}`")
        for dtype, names in stored.items():
            per = _DTYPE_BYTES.get(dtype)
            who = names[0] + " is" if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]} are"
            notes.append(f"{who} stored as {dtype}" + (f" ({per} per value)" if per else "") + ".")
        for t in m.tensors:
            if t.packing:
                notes.append(f"`{t.name}` packs {t.packing}: stored {fmt.shape(t.shape)} holds "
                             f"{fmt.shape(_logical(t))} values.")
            if t.kind == SCALE:
                target = next((x for x in m.tensors if x.name == t.scales), None)
                block = ""
                if target is not None and len(_logical(target)) == len(t.shape) and all(t.shape):
                    block = " × ".join(str(-(-a // b)) for a, b in zip(_logical(target), t.shape))
                    block = f", one per {block} block of `{target.name}`"
                notes.append(f"`{t.name}` {fmt.shape(t.shape)} {t.dtype}: {fmt.count(t.elements)} quantization "
                             f"scales{block} — not parameters.")
            if t.kind == TABLE:
                notes.append(f"`{t.name}` {fmt.shape(t.shape)} {t.dtype} is an integer table held as a parameter "
                             f"— not counted as parameters.")
            if t.kind == BUFFER:
                notes.append(f"`{t.name}` {fmt.shape(t.shape)} {t.dtype} is a "
                             f"{'persistent' if t.persistent else 'non-persistent'} buffer — not parameters.")
            if t.note:
                notes.append(f"`{t.name}`: {t.note}")
        if n.multiplicity:
            notes.append(f"Across {_mult_text(n.multiplicity)[2:]}: {fmt.count(n.total)} parameters "
                         f"({fmt.count(_instances(n))} instances).")
        if m.called is False:
            notes.append("The meta forward pass never called this module.")
        for a in m.assumptions:
            notes.append(f"Assumed: {a}")
        if m.kernels:
            notes.append("Stubbed kernels in its forward: " + ", ".join(m.kernels) + ".")
        return rows, notes

    def confirmed(self, n: Node) -> bool:
        hits = [self.probe[p] for p in n.paths if p in self.probe]
        return bool(hits) and all(isinstance(h, Mapping) and h.get("confirmed") for h in hits)

    def node_context(self, nid: str) -> dict[str, Any]:
        n = self.nodes[nid]
        m = self.index.get(n.representative) or self.record.modules[0]
        ann = self.annotations.get(nid) or {}
        crumbs = []
        p = n.parent
        while p is not None:
            a = self.nodes[p]
            factor = _instances(a) // _instances(self.nodes[a.parent]) if a.parent is not None else 1
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
            shapes = {"inputs": [self.names.shape(s, dict(m.dims)) for s in c.inputs],
                      "outputs": [self.names.shape(s, dict(m.dims)) for s in c.outputs],
                      "input_dtypes": list(c.input_dtypes), "output_dtypes": list(c.output_dtypes),
                      "calls": len(calls)}
        rows, notes = self.calculation(n, m)
        ck = checkpoint_text(self.ck_index.for_paths(n.paths)) if self.ck_index else None
        children = [{"title": (self.annotations.get(c) or {}).get("title") or self.nodes[c].title,
                     "href": self.nodes[c].file, "class_name": self.nodes[c].class_name,
                     "per_instance": fmt.count(self.nodes[c].per_instance), "count": self.nodes[c].count,
                     "total": fmt.count(self.nodes[c].total), "mult": _mult_text(self.nodes[c].multiplicity)}
                    for c in n.children]
        patterns = n.patterns
        return {
            "node": n, "module": m, "title": ann.get("title") or n.title,
            "description": ann.get("description") or (
                f"A repeating group of consecutive list items, {_mult_text(n.multiplicity[-1:])[2:]}: each group "
                f"holds the parts below, in order." if n.virtual and n.count > 1 else
                f"{len(n.children)} parts of {m.class_name} gathered under one title." if n.virtual  # names [groups]
                else describe(m, self.names, len(n.children))),
            "generated_description": not ann.get("description"),
            "crumbs": crumbs, "parent_href": self.nodes[n.parent].file if n.parent is not None else None,
            "call_sites": sites,
            "shapes": shapes, "per_instance": fmt.count(n.per_instance), "mult": _mult_text(n.multiplicity),
            "total": fmt.count(n.total), "count": _instances(n), "rows": rows, "notes": notes, "checkpoint": ck,
            "confirmed": self.confirmed(n), "excerpts": self.code_excerpts(n, m), "children": children,
            "patterns": patterns[:8], "more_patterns": max(0, len(patterns) - 8),
            "evidence": [self.evidence(c) for c in ann.get("claims", ())],
            "learned": m.totals.parameters > 0,
        }

    def evidence(self, claim: Mapping[str, Any]) -> dict[str, Any]:
        ex = self.excerpt(str(claim.get("id", "")), (claim["file"], claim["start"], claim["end"]),
                          {ln: "quoted" for ln in claim.get("quoted_lines", ())}, absolute=claim.get("absolute"))
        return {"id": claim.get("id"), "text": claim.get("text") or "", "file": claim["file"],
                "start": claim["start"], "end": claim["end"], "quote": claim.get("quote"), "excerpt": ex}

    # --- overview

    def layer_map(self) -> dict[str, Any] | None:
        """One cell per layer of the main layer list, coloured by the layer's kind, linking to its node."""
        from .layers import main_layer_list

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
        for nid, n in self.nodes.items():
            if nid == self.root:
                continue
            out.append({"depth": n.depth, "title": (self.annotations.get(nid) or {}).get("title") or n.title,
                        "href": n.file, "class_name": n.class_name, "total": fmt.count(n.total),
                        "mult": _mult_text(n.multiplicity)})
        return out

    def checkpoint_report(self) -> dict[str, Any]:
        """The overview's checkpoint section: the same views as `archviz check` prints (summary rows, modules that
        differ, checkpoint-only tensors by kind, notes), from the comparison kept in the records."""
        from .checkpoint.report import checkpoint_only_groups, note_groups, problem_modules, summary_rows

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
                          "total": fmt.count(self.nodes[c].total), "mult": _mult_text(self.nodes[c].multiplicity)}
                         for c in rootn.children],
            "config": [(k, json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v)
                       for k, v in sorted(src.config)][:400],
            "overrides": [(k, json.dumps(v, ensure_ascii=False)) for k, v in src.overrides],
            "versions": [f"{k} {v}" for k, v in sorted(src.versions)], "shapes": any(m.calls for m in r.modules),
            "shapes_pass": _shapes_pass(r.extra("shapes")),
            "excerpts": self.code_excerpts(rootn, self.index[rootn.representative])
            if rootn.representative in self.index else [],
        }

    def search_entries(self, model_index: int) -> list[list[Any]]:
        out = []
        for nid, n in self.nodes.items():
            title = (self.annotations.get(nid) or {}).get("title") or n.title
            out.append([model_index, title, n.class_name, f"{self.slug}/{n.file}", n.total,
                        n.patterns[:16]])
        return out


def _shapes_pass(info: Any) -> dict[str, Any] | None:
    """The meta forward pass's facts, for the overview: B, T, its notes (memo answers, the model's warnings)."""
    if not isinstance(info, dict) or "B" not in info:
        return None
    return {"B": info["B"], "T": info["T"], "clean": info.get("clean", True),
            "notes": [str(n) for n in info.get("notes") or ()]}


# ---------------------------------------------------------------------------------------------------------------------
# Writing: a temp folder beside the output, swapped into place


def _renameat2_exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd = -100
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), 2) == 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale(parent: str, base: str) -> None:
    prefix = f".{base}.archviz-"
    try:
        entries = os.listdir(parent)
    except OSError:
        return
    for e in entries:
        if not e.startswith(prefix):
            continue
        m = re.match(r"^\.(.+)\.archviz-(?:tmp|old)-(\d+)(?:-\d+)?$", e)
        if m and m.group(1) == base and not _pid_alive(int(m.group(2))):
            shutil.rmtree(os.path.join(parent, e), ignore_errors=True)


def _write_file(folder: str, rel: str, data: bytes) -> None:
    path = os.path.join(folder, *rel.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _check_target(output: str) -> None:
    if os.path.lexists(output):
        if not os.path.isdir(output) or os.path.islink(output):
            raise ArchvizError(f"{output}: exists and is not a folder", hint="choose another -o folder")
        if os.listdir(output) and not os.path.isfile(os.path.join(output, MARKER)):
            raise ArchvizError(f"{output}: a folder that is not an archviz site; refusing to replace it",
                               hint="give an empty or new folder, or a folder an earlier `archviz build` wrote")


def write_site(files: Mapping[str, bytes], output: str) -> None:
    """Write every file into a temp folder beside `output`, then swap it into place (atomic on Linux)."""
    output = os.path.abspath(output)
    parent, base = os.path.dirname(output), os.path.basename(output)
    os.makedirs(parent, exist_ok=True)
    _check_target(output)
    _clean_stale(parent, base)
    tmp = os.path.join(parent, f".{base}.archviz-tmp-{os.getpid()}")
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.mkdir(tmp)
    try:
        for rel in sorted(files):
            _write_file(tmp, rel, files[rel])
        os.chmod(tmp, 0o755)
        if os.path.isdir(output):
            if _renameat2_exchange(tmp, output):
                shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous site
                return
            old = os.path.join(parent, f".{base}.archviz-old-{os.getpid()}")
            os.rename(output, old)
            try:
                os.rename(tmp, output)
            except BaseException:
                os.rename(old, output)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, output)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ---------------------------------------------------------------------------------------------------------------------
# The site


@dataclass(frozen=True)
class SiteResult:
    output: str
    pages: int
    bytes: int
    files: int


def templates_folder() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.environ.get("ARCHVIZ_TEMPLATES"), os.path.join(here, "templates"),
                 os.path.join(os.path.dirname(here), "templates")):
        if cand and os.path.isfile(os.path.join(cand, "node.html")):
            return cand
    raise ArchvizError("the site templates are missing", hint="reinstall archviz (templates/ beside the package)")


def _environment(folder: str) -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folder), autoescape=True, undefined=jinja2.StrictUndefined,
                             auto_reload=False,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["count"] = fmt.count
    env.filters["human"] = fmt.human
    env.filters["nbytes"] = fmt.nbytes
    env.filters["code"] = _inline_code
    return env


def _inline_code(text: str) -> Any:
    """`name` -> <code>name</code>, everything else escaped."""
    from markupsafe import Markup, escape

    return Markup(re.sub(r"`([^`\n]+)`", r"<code>\1</code>", str(escape(str(text)))))


def _slug(name: str, used: set[str]) -> str:
    base = _SAFE.sub("-", name.lower()).strip("-.") or "model"
    base = base[:60]
    slug = base
    i = 2
    while slug in used or slug in ("static", "code", "index.html", "search.js"):
        slug = f"{base}-{i}"
        i += 1
    used.add(slug)
    return slug


def _static_files(folder: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    static = os.path.join(folder, "static")
    for dirpath, dirnames, filenames in os.walk(static):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, folder).replace(os.sep, "/")
            with open(full, "rb") as f:
                out[rel] = f.read()
    from pygments.formatters import HtmlFormatter

    css = HtmlFormatter(style="default").get_style_defs(".hl") + "\n"
    dark = HtmlFormatter(style="monokai").get_style_defs("html.dark .hl") + "\n"
    out["static/pygments.css"] = (css + "@media (prefers-color-scheme: dark) {\n" + _prefix_dark(dark) + "}\n").encode()
    return out


def _prefix_dark(css: str) -> str:
    # monokai rules scoped to the dark colour scheme; the background stays the site's own
    lines = [ln for ln in css.splitlines() if ln.startswith("html.dark .hl .")]
    return "\n".join(ln.replace("html.dark ", "") for ln in lines) + "\n"


def render_site(records: Sequence[ModelRecord], *, annotations: Any = None, source_url: str | None = None,
                templates: str | None = None, progress: Progress | None = None) -> dict[str, bytes]:
    """Every file of the site, by relative path (pure: reads source files, writes nothing)."""
    if not records:
        raise ArchvizError("no models to render", hint="give at least one SOURCE")
    if source_url is not None and "{path}" not in source_url:
        raise ArchvizError(f"--source-url {source_url!r}: the template has no {{path}}",
                           hint="write e.g. https://github.com/OWNER/REPO/blob/REV/{path}#L{start}-L{end}")
    env = _environment(templates or templates_folder())
    code = CodeBank()
    used: set[str] = set()
    models: list[ModelSite] = []
    for r in records:
        slug = _slug(r.source.name, used)
        ms = ModelSite(r, slug, code, source_url, None)
        models.append(ms)
    if annotations is not None:
        from .annotations import resolve_annotations

        resolved = resolve_annotations(annotations, models, code)
        for ms in models:
            ms.annotations = resolved.get(ms.slug, {})
    from .names_tables import node_descriptions

    for ms in models:  # a names file's [descriptions], where no annotation gives one
        for nid, text in node_descriptions(ms.record.extra("grouping")).items():
            slot = ms.annotations.setdefault(nid, {"title": None, "description": None, "claims": []})
            slot["description"] = slot["description"] or text

    files: dict[str, bytes] = {}
    total_pages = sum(len(ms.nodes) for ms in models) + 1
    done = 0
    site = {"models": [{"name": ms.record.source.name, "slug": ms.slug} for ms in models]}
    node_t = env.get_template("node.html")
    model_t = env.get_template("model.html")
    search: list[list[Any]] = []
    index_models = []
    for mi, ms in enumerate(models):
        ov = ms.overview_context()
        page_code: set[str] = {e["key"] for e in ov["excerpts"]} | {ev["excerpt"]["key"] for ev in ov["evidence"]
                                                                    if ev["excerpt"]}
        files[f"{ms.slug}/index.html"] = model_t.render(site=site, root="../", mroot="", model=ms.slug, o=ov,
                                                        code_keys=sorted(page_code), page_kind="model",
                                                        up="../index.html").encode()
        done += 1
        for nid, n in ms.nodes.items():
            if nid == ms.root:
                continue
            ctx = _render_node_context(ms, nid)
            keys = sorted({e["key"] for e in ctx["excerpts"]} |
                          {ev["excerpt"]["key"] for ev in ctx["evidence"] if ev["excerpt"]})
            mroot = "../" * n.file.count("/")
            files[f"{ms.slug}/{n.file}"] = node_t.render(site=site, root="../" + mroot, mroot=mroot, model=ms.slug,
                                                         c=ctx, code_keys=keys, page_kind="node",
                                                         up=mroot + (ctx["parent_href"] or "index.html")).encode()
            done += 1
            if progress is not None and done % 50 == 0:
                progress(done, total_pages)
        search.extend(ms.search_entries(mi))
        index_models.append({"name": ms.record.source.name, "slug": ms.slug, "spec": ms.record.source.spec,
                             "kind": ms.record.source.kind, "class": ms.record.source.model_class,
                             "parameters": fmt.count(ms.record.summary.parameters),
                             "human": fmt.human(ms.record.summary.parameters),
                             "active": fmt.count(ms.record.summary.active_parameters)
                             if ms.record.summary.active_parameters is not None else None,
                             "bytes": fmt.nbytes(ms.record.summary.bytes), "nodes": len(ms.nodes),
                             "modules": fmt.count(ms.record.summary.modules),
                             "checkpoint": (ms.checkpoint or {}).get("verdict") if ms.checkpoint else None})
    files["index.html"] = env.get_template("index.html").render(site=site, root="", mroot="", model=None,
                                                                models=index_models, code_keys=[], page_kind="index",
                                                                up=None).encode()
    for key in code.used():
        files[f"code/{key}.js"] = code.script(key).encode()
    files["search.js"] = ("window.ARCHVIZ_SEARCH=" + _js_json(
        {"models": [[ms.slug, ms.record.source.name] for ms in models], "nodes": search}) + ";\n").encode()
    files.update(_static_files(templates or templates_folder()))
    files[MARKER] = (json.dumps({"generator": "archviz", "site": 1, "models": [ms.slug for ms in models]},
                                sort_keys=True) + "\n").encode()
    if progress is not None:
        progress(total_pages, total_pages)
    return files


def _render_node_context(ms: ModelSite, nid: str) -> dict[str, Any]:
    return ms.node_context(nid)


def build_site(records: Sequence[ModelRecord], output: str, *, annotations: Any = None,
               source_url: str | None = None, templates: str | None = None,
               progress: Progress | None = None) -> SiteResult:
    """Render records into a static site at `output` (replaced atomically; the previous site survives a failure)."""
    _check_target(os.path.abspath(output))
    with collector_paused():  # many short strings and dicts, no cycles, on top of the records' heap
        files = render_site(records, annotations=annotations, source_url=source_url, templates=templates,
                            progress=progress)
    write_site(files, output)
    pages = sum(1 for k in files if k.endswith(".html"))
    return SiteResult(output=output, pages=pages, bytes=sum(len(v) for v in files.values()), files=len(files))


__all__ = ["build_site", "render_site", "write_site", "SiteResult", "compress_paths", "expand_pattern", "build_nodes",
           "Node", "treemap", "squarify", "DimNames", "MARKER"]

"""The explorer's diff page (`archviz diff A B` given a site): both models' sites, plus `diff.html`
(templates/diff.html, on the site's one layout and stylesheet) with the two grouped trees side by side, changes coloured, each changed node
linking to both models' node pages, and the diff's entries. Pure: returns the files by relative path; the CLI writes
them (atomically, as `archviz build` does). No torch; every name from the records is escaped by the template."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from ... import format as fmt
from ...diff.result import Folded, ModelDiff
from ...records import ModelRecord
from ...files.sanitize import printable
from ...diff.summary import lines_only
from ..diff import signed

# How a node reads, strongest first: what it is itself, else what it holds.
_RANK = {"removed": 4, "added": 4, "renamed": 3, "changed": 2, "holds": 1, "": 0}


class _Side:
    """One model's nodes (as its site names them), their pages, and each node's status in the diff."""

    def __init__(self, record: ModelRecord, slug: str, status_of: Mapping[str, str], files: Mapping[str, bytes]):
        from .nodes import build_nodes, page_names

        self.slug = slug
        self.nodes, self.root = build_nodes(record)
        page_names(self.nodes, self.root)
        self.node_of: dict[str, str] = {}  # path -> the most specific node holding it (as the site's pages do)
        for nid, n in self.nodes.items():
            for p in n.paths:
                held = self.node_of.get(p)
                if held is None or self.nodes[held].depth < n.depth:
                    self.node_of[p] = nid
        self.files = files
        own: dict[str, str] = {}
        for path, st in status_of.items():
            nid = self.node_of.get(path)
            if nid is not None and _RANK[st] > _RANK[own.get(nid, "")]:
                own[nid] = st
        self.status: dict[str, str] = dict(own)
        for nid in reversed(list(self.nodes)):  # post-order: a node holds what its children are or hold
            n = self.nodes[nid]
            if nid not in own and any(self.status.get(c) for c in n.children):
                self.status[nid] = "holds"

    def href(self, path: str) -> str | None:
        nid = self.node_of.get(path)
        if nid is None:
            return None
        rel = f"{self.slug}/{self.nodes[nid].file}"
        return rel if rel in self.files else None


def _statuses(d: ModelDiff, a: ModelRecord, b: ModelRecord) -> tuple[dict[str, str], dict[str, str]]:
    sa: dict[str, str] = {}
    sb: dict[str, str] = {}
    for n in d.nodes:
        sa[n.a] = sb[n.b] = "changed"
    for p in d.renamed:
        sa[p.a] = sb[p.b] = "renamed"
    for side, tops, record in ((sa, d.removed, a), (sb, d.added, b)):
        if not tops:
            continue
        prefixes = tuple(f"{t.path}." for t in tops)
        word = "removed" if side is sa else "added"
        for t in tops:
            side[t.path] = word
        for m in record.modules:
            if m.path.startswith(prefixes):
                side[m.path] = word
    return sa, sb


def _tree(side: _Side) -> list[dict[str, Any]]:
    """The side's nodes nested as its tree, each with its status, link and parameter total."""
    top: list[dict[str, Any]] = []
    stack: list[list[dict[str, Any]]] = [top]  # the open lists: a node of depth d goes into stack[d]
    for nid, n in side.nodes.items():
        del stack[n.depth + 1:]
        href = f"{side.slug}/{'index.html' if nid == side.root else n.file}"
        row = {"title": printable(n.title), "href": href if href in side.files else None,
               "total": fmt.count(n.total), "status": side.status.get(nid, ""), "children": []}
        stack[-1].append(row)
        stack.append(row["children"])
    return top


def _link(side: _Side, patterns: Sequence[str], paths: Sequence[str]) -> dict[str, Any]:
    text = printable(", ".join(p or "(model)" for p in patterns))  # "": the top module itself
    return {"text": text, "href": side.href(paths[0]) if paths else None}


def _entry_paths(f: Folded) -> tuple[list[str], list[str]]:
    """One path of the entry in A and in B, for its links (the first module it stands for)."""
    from ...paths import expand_pattern

    def first(patterns: Sequence[str]) -> list[str]:
        if not patterns:
            return []
        try:
            return expand_pattern(patterns[0])[:1]
        except ValueError:
            return []
    return first(f.a), first(f.b)


_NAMED = 5  # what changed, named on an entry's first line; every change's line opens on a click


def _aspects(f: Folded) -> str:
    """'class, tensor weight, calls and 3 more': what changed in the entry, one line."""
    names = list(dict.fromkeys(printable(c.what) for c in f.changes if c.aspect != "lines"))
    if not names:
        return "source lines only"
    return ", ".join(names[:_NAMED]) + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")


def _entries(d: ModelDiff, sa: _Side, sb: _Side) -> list[dict[str, Any]]:
    from ..diff import _what

    rows = []
    for f in d.folded:
        if lines_only(f):
            continue
        pa, pb = _entry_paths(f)
        what = [ln for x in _what(f) for ln in x.split("\n")]
        head, more = (what[:1], what[1:]) if f.kind != "changed" else ([_aspects(f)], what)
        la, lb = _link(sa, f.a, pa), _link(sb, f.b, pb)
        where = [lb] if f.kind == "added" else [la] if f.kind == "removed" or la["text"] == lb["text"] else [la, lb]
        rows.append({"kind": f.kind, "sides": [la, lb], "where": where,
                     "multiplicity": printable(f.multiplicity), "what": head, "more": more,
                     "parameters": signed(f.parameters) if f.parameters else ""})
    return rows


def _summary(d: ModelDiff) -> dict[str, Any] | None:
    """The summary's tables: config keys (the first few shown, the rest behind a click), stacks, headline totals."""
    s = d.summary
    if s is None:
        return None
    config = [{"key": printable(c.key), "a": printable(c.a) if c.a is not None else "absent",
               "b": printable(c.b) if c.b is not None else "absent"} for c in s.config]
    return {"config": config[:_CONFIG_SHOWN], "config_more": config[_CONFIG_SHOWN:],
            "stacks": [{"path": printable(x.path) or "(model)", "a": f"{x.a:,}" if x.a else "absent",
                        "b": f"{x.b:,}" if x.b else "absent", "kinds": printable(
                            "; ".join(f"{side}: {k}" for side, k in (("A", x.kinds_a), ("B", x.kinds_b)) if k))}
                       for x in s.stacks],
            "totals": [{"name": t.name, "a": fmt.count(t.a), "b": fmt.count(t.b), "delta": signed(t.delta),
                        "differs": t.differs} for t in s.totals],
            "lines_only": f"{s.lines_only:,}" if s.lines_only else ""}


_CONFIG_SHOWN = 8


def diff_page(d: ModelDiff, a: ModelRecord, b: ModelRecord, files: Mapping[str, bytes], slugs: Sequence[str],
              env: Any = None) -> str:
    """`diff.html` (templates/diff.html) for a site whose `files` hold both models' pages under `slugs`; `env`: the
    site's jinja environment (else the installed templates')."""
    from .templates import environment, templates_folder

    status_a, status_b = _statuses(d, a, b)
    sa = _Side(a, slugs[0], status_a, files)
    sb = _Side(b, slugs[1], status_b, files)
    page = {"verdict": "identical" if d.identical else "different", "a": printable(d.a), "b": printable(d.b),
            "a_name": printable(d.a_name), "b_name": printable(d.b_name), "matched": f"{d.matched:,}",
            "compared": ", ".join(d.compared), "ignored": ", ".join(d.ignored),
            "notes": [printable(n) for n in d.notes],
            "totals": [{"name": t.name, "a": fmt.count(t.a), "b": fmt.count(t.b), "delta": signed(t.delta)}
                       for t in d.totals if t.differs or t.name in ("parameters", "modules")]}
    sides = [{"slug": side.slug, "title": printable(f"{ab} · {name}"), "tree": _tree(side)}
             for side, ab, name in ((sa, "A", d.a_name), (sb, "B", d.b_name))]
    env = env or environment(templates_folder())
    return env.get_template("diff.html").render(root="", model=None, site=None, code_keys=[], page_kind="diff",
                                                up="index.html", d=page, sides=sides, summary=_summary(d),
                                                entries=_entries(d, sa, sb))


def render_diff_site(d: ModelDiff, a: ModelRecord, b: ModelRecord) -> dict[str, bytes]:
    """Both models' explorer sites and `diff.html` between them (the records grouped, as the explorer groups)."""
    from .pages import render_site
    from .write import MARKER

    files = render_site([a, b])
    slugs = json.loads(files[MARKER])["models"]
    files["diff.html"] = diff_page(d, a, b, files, slugs).encode()
    return files


__all__ = ["render_diff_site", "diff_page"]

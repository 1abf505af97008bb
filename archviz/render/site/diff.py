"""The explorer's diff page (`archviz diff A B --site DIR`): both models' sites, plus `diff.html` with the two
grouped trees side by side, changes coloured, each changed node linking to both models' node pages, and the diff's
entries. Pure: returns the files by relative path; the CLI writes them (atomically, as `archviz build` does). No
torch; every name from the records is HTML-escaped."""

from __future__ import annotations

import html
import json
from typing import Mapping, Sequence

from ... import format as fmt
from ...diff.result import Folded, ModelDiff
from ...records import ModelRecord
from ...files.sanitize import printable
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


def _tree(side: _Side, title: str) -> str:
    out = [f'<section class="diff-side"><h2>{html.escape(title)}</h2><ul class="diff-tree">']
    depth = 0
    for nid, n in side.nodes.items():
        while depth > n.depth:
            out.append("</ul></li>")
            depth -= 1
        st = side.status.get(nid, "")
        rel = "index.html" if nid == side.root else n.file
        href = f"{side.slug}/{rel}"
        label = html.escape(printable(n.title))
        link = f'<a href="{html.escape(href)}">{label}</a>' if href in side.files else label
        count = f' <span class="diff-n">{html.escape(fmt.count(n.total))}</span>'
        cls = f' class="diff-{st}"' if st else ""
        mark = f' <span class="diff-mark">{st}</span>' if st and st != "holds" else ""
        if n.children:
            out.append(f"<li{cls}>{link}{count}{mark}<ul>")
            depth += 1
        else:
            out.append(f"<li{cls}>{link}{count}{mark}</li>")
    while depth > 0:
        out.append("</ul></li>")
        depth -= 1
    out.append("</ul></section>")
    return "".join(out)


def _links(side: _Side, patterns: Sequence[str], paths: Sequence[str]) -> str:
    if not patterns:
        return "—"
    text = html.escape(printable(", ".join(p or "(model)" for p in patterns)))  # "": the top module itself
    href = side.href(paths[0]) if paths else None
    return f'<a href="{html.escape(href)}">{text}</a>' if href else text


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


def _entries(d: ModelDiff, sa: _Side, sb: _Side) -> str:
    from ..diff import _what

    rows = ['<table class="diff-entries"><thead><tr><th></th><th>A</th><th>B</th><th>×</th><th>what</th>'
            '<th>parameters</th></tr></thead><tbody>']
    for f in d.folded:
        pa, pb = _entry_paths(f)
        what = "<br>".join(html.escape(x).replace("\n", "<br>") for x in _what(f))
        params = signed(f.parameters) if f.parameters else ""
        rows.append(f'<tr class="diff-{f.kind}"><td>{f.kind}</td><td>{_links(sa, f.a, pa)}</td>'
                    f"<td>{_links(sb, f.b, pb)}</td><td>{html.escape(printable(f.multiplicity))}</td><td>{what}</td>"
                    f'<td class="num">{html.escape(params)}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


_STYLE = """
.diff-cols{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:1.5rem}
@media (max-width:640px){.diff-cols{grid-template-columns:minmax(0,1fr)}}
.diff-entries{width:100%;table-layout:fixed}
.diff-entries th:nth-child(1){width:5.5rem}.diff-entries th:nth-child(4){width:6rem}
.diff-entries th:nth-child(6){width:6.5rem}
.diff-entries td,.diff-tree li,.diff-side h2,main>p{overflow-wrap:anywhere}
.diff-tree,.diff-tree ul{list-style:none;padding-left:1.1rem;margin:0}
.diff-tree li{margin:.1rem 0}
.diff-n{color:var(--dim);font-size:.85em}
.diff-mark{font-size:.75em;padding:0 .3em;border-radius:3px}
.diff-added>a,.diff-added>.diff-mark,tr.diff-added td:first-child{color:#1a7f37}
.diff-removed>a,.diff-removed>.diff-mark,tr.diff-removed td:first-child{color:#cf222e}
.diff-renamed>a,.diff-renamed>.diff-mark,tr.diff-renamed td:first-child{color:#9a6700}
.diff-changed>a,.diff-changed>.diff-mark,tr.diff-changed td:first-child{color:#0969da}
.diff-added>.diff-mark{background:#dafbe1}.diff-removed>.diff-mark{background:#ffebe9}
.diff-renamed>.diff-mark{background:#fff8c5}.diff-changed>.diff-mark{background:#ddf4ff}
.diff-holds>a{font-style:italic}
.diff-tree a{text-decoration:underline;text-underline-offset:.15em}
@media (prefers-color-scheme:dark){
.diff-added>a,.diff-added>.diff-mark,tr.diff-added td:first-child{color:#6fdd8b}
.diff-removed>a,.diff-removed>.diff-mark,tr.diff-removed td:first-child{color:#ff9492}
.diff-renamed>a,.diff-renamed>.diff-mark,tr.diff-renamed td:first-child{color:#e3b341}
.diff-changed>a,.diff-changed>.diff-mark,tr.diff-changed td:first-child{color:#79c0ff}
.diff-added>.diff-mark{background:#0f2e19}.diff-removed>.diff-mark{background:#3a1416}
.diff-renamed>.diff-mark{background:#33280a}.diff-changed>.diff-mark{background:#0c2a45}}
.diff-entries td{vertical-align:top}.diff-entries td.num{text-align:right;white-space:nowrap}
"""


def diff_page(d: ModelDiff, a: ModelRecord, b: ModelRecord, files: Mapping[str, bytes], slugs: Sequence[str]) -> str:
    status_a, status_b = _statuses(d, a, b)
    sa = _Side(a, slugs[0], status_a, files)
    sb = _Side(b, slugs[1], status_b, files)
    verdict = "identical" if d.identical else "different"
    totals = "".join(f"<tr><td>{html.escape(t.name)}</td><td class=num>{fmt.count(t.a)}</td>"
                     f"<td class=num>{fmt.count(t.b)}</td><td class=num>{signed(t.delta)}</td></tr>"
                     for t in d.totals if t.differs or t.name in ("parameters", "modules"))
    notes = "".join(f"<p class=note>{html.escape(printable(n))}</p>" for n in d.notes)
    ignored = f"; ignored: {html.escape(', '.join(d.ignored))}" if d.ignored else ""
    return f"""<!doctype html>
<html lang="en" data-root="" data-page="diff">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="archviz">
<link rel="icon" href="data:,">
<title>archviz diff: {html.escape(printable(d.a_name))} → {html.escape(printable(d.b_name))}</title>
<link rel="stylesheet" href="static/site.css">
<style>{_STYLE}</style>
</head>
<body>
<header class="top"><a class="brand" href="index.html">archviz</a><span class="sep">/</span><span>diff</span></header>
<main>
<h1>diff: <span class="diff-verdict diff-{verdict}">{verdict}</span></h1>
<p>A = <a href="{html.escape(sa.slug)}/index.html">{html.escape(printable(d.a))}</a> ·
B = <a href="{html.escape(sb.slug)}/index.html">{html.escape(printable(d.b))}</a> ·
{d.matched:,} modules matched · compared: {html.escape(', '.join(d.compared))}{ignored}</p>
{notes}
<table class="diff-totals"><thead><tr><th>total</th><th>A</th><th>B</th><th>B − A</th></tr></thead>
<tbody>{totals}</tbody></table>
<h2>What changed</h2>
{_entries(d, sa, sb) if d.folded else "<p>Nothing, in what was compared.</p>"}
<div class="diff-cols">
{_tree(sa, "A · " + d.a_name)}
{_tree(sb, "B · " + d.b_name)}
</div>
</main>
<footer>Generated by archviz diff from the records of both models. Colours: added, removed, renamed, changed;
italic: holds a change.</footer>
</body>
</html>
"""


def render_diff_site(d: ModelDiff, a: ModelRecord, b: ModelRecord) -> dict[str, bytes]:
    """Both models' explorer sites and `diff.html` between them (the records grouped, as the explorer groups)."""
    from .pages import render_site
    from .write import MARKER

    files = render_site([a, b])
    slugs = json.loads(files[MARKER])["models"]
    files["diff.html"] = diff_page(d, a, b, files, slugs).encode()
    return files


__all__ = ["render_diff_site", "diff_page"]

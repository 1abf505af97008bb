"""The static HTML explorer: records -> a folder of pages that works from `file://`.

`build_site(records, output)` renders one site for one or more models:

    index.html                    the model index (every model, its totals)
    <model>/index.html            the model's overview: totals, checkpoint summary, layer map, treemap, node tree
    <model>/n/<node>.html         one page per node of the grouped tree (a stable name, derived from the node id);
                                  code excerpts are in the page, highlighted by pygments, readable without JS
    search.js                     the search index over every node of every model (raw module paths, compressed)
    static/                       CSS and JS (local: no CDN, no network, no fetch)

Pages come from jinja2 templates (`templates/`, autoescaped). Output is deterministic (no clocks, no absolute paths,
sorted everything) and atomic: the site is written to a temp folder beside the output and swapped into place, so an
interrupted build leaves the previous site as it was.

The tree is the grouping stage's (`record.extra("grouping")`) when present; otherwise the raw module tree with runs of
structurally identical list items folded into one node (one page per kind of item, never one per raw module).
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ... import format as fmt
from ...errors import ArchvizError, PYTHON_WORDS, option
from ...gcpause import collector_paused
from ...records import (
    ModelRecord,
)
from .code import CodeBank, js_json
from .context import ModelSite
from .nodes import SAFE_NAME
from .templates import environment, static_files, templates_folder
from .write import MARKER, check_target, marker_bytes, spelled_files, write_site

Progress = Callable[[int, int], None]


# ---------------------------------------------------------------------------------------------------------------------
# Module paths, compressed: layers.{0-39}.ffn.experts.{0-383}.w1 stands for 15,360 paths


# ---------------------------------------------------------------------------------------------------------------------
# The node tree


# ---------------------------------------------------------------------------------------------------------------------
# Shapes with named dims

# ---------------------------------------------------------------------------------------------------------------------
# Source code: highlighted once per file, excerpts cut from it in the browser


# ---------------------------------------------------------------------------------------------------------------------
# Links to the exact lines upstream, at a pinned revision


# ---------------------------------------------------------------------------------------------------------------------
# Treemap (squarified), computed here so the picture is deterministic


# ---------------------------------------------------------------------------------------------------------------------
# What a node page says


# ---------------------------------------------------------------------------------------------------------------------
# One model's pages


# ---------------------------------------------------------------------------------------------------------------------
# Writing: a temp folder beside the output, swapped into place


# ---------------------------------------------------------------------------------------------------------------------
# The site


@dataclass(frozen=True)
class SiteResult:
    output: str
    pages: int
    bytes: int
    files: int


# A model's folder never takes a name the site's own files have: its folders, and no name of a page or script (a
# model named compare.html, a folder of that name, would have been written over the gallery's compare page; `a--b.html`
# over a pair's diff page)
_RESERVED = ("static", "code", ".archviz-site")
_FILE_LIKE = re.compile(r"\.(html?|js|json|css|svg|png|txt)$")


def slug_for(name: str, used: set[str]) -> str:
    """A model's folder in a site: its name made safe (never a name of the site's own files), numbered where `used`
    (updated) holds it already."""
    base = SAFE_NAME.sub("-", name.lower()).strip("-.") or "model"
    base = _FILE_LIKE.sub(lambda m: "-" + m.group(1), base[:60])
    slug = base
    i = 2
    while slug in used or slug in _RESERVED:
        slug = f"{base}-{i}"
        i += 1
    used.add(slug)
    return slug


def render_site(records: Sequence[ModelRecord], *, annotations: Any = None, source_url: str | None = None,
                templates: str | None = None, progress: Progress | None = None,
                slugs: Sequence[str] | None = None) -> dict[str, bytes]:
    """Every file of the site, by relative path (pure: reads source files, writes nothing). `slugs`: each record's
    folder, where the caller renders part of a larger site (the gallery); else made from the models' names."""
    if not records:
        raise ArchvizError("no models to render", hint="give at least one SOURCE")
    if source_url is not None and "{path}" not in source_url:
        raise ArchvizError(f"{option('source-url')} {source_url!r}: the template has no {{path}}",
                           hint="write e.g. https://github.com/OWNER/REPO/blob/REV/{path}#L{start}-L{end}")
    env = environment(templates or templates_folder())
    code = CodeBank()
    models = _model_sites(records, code, source_url, annotations, slugs)

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
        _tables(code, ov["excerpts"] + [ev["excerpt"] for ev in ov["evidence"]])
        page_code: set[str] = set()  # excerpts are in the page; no code/*.js to load
        files[f"{ms.slug}/index.html"] = model_t.render(site=site, root="../", mroot="", model=ms.slug, o=ov,
                                                        code_keys=sorted(page_code), page_kind="model",
                                                        up="../index.html").encode()
        done += 1
        for nid, n in ms.nodes.items():
            if nid == ms.root:
                continue
            ctx = _render_node_context(ms, nid)
            # in the order the page shows them: the call sites' excerpts, the module's own code, the sources
            ex = ctx["excerpts"]
            _tables(code, [e for e in ex if "own" not in e] + [e for e in ex if "own" in e] +
                    [ev["excerpt"] for ev in ctx["evidence"]])
            keys: list[str] = []
            mroot = "../" * n.file.count("/")
            files[f"{ms.slug}/{n.file}"] = node_t.render(site=site, root="../" + mroot, mroot=mroot, model=ms.slug,
                                                         c=ctx, code_keys=keys, page_kind="node",
                                                         up=mroot + (ctx["parent_href"] or "index.html")).encode()
            done += 1
            if progress is not None and done % 50 == 0:
                progress(done, total_pages)
        search.extend(ms.search_entries(mi))
        index_models.append(_index_entry(ms))
    files["index.html"] = env.get_template("index.html").render(site=site, root="", mroot="", model=None,
                                                                models=index_models, code_keys=[], page_kind="index",
                                                                up=None).encode()
    files["search.js"] = ("window.ARCHVIZ_SEARCH=" + js_json(
        {"models": [[ms.slug, ms.record.source.name] for ms in models], "nodes": search}) + ";\n").encode()
    files.update(static_files(templates or templates_folder()))
    files[MARKER] = marker_bytes(files, [ms.slug for ms in models])
    if progress is not None:
        progress(total_pages, total_pages)
    return files


def _model_sites(records: Sequence[ModelRecord], code: CodeBank, source_url: str | None,
                 annotations: Any, slugs: Sequence[str] | None = None) -> list[ModelSite]:
    """One ModelSite per record, each under its own slug (`slugs`, else made), with its annotations and a names
    file's [descriptions] where no annotation gives one."""
    used: set[str] = set()
    models: list[ModelSite] = []
    for i, r in enumerate(records):
        slug = slugs[i] if slugs is not None else slug_for(r.source.name, used)
        ms = ModelSite(r, slug, code, source_url, None)
        models.append(ms)
    if annotations is not None:
        from .annotations import resolve_annotations

        resolved = resolve_annotations(annotations, models, code)
        for ms in models:
            ms.annotations = resolved.get(ms.slug, {})
    from ...group.names_tables import node_descriptions

    for ms in models:  # a names file's [descriptions], where no annotation gives one
        for nid, text in node_descriptions(ms.record.extra("grouping")).items():
            slot = ms.annotations.setdefault(nid, {"title": None, "description": None, "claims": []})
            slot["description"] = slot["description"] or text
    return models


def _index_entry(ms: ModelSite) -> dict[str, Any]:
    """A model's row on the site's index page."""
    summary = ms.record.summary
    return {"name": ms.record.source.name, "slug": ms.slug, "spec": ms.record.source.spec,
            "kind": ms.record.source.kind, "class": ms.record.source.model_class,
            "parameters": fmt.count(summary.parameters), "human": fmt.human(summary.parameters),
            "active": fmt.count(summary.active_parameters) if summary.active_parameters is not None else None,
            "bytes": fmt.nbytes(summary.bytes), "nodes": len(ms.nodes), "modules": fmt.count(summary.modules),
            "checkpoint": (ms.checkpoint or {}).get("verdict") if ms.checkpoint else None}


def _tables(code: CodeBank, excerpts: Sequence[dict[str, Any] | None]) -> None:
    """Give each excerpt of one page its HTML table; a line's anchor goes to the first excerpt showing it."""
    from markupsafe import Markup

    ids: set[int] = set()
    for e in excerpts:
        if e:
            marks = [int(m) for m in e["marks"].split()]
            e["table"] = Markup(code.table(e["key"], e["start"], e["end"], marks, ids))


def _render_node_context(ms: ModelSite, nid: str) -> dict[str, Any]:
    return ms.node_context(nid)


def build_site(records: Sequence[ModelRecord], output: str, *, annotations: Any = None,
               source_url: str | None = None, templates: str | None = None,
               progress: Progress | None = None, words: Mapping[str, str] = PYTHON_WORDS) -> SiteResult:
    """Render records into a static site at `output` (replaced atomically; the previous site survives a failure);
    `words`: how its pages spell the options they name (archviz.errors.spelled; the CLI gives its flags)."""
    check_target(output)
    with collector_paused():  # many short strings and dicts, no cycles, on top of the records' heap
        files = render_site(records, annotations=annotations, source_url=source_url, templates=templates,
                            progress=progress)
    files = spelled_files(files, words)  # and counted as written
    write_site(files, output)
    pages = sum(1 for k in files if k.endswith(".html"))
    return SiteResult(output=output, pages=pages, bytes=sum(len(v) for v in files.values()), files=len(files))


__all__ = ["build_site", "render_site", "slug_for", "SiteResult"]

"""The gallery (`archviz gallery`): one site of many models. Pure: returns the files by relative path; the CLI writes
them atomically (archviz.render.site.write).

    index.html                   the table of every model (gallery_rows), sortable and filterable by site.js, read
                                 as it is without JavaScript; each row links to the model's explorer
    <model>/...                  each model's explorer, as `archviz build` renders several sources into one site
                                 (render_site; its own models index is the gallery's table)
    compare.html                 any two models side by side (site.js switches the pair; without it, the first two)
    compare-<a>--<b>.html        a named or derived pair, with ratios and layer recipes
    diff-<a>--<b>.html           that pair's full `archviz diff` page (render/site/diff.py)
    coverage.html                every model tried: in the index, partly, or failed, with the stage and the reason
    search.js, static/           as every site has them
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from markupsafe import Markup

from ...errors import ArchvizError
from ...records import ModelRecord
from ..cost import _ratio as ratio
from .code import js_json
from .gallery_rows import ARCHITECTURE, COLUMNS, blanks, model_row
from .gallery_reuse import Reuse
from .templates import environment, static_files, templates_folder
from .write import MARKER, marker_bytes

@dataclass
class Entry:
    """One model tried: its key (a transformers type, or the source as given), its records (None: not built),
    what the page says of its dtype, the overrides it was built with, and the stages that failed."""

    key: str
    record: ModelRecord | None
    dtype: str = "—"
    sets: Sequence[str] = ()
    failures: list[dict[str, str]] = field(default_factory=list)
    parent: str | None = None
    digest: str | None = None  # the sha256 of its records as cached: its pages are kept for the next run by it


@dataclass(frozen=True)
class Pair:
    a: str  # entry keys
    b: str
    why: str  # "pairs", or "transformers derives b from a"
    diff: Any = None  # the ModelDiff, or a function making it (called where the page is not reused): the diff page


def _anchor(key: str) -> str:
    from .nodes import SAFE_NAME

    return "m-" + SAFE_NAME.sub("-", key)


def _render_explorers(todo: list[tuple[Entry, str]], folder: str) -> dict[str, bytes]:
    """The explorers of the (entry, slug) in `todo`, in one site; an entry whose pages cannot be rendered is moved to
    the coverage page (stage render) and the rest rendered again."""
    from .pages import render_site

    todo = [(e, slug) for e, slug in todo if e.record is not None]
    if not todo:
        return {}
    try:
        return render_site([e.record for e, _ in todo], slugs=[slug for _, slug in todo], templates=folder)
    except Exception:  # noqa: BLE001 - find which model's pages fail, one at a time
        failed = 0
        for e, slug in todo:
            try:
                render_site([e.record], slugs=[slug], templates=folder)
            except Exception as x:  # noqa: BLE001
                why = x.line() if isinstance(x, ArchvizError) else f"{type(x).__name__}: {x}"
                e.failures.append({"stage": "render", "reason": why.splitlines()[0][:400] if why else "failed"})
                e.record = None
                failed += 1
        if not failed:  # no model fails alone: the failure is the site's, not a model's
            raise
        return _render_explorers(todo, folder)


_SEARCH = "window.ARCHVIZ_SEARCH="


def _explorers(built: list[Entry], folder: str, reuse: Reuse | None) -> tuple[dict[str, bytes], list[Entry],
                                                                             list[str]]:
    """Every built entry's explorer pages (each model's folder, from the previous run where `reuse` holds them) and
    the site's search.js; the entries still built after rendering, and their slugs."""
    from .pages import slug_for

    used: set[str] = set()
    slugs = {e.key: slug_for(e.record.source.name, used) for e in built}
    files: dict[str, bytes] = {}
    search: dict[str, list[Any]] = {}
    keys = {e.key: reuse.model_key(e, slugs[e.key]) if reuse else None for e in built}
    todo = []
    for e in built:
        kept = reuse.model(keys[e.key]) if reuse else None
        if kept is None:
            todo.append((e, slugs[e.key]))
        else:
            files.update(kept[0])
            search[e.key] = kept[1]
    made = _render_explorers(todo, folder)
    nodes = json.loads(made["search.js"].decode()[len(_SEARCH):].rstrip().rstrip(";"))["nodes"] if made else []
    rendered = [e for e, _ in todo if e.record is not None]
    for i, e in enumerate(rendered):
        prefix = slugs[e.key] + "/"
        mine = {rel: data for rel, data in made.items() if rel.startswith(prefix)}
        search[e.key] = [n[1:] for n in nodes if n[0] == i]
        files.update(mine)
        if reuse:
            reuse.rendered_model(keys[e.key], mine, search[e.key])
    built = [e for e in built if e.record is not None]
    files["search.js"] = (_SEARCH + js_json(
        {"models": [[slugs[e.key], e.record.source.name] for e in built],
         "nodes": [[i, *n] for i, e in enumerate(built) for n in search[e.key]]}) + ";\n").encode()
    return files, built, [slugs[e.key] for e in built]


def _figures(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, str]]:
    """The compare page's rows: the architecture side by side, then the index's other figures, then the texts."""
    heads = list(ARCHITECTURE) + [(k, h) for k, h, _ in COLUMNS if k not in dict(ARCHITECTURE)]
    out = [{"key": key, "head": head, "a": a[key]["text"], "b": b[key]["text"],
            "ratio": ratio(a[key]["value"], b[key]["value"])} for key, head in heads]
    for key, head in (("recipe", "layer recipe"), ("attention", "attention"), ("type", "type"), ("class", "class"),
                      ("dtype", "dtype")):
        out.append({"key": key, "head": head, "a": a[key], "b": b[key], "ratio": ""})
    return out


def coverage_counts(entries: Sequence[Entry]) -> dict[str, int]:
    """How many models were tried, indexed (complete or partly), failed, and the index's blank cells."""
    indexed = [e for e in entries if e.record is not None]
    blank = sum(len(blanks(model_row(e.record, key=e.key, slug=None, dtype_note=e.dtype, failures=e.failures)))
                for e in indexed)
    return {"tried": len(entries), "indexed": len(indexed), "complete": sum(1 for e in indexed if not e.failures),
            "partial": sum(1 for e in indexed if e.failures), "failed": len(entries) - len(indexed), "blank": blank}


def render_gallery(entries: list[Entry], pairs: Sequence[Pair] = (), *, defaults: str = "default configs",
                   templates: str | None = None, reuse: Reuse | None = None) -> dict[str, bytes]:
    """Every file of the gallery (pure: reads the templates and source files, and with `reuse` the pages of the
    previous run it keeps; writes nothing)."""
    folder = templates or templates_folder()
    built = [e for e in entries if e.record is not None]
    files, built, slugs = _explorers(built, folder, reuse) if built else ({}, [], [])
    env = environment(folder)
    rows = []
    for e, slug in zip(built, slugs):
        row = model_row(e.record, key=e.key, slug=slug, dtype_note=e.dtype, failures=e.failures, parent=e.parent)
        row["anchor"] = _anchor(e.key)
        rows.append(row)
    by_key = {r["key"]: r for r in rows}
    coverage = coverage_counts(entries)
    site = {"models": [{"name": r["name"], "slug": r["slug"]} for r in rows]}
    common = dict(site=site, root="", mroot="", model=None, code_keys=[], up=None)
    pair_links = []
    compare_t = env.get_template("gallery_compare.html")
    for p in pairs:
        a, b = by_key.get(p.a), by_key.get(p.b)
        if a is None or b is None:
            continue
        name = f"{a['slug']}--{b['slug']}.html"
        diff = f"diff-{name}" if p.diff is not None else None
        if diff is not None:
            files[diff] = _diff_page(p, files, [a["slug"], b["slug"]], env, built, reuse)
        files[f"compare-{name}"] = compare_t.render(**common, page_kind="compare", a=a, b=b, figures=_figures(a, b),
                                                    choose=None, diff=diff, data=None).encode()
        pair_links.append({"a": a["name"], "b": b["name"], "href": f"compare-{name}", "diff": diff, "why": p.why})
    if rows:
        a, b = rows[0], rows[1] if len(rows) > 1 else rows[0]
        data = {r["key"]: {"name": r["name"], "slug": r["slug"],
                           **{k: {"text": r[k]["text"], "value": r[k]["value"]}
                              for k in [c[0] for c in COLUMNS] + [c[0] for c in ARCHITECTURE]},
                           **{k: r[k] for k in ("recipe", "attention", "type", "class", "dtype")}} for r in rows}
        files["compare.html"] = compare_t.render(**common, page_kind="compare", a=a, b=b, figures=_figures(a, b),
                                                 choose=rows, diff=None, data=Markup(js_json(data))).encode()
    covered = []
    for e in entries:
        first = e.failures[0] if e.failures else {}
        row = by_key.get(e.key) if e.record is not None else None
        status = ("in the index" if not e.failures else "in the index, figures missing") if row else "failed"
        covered.append({"key": e.key, "anchor": _anchor(e.key), "slug": row["slug"] if row else None,
                        "status": status, "stage": first.get("stage"), "reason": first.get("reason"),
                        "sets": " ".join(s for s in e.sets if not s.startswith("dtype=")) or None,
                        "blanks": blanks(row) if row else []})
    files["coverage.html"] = env.get_template("gallery_coverage.html").render(
        **common, page_kind="coverage", entries=covered, coverage=coverage).encode()
    files["index.html"] = env.get_template("gallery.html").render(
        **common, page_kind="gallery", rows=rows, columns=COLUMNS, coverage=coverage, pairs=pair_links,
        defaults=defaults, checkpoints=any(r["checkpoint"] for r in rows)).encode()
    if "search.js" not in files:  # no model built: the pages still load their script
        files["search.js"] = b'window.ARCHVIZ_SEARCH={"models":[],"nodes":[]};\n'
    files.update(static_files(folder))
    files[MARKER] = marker_bytes(files, slugs)
    return files


def _diff_page(p: Pair, files: Mapping[str, bytes], slugs: list[str], env: Any, built: list[Entry],
               reuse: Reuse | None) -> bytes:
    """A pair's full diff page: the previous run's where `reuse` keeps it for the same two models' pages, else
    rendered (its diff made now where `p.diff` is a function)."""
    from .diff import diff_page

    ra, rb = (next(e for e in built if e.key == k) for k in (p.a, p.b))
    key = reuse.pair_key(reuse.model_key(ra, slugs[0]), reuse.model_key(rb, slugs[1]), slugs) if reuse else None
    kept = reuse.page(key) if reuse else None
    if kept is not None and kept[0] == f"diff-{slugs[0]}--{slugs[1]}.html":
        return kept[1]
    d = p.diff() if callable(p.diff) else p.diff
    data = diff_page(d, ra.record, rb.record, files, slugs, env).encode()
    if reuse:
        reuse.rendered_page(key, f"diff-{slugs[0]}--{slugs[1]}.html", data)
    return data


__all__ = ["render_gallery", "Entry", "Pair", "coverage_counts"]

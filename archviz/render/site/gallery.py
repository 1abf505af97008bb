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
from .gallery_rows import COLUMNS, model_row
from .templates import environment, templates_folder
from .write import MARKER, marker_bytes

@dataclass
class Entry:
    """One model tried: its key (a transformers type, or the source as given), its records (None: not built),
    what the page says of its dtype, the --set it was built with, and the stages that failed."""

    key: str
    record: ModelRecord | None
    dtype: str = "—"
    sets: Sequence[str] = ()
    failures: list[dict[str, str]] = field(default_factory=list)
    parent: str | None = None


@dataclass(frozen=True)
class Pair:
    a: str  # entry keys
    b: str
    why: str  # "--pairs", or "transformers derives b from a"
    diff: Any = None  # the ModelDiff, for the full diff page


def _anchor(key: str) -> str:
    from .nodes import SAFE_NAME

    return "m-" + SAFE_NAME.sub("-", key)


def _render_explorers(entries: list[Entry]) -> dict[str, bytes]:
    """The explorers of every built entry, in one site; an entry whose pages cannot be rendered is moved to the
    coverage page (stage render) and the rest rendered again."""
    from .pages import render_site

    built = [e for e in entries if e.record is not None]
    if not built:
        return {}
    try:
        return render_site([e.record for e in built])
    except Exception:  # noqa: BLE001 - find which model's pages fail, one at a time
        failed = 0
        for e in built:
            try:
                render_site([e.record])
            except Exception as x:  # noqa: BLE001
                why = x.line() if isinstance(x, ArchvizError) else f"{type(x).__name__}: {x}"
                e.failures.append({"stage": "render", "reason": why.splitlines()[0][:400] if why else "failed"})
                e.record = None
                failed += 1
        if not failed:  # no model fails alone: the failure is the site's, not a model's
            raise
        return _render_explorers(entries)


def _figures(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, str]]:
    out = [{"key": key, "head": head, "a": a[key]["text"], "b": b[key]["text"],
            "ratio": ratio(a[key]["value"], b[key]["value"])} for key, head, _ in COLUMNS]
    for key, head in (("recipe", "layer recipe"), ("attention", "attention"), ("type", "type"), ("class", "class"),
                      ("dtype", "dtype")):
        out.append({"key": key, "head": head, "a": a[key], "b": b[key], "ratio": ""})
    return out


def coverage_counts(entries: Sequence[Entry]) -> dict[str, int]:
    indexed = [e for e in entries if e.record is not None]
    return {"tried": len(entries), "indexed": len(indexed), "complete": sum(1 for e in indexed if not e.failures),
            "partial": sum(1 for e in indexed if e.failures), "failed": len(entries) - len(indexed)}


def render_gallery(entries: list[Entry], pairs: Sequence[Pair] = (), *, defaults: str = "default configs",
                   templates: str | None = None) -> dict[str, bytes]:
    """Every file of the gallery (pure: reads the templates and source files, writes nothing)."""
    files = _render_explorers(entries)
    slugs: list[str] = json.loads(files[MARKER])["models"] if files else []
    files.pop(MARKER, None)
    files.pop("index.html", None)  # the explorers' own models index: the gallery's table is the index
    env = environment(templates or templates_folder())
    built = [e for e in entries if e.record is not None]
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
        diff = None
        if p.diff is not None:
            from .diff import diff_page

            diff = f"diff-{name}"
            ra, rb = (next(e.record for e in built if e.key == k) for k in (p.a, p.b))
            files[diff] = diff_page(p.diff, ra, rb, files, [a["slug"], b["slug"]], env).encode()
        files[f"compare-{name}"] = compare_t.render(**common, page_kind="compare", a=a, b=b, figures=_figures(a, b),
                                                    choose=None, diff=diff, data=None).encode()
        pair_links.append({"a": a["name"], "b": b["name"], "href": f"compare-{name}", "diff": diff, "why": p.why})
    if rows:
        a, b = rows[0], rows[1] if len(rows) > 1 else rows[0]
        data = {r["key"]: {"name": r["name"], "slug": r["slug"],
                           **{k: {"text": r[k]["text"], "value": r[k]["value"]} for k, _, _ in COLUMNS},
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
                        "sets": " ".join(s for s in e.sets if not s.startswith("dtype=")) or None})
    files["coverage.html"] = env.get_template("gallery_coverage.html").render(
        **common, page_kind="coverage", entries=covered, coverage=coverage).encode()
    files["index.html"] = env.get_template("gallery.html").render(
        **common, page_kind="gallery", rows=rows, columns=COLUMNS, coverage=coverage, pairs=pair_links,
        defaults=defaults, checkpoints=any(r["checkpoint"] for r in rows)).encode()
    if "search.js" not in files:  # no model built: the pages still load their script
        files["search.js"] = b'window.ARCHVIZ_SEARCH={"models":[],"nodes":[]};\n'
    if not any(k.startswith("static/") for k in files):
        from .templates import static_files

        files.update(static_files(templates or templates_folder()))
    files[MARKER] = marker_bytes(files, slugs)
    return files


__all__ = ["render_gallery", "Entry", "Pair", "coverage_counts"]

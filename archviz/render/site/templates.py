"""The one jinja2 environment (autoescaped, strict), its filters, and the static files shipped with every site."""

from __future__ import annotations

import os
import re
from typing import Any

from ... import format as fmt
from ...errors import ArchvizError


def templates_folder() -> str:
    """The folder of the site's templates and static files: ``$ARCHVIZ_TEMPLATES``; else the package data of an
    installed archviz (``archviz/templates`` in the wheel, read through importlib.resources); else ``templates/`` at
    the top of a checkout."""
    from importlib.resources import files

    installed = files("archviz") / "templates"
    checkout = os.path.normpath(os.path.join(os.path.abspath(__file__), *([os.pardir] * 4), "templates"))
    for cand in (os.environ.get("ARCHVIZ_TEMPLATES"), os.fspath(installed) if isinstance(installed, os.PathLike)
                 else None, checkout):
        if cand and os.path.isfile(os.path.join(cand, "node.html")):
            return cand
    raise ArchvizError("the site templates are missing", hint="reinstall archviz (its wheel ships archviz/templates)")


def environment(folder: str) -> Any:
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


def static_files(folder: str) -> dict[str, bytes]:
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
    out["static/pygments.css"] = (css + "@media (prefers-color-scheme: dark) {\n.hl { background: transparent }\n" +
                                  _prefix_dark(dark) + "}\n").encode()
    return out


def _prefix_dark(css: str) -> str:
    # monokai rules scoped to the dark colour scheme; the background stays the site's own
    lines = [ln for ln in css.splitlines() if ln.startswith("html.dark .hl .")]
    return "\n".join(ln.replace("html.dark ", "") for ln in lines) + "\n"

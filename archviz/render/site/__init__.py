"""The static HTML explorer: records in, a folder of pages that works from `file://` out.

- `pages`: the site's files (`render_site`) and the atomic build (`build_site`); its docstring lists the layout;
- `context`: the data each page renders, per model (`ModelSite`);
- `nodes`, `paths`: the node tree and its page names; compact path lists for search;
- `describe`, `checkpoint_index`, `treemap`, `upstream`, `code`: a node's description, its checkpoint results, the
  overview's treemap, links to pinned upstream lines, and the highlighted source files;
- `annotations`: descriptions and evidence claims from an annotations file;
- `templates`, `write`: the jinja2 environment and static files; writing the folder atomically.
"""

from __future__ import annotations

from .code import CodeBank
from .context import ModelSite
from .nodes import Node, build_nodes
from .pages import SiteResult, build_site, render_site
from ...paths import compress_paths, expand_pattern
from .treemap import squarify, treemap
from .write import MARKER, write_site

__all__ = ["build_site", "render_site", "write_site", "SiteResult", "compress_paths", "expand_pattern", "build_nodes",
           "Node", "treemap", "squarify", "MARKER", "CodeBank", "ModelSite"]

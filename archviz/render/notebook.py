"""Results as HTML for a Jupyter notebook (`_repr_html_`): the grouped tree folded with `<details>` (no JavaScript),
tables as the terminal's text. Self-contained (one inline style, no fonts or scripts fetched) and in the page's own
colours: text inherits `color` and `background`, emphasis is weight and opacity, never a fixed colour, so it reads in
JupyterLab's light and dark themes alike. Pure: no torch."""

from __future__ import annotations

import html
import io
from typing import Any

from .. import format as fmt
from ..files.sanitize import printable
from ..group import grouping
from ..records import ModelRecord
from .grouped import node_label

# JupyterLab's own variables where they are set (its code font), plain CSS fallbacks elsewhere (VS Code, a file)
STYLE = ("<style>.archviz-nb{font-family:var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,Consolas,"
         "monospace);font-size:var(--jp-code-font-size,13px);line-height:1.45;color:inherit;background:transparent}"
         ".archviz-nb pre{margin:.25em 0 .6em;white-space:pre;overflow-x:auto;color:inherit;background:transparent;"
         "font:inherit}"
         ".archviz-nb details,.archviz-nb .leaf{margin-left:1.25em}"
         ".archviz-nb summary{cursor:pointer;margin-left:-1.25em}"
         ".archviz-nb .leaf{margin-left:1.25em}"
         ".archviz-nb .t{font-weight:600}.archviz-nb .n{font-weight:600}"
         ".archviz-nb .c,.archviz-nb .s,.archviz-nb .d{opacity:.72}"
         ".archviz-nb .s{font-style:italic}</style>")
MAX_NODES = 2000  # nodes written into one tree: a grouped tree holds far fewer; past it, the rest is counted


def _e(text: Any) -> str:
    """Text from records as HTML: control characters escaped (line breaks kept), markup characters quoted."""
    return html.escape("\n".join(map(printable, str(text).split("\n"))), quote=True)


def plain(renderable: Any, width: int = 110) -> str:
    """A rich renderable as the text the terminal shows, without colours (`print(result)`, the HTML's tables)."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, markup=False, emoji=False,
                      highlight=False, force_terminal=False, force_jupyter=False, soft_wrap=False)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def text_block(renderable: Any) -> str:
    """A table or tree of the terminal as a `<pre>` block."""
    return f"<pre>{_e(plain(renderable).rstrip())}</pre>"


def page(*blocks: str) -> str:
    """Blocks in one self-contained fragment."""
    return f'<div class="archviz-nb">{STYLE}{"".join(blocks)}</div>'


def _line(node: dict, index: dict) -> str:
    """`title  class  per_instance × factor name = total  [in] → [out]`: the terminal's node label, the exact total
    as the tooltip, the shapes of the first module the node stands for."""
    text = node_label(node).plain
    title = node["title"]
    rest = text[len(title):] if text.startswith(title) else text
    shapes = ""
    first = index.get(node["paths"][0]) if node.get("paths") else None
    if first is not None and first.calls:
        call = first.calls[0]
        shapes = (f'  <span class="s">{_e(", ".join(fmt.shape(s) for s in call.inputs[:2]) or "()")} → '
                  f'{_e(", ".join(fmt.shape(s) for s in call.outputs[:2]) or "()")}</span>')
    return (f'<span class="t">{_e(title)}</span><span class="n" title="{fmt.count(node["total"])} parameters">'
            f"{_e(rest)}</span>{shapes}")


def tree_html(record: ModelRecord, path: str = "", open_levels: int = 1) -> str:
    """The grouped tree below `path` (the model when "") as nested `<details>`, the first `open_levels` open."""
    g = grouping(record)
    nodes = g["nodes"]
    by_id = {n["id"]: n for n in nodes}
    entry = g["by_path"].get(path) if path else None
    start = by_id[entry["node"]] if entry else nodes[0]
    index = record.index()
    out: list[str] = []
    written = [0]

    def add(node: dict, level: int) -> None:
        written[0] += 1
        line = _line(node, index)
        children = node["children"]
        if not children:
            out.append(f'<div class="leaf">{line}</div>')
            return
        out.append(f"<details{' open' if level < open_levels else ''}><summary>{line}</summary>")
        for i, cid in enumerate(children):
            if written[0] >= MAX_NODES:
                out.append(f'<div class="leaf d">{_e(fmt.hidden_children(len(children) - i))}</div>')
                break
            add(by_id[cid], level + 1)
        out.append("</details>")

    add(start, 0)
    return "".join(out)


__all__ = ["page", "plain", "text_block", "tree_html"]

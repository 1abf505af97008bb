"""Tables laid out for the console they are printed on (rich), pure: no torch, nothing printed.

A :class:`FitTable` is measured when rich renders it, at the console's width (`COLUMNS` where set): numbers are never
cut or wrapped (a number column is as wide as its widest number); module paths are shortened from the middle, the
layer number kept (`model.layers.3…mlp.experts`); other text wraps between words, never narrower than its column's
`least` (a shape stays readable). When even that does not fit, the
columns marked droppable go, in their stated order (`drop=1` first), and one dim line under the table names them and
what shows them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from rich import box as boxes
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.table import Table
from rich.text import Text

from .text import SafeText
from ..errors import option

NUMBER, PATH, TEXT = "number", "path", "text"
_LAYER = re.compile(r"\{?\d+(?:[-–]\d+)?\}?")  # a layer's number, or a folded run of them: 3, {0-1}, 32–60
PATH_MIN = 18  # a path is never shortened below this many cells (or its own length)
HINT = f"{option('json')} shows every column"


@dataclass(frozen=True, slots=True)
class Column:
    header: str = ""
    kind: str = TEXT  # NUMBER: never cut or wrapped (figures, short labels); PATH: shortened from the middle;
    #                   TEXT: wraps between words
    justify: str = "left"
    style: str | None = None
    drop: int = 0  # 0: always shown; 1, 2, ...: dropped in this order (1 first) when the console is too narrow
    least: int = 0  # TEXT: never narrowed below this many cells (or its widest line): a shape squeezed to `[B,`
    #                 a line is unreadable, a droppable column goes first


def shorten_path(path: str, width: int) -> str:
    """`path` in at most `width` cells, cut from the middle: its head up to the first number (the layer) and as many
    of its last segments as fit (`model.layers.3…mlp.experts`); the head loses its leading segments (`layers.3…`)
    and the indentation goes where they do not fit."""
    if cell_len(path) <= width:
        return path
    indent = path[:len(path) - len(path.lstrip(" "))]
    segs = path.strip(" ").split(".")
    at = next((i for i, s in enumerate(segs) if _LAYER.fullmatch(s)), 0)
    for start in range(at + 1):  # model.layers.3, then layers.3, then 3
        for lead in (indent, ""):
            head = lead + ("…" if start else "") + ".".join(segs[start:at + 1])
            tail = segs[at + 1:]
            if not tail:
                break
            if cell_len(head) + 1 + cell_len(tail[-1]) > width:
                continue
            kept = [tail[-1]]
            for seg in reversed(tail[:-1]):
                if cell_len(head) + 1 + cell_len(".".join([seg, *kept])) > width:
                    break
                kept.insert(0, seg)
            return head + "…" + ".".join(kept)
    text = path.strip(" ")
    return "…" + text[len(text) - width + 1:]  # the end of it, which says most


def _words(text: str) -> int:
    """The widest word of `text`, a line's indentation counted with its first word (kept when it wraps)."""
    widest = 0
    for line in text.split("\n"):
        words = line.split()
        if words:
            indent = len(line) - len(line.lstrip(" "))
            widest = max(widest, indent + cell_len(words[0]), *(cell_len(w) for w in words))
    return widest


class FitTable:
    """A table that fits the console it is printed on (see the module's docstring). `title`, `show_header`, `box`
    as rich's Table; cells are strings or rich Text."""

    def __init__(self, *columns: Column, title: Any = None, show_header: bool = True,
                 box: boxes.Box | None = boxes.HEAVY_HEAD, hint: str = HINT) -> None:
        self.columns = list(columns)
        self.title = title
        self.show_header = show_header
        self.box = box
        self.hint = hint
        self.rows: list[list[Any]] = []

    def add_row(self, *cells: Any) -> None:
        row = list(cells) + [""] * (len(self.columns) - len(cells))
        self.rows.append([c if isinstance(c, Text) else SafeText(str(c)) for c in row])

    def _bounds(self, i: int) -> tuple[int, int]:
        """(narrowest, widest) content width of column i."""
        col = self.columns[i]
        cells = [r[i].plain for r in self.rows]
        lines = [ln for c in cells for ln in c.split("\n")] or [""]
        widest = max(cell_len(ln) for ln in lines)
        head = col.header if self.show_header else ""
        widest = max(widest, cell_len(head))
        if col.kind == NUMBER:
            least = max(cell_len(ln) for ln in lines)
        elif col.kind == PATH:
            least = min(max(cell_len(ln) for ln in lines), PATH_MIN)
        else:
            least = max([_words(c) for c in cells] + [min(col.least, widest)]) if cells else 0
        return max(least, _words(head), 1), max(widest, 1)

    def _overhead(self, n: int) -> int:
        return 2 * n + ((n + 1) if self.box is not None else 0)

    def layout(self, width: int) -> tuple[list[int], dict[int, int]]:
        """(the columns shown, their content widths) at a console `width` cells wide."""
        shown = list(range(len(self.columns)))
        order = sorted((c.drop, i) for i, c in enumerate(self.columns) if c.drop)
        bounds = {i: self._bounds(i) for i in shown}
        while sum(bounds[i][0] for i in shown) + self._overhead(len(shown)) > width and order:
            shown.remove(order.pop(0)[1])
        widths = {i: bounds[i][1] for i in shown}
        excess = sum(widths.values()) + self._overhead(len(shown)) - width
        while excess > 0:  # narrow the widest column that may be narrowed, a cell at a time
            slack = [i for i in shown if widths[i] > bounds[i][0]]
            if not slack:
                break
            widest = max(slack, key=lambda i: (widths[i] - bounds[i][0], widths[i]))
            widths[widest] -= 1
            excess -= 1
        return shown, widths

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        width = options.max_width
        shown, widths = self.layout(width)
        table = Table(title=self.title, show_header=self.show_header, box=self.box, title_justify="left")
        for i in shown:
            c = self.columns[i]
            table.add_column(c.header, justify=c.justify, style=c.style, width=widths[i],
                             overflow="fold")
        for row in self.rows:
            cells = []
            for i in shown:
                cell = row[i]
                if self.columns[i].kind == PATH and cell_len(cell.plain) > widths[i] and " " not in cell.plain.strip():
                    cell = SafeText(shorten_path(cell.plain, widths[i]), style=cell.style)
                cells.append(cell)
            table.add_row(*cells)
        yield table
        gone = [self.columns[i].header or f"column {i + 1}" for i in range(len(self.columns)) if i not in shown]
        if gone:
            yield Text(f"{', '.join(gone)} not shown at {width} columns: a wider terminal or {self.hint}",
                       style="dim")


__all__ = ["Column", "FitTable", "NUMBER", "PATH", "TEXT", "shorten_path"]

"""Rich text for data: a `Text` whose every string is shown with its control characters escaped.

Module and tensor names, class names, names-file titles, notes, shapes' dim names and code lines come from files
and model code archviz did not write. rich sends ESC and C1 controls through to the terminal as they are and drops
CR and BEL without a trace; :class:`SafeText` writes each as an escape first (`files.sanitize.printable`: ``\\x1b``,
``\\r``), so the terminal shows the text and acts on none of it, and a name stays on its line. rich markup in a name
(``[bold red]x[/]``) is never read: a `Text` is not markup. Line breaks of the renderer's own go in with
:meth:`SafeText.line`, the one way past the escaping.

:class:`Labelled` is every labelled line archviz prints (``note: ...``, ``assumed: ...``, ``stubbed imports: ...``):
wrapped by words at the console's width, each continuation indented under the text after its label, so no line is
wider than the terminal.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from ..files.sanitize import printable

__all__ = ["Labelled", "SafeText"]


class SafeText(Text):
    """`rich.text.Text`, every string given to the constructor, `append` or `assemble` shown escaped."""

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(printable(text), *args, **kwargs)

    def append(self, text: Any, style: Any = None) -> "SafeText":
        return super().append(printable(text) if isinstance(text, str) else text, style)  # type: ignore[return-value]

    def line(self, text: str = "", style: Any = None) -> "SafeText":
        """`text` (escaped) and then a line break of the renderer's own."""
        self.append(text, style)
        super().append("\n")
        return self


class Labelled:
    """`label` then `text` (both shown escaped), in `style`, wrapped by words at the console's width (a word wider
    than the line folded): continuation lines indented under the text after the label, or by two spaces where the
    label takes over a third of the width (or there is none). The one way a labelled line (a note, an assumption, a warning) is
    printed, so that every line fits the terminal."""

    def __init__(self, label: str, text: str, style: Any = None) -> None:
        self.label, self.text, self.style = printable(label), printable(text), style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, 1)
        hang = 0 < len(self.label) <= width // 3
        indent = len(self.label) if hang else min(2, width - 1)
        body = Text(self.text if hang else self.label + self.text, overflow="fold")
        lines = [line.plain.rstrip() for line in body.wrap(console, max(width - indent, 1))]
        first, rest = (self.label + lines[0] if hang else lines[0]), [" " * indent + line for line in lines[1:]]
        yield Text("\n".join([first, *rest]), style=self.style or "", no_wrap=True, overflow="fold")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(len(self.label) + 1, options.max_width), len(self.label) + len(self.text))

    def __str__(self) -> str:
        return self.label + self.text

"""Rich text for data: a `Text` whose every string is shown with its control characters escaped.

Module and tensor names, class names, names-file titles, notes, shapes' dim names and code lines come from files
and model code archviz did not write. rich sends ESC and C1 controls through to the terminal as they are and drops
CR and BEL without a trace; :class:`SafeText` writes each as an escape first (`files.sanitize.printable`: ``\\x1b``,
``\\r``), so the terminal shows the text and acts on none of it, and a name stays on its line. rich markup in a name
(``[bold red]x[/]``) is never read: a `Text` is not markup. Line breaks of the renderer's own go in with
:meth:`SafeText.line`, the one way past the escaping.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ..files.sanitize import printable

__all__ = ["SafeText"]


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

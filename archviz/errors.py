"""Errors that reach the user as one line and a distinct exit code.

The library raises these; only the CLI turns them into a message and an exit status.
"""

from __future__ import annotations

from .files.sanitize import printable

# Exit codes shared by every command.
EXIT_OK = 0
EXIT_MISMATCH = 1  # `archviz check`: the model and the checkpoint disagree; `probe`: shapes disagree
EXIT_USAGE = 2  # unusable input: bad source, bad config, bad checkpoint, ...


class ArchvizError(Exception):
    """A problem with the user's input, told in one line: what, where, what to do."""

    exit_code: int = EXIT_USAGE

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def line(self) -> str:
        """Message and hint as one line."""
        return one_line(f"{self.message} — {self.hint}" if self.hint else self.message)


# The end of the line of a meta pass that died on the model's own float32 tensors meeting the 16-bit dtype it was
# built in (archviz.shapes.trace): `archviz gallery` reads it to count such a model again in float32.
FLOAT32_FIX = "build it in float32 with --set dtype=float32"


def one_line(text: str) -> str:
    """`text` with its line breaks folded: a message may quote a multi-line exception (transformers' config
    validators), and the CLI promises one line; any other control character (an escape sequence in a tensor name
    the message quotes) shown escaped, never sent to the terminal (archviz.files.sanitize)."""
    return printable(" ".join(text.split()) if "\n" in text or "\r" in text else text)


def shown(text: str, limit: int = 80) -> str:
    """`text` quoted for a message, cut to about `limit` characters (a 5,000-digit value stays one short line)."""
    return repr(text if len(text) <= limit else f"{text[:limit - 20]}...{text[-12:]}")


class SourceError(ArchvizError):
    """The model source cannot be resolved, imported or built."""


class CheckpointError(ArchvizError):
    """A checkpoint (file, index, folder, manifest, remote repo) is unusable."""


class ShapeError(ArchvizError):
    """The meta forward pass cannot continue (e.g. a kernel without a shape rule)."""

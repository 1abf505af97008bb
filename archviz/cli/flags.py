"""The CLI's spelling of the options the library's messages name: each option key (archviz.errors.PYTHON_WORDS) as
its flag, `set` -> `--set`. Every text that leaves the CLI (its consoles, its JSON, the files it writes) is spelled
with FLAGS (`archviz.errors.spelled`)."""

from __future__ import annotations

from ..errors import PYTHON_WORDS, spelled, spelled_bytes

FLAGS: dict[str, str] = {key: f"--{key}" for key in PYTHON_WORDS}


def cli_text(text: str) -> str:
    """`text` as the CLI shows it: option tokens spelled as flags."""
    return spelled(text, FLAGS)


def cli_bytes(data: bytes) -> bytes:
    """UTF-8 `data` (a file the CLI writes) with its option tokens spelled as flags."""
    return spelled_bytes(data, FLAGS)

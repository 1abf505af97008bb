"""The records: the one record type (`ModelRecord`) that flows from the walker to every renderer, and its files.

- `types`: the record types and their JSON forms (`archviz.records/1`, and the compact `/3` that `walk -o` writes);
- `compactfile`: a compact file's modules, made only where a command reads them;
- `recordcheck`: the checks every value read from a records file passes;
- `cache`: the records of a command on an unchanged source, kept on disk (used by the CLI).

This package re-exports `types` (`from archviz.records import ModelRecord`); `cache` is imported by name only where
it is used.
"""

from __future__ import annotations

from .types import *  # noqa: F403
from .types import __all__  # noqa: F401

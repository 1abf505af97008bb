"""The `archviz` command line: one thin command per library call. Only this package talks to the terminal.

One module per command family, each registering its commands on `app` when imported here, in the order `--help`
lists them: `model` (summary, inspect, walk), `site` (build), `check` (check, manifest), `probe`, `diff`, `cost`, `gallery`,
`init` (writes the project file; `project` makes its values every command's defaults).
"""

from __future__ import annotations

from . import model, site, check, probe, diff, cost, gallery, init  # noqa: F401,E402 - registers the commands, in --help's order
from .app import app, main
from ..pipeline import read_records
from .common import atomic_write, emit_json, err, handled, load_record, out

__all__ = ["app", "main", "atomic_write", "emit_json", "err", "handled", "load_record", "out", "read_records"]

"""The records cache (archviz.records.cache) in front of a build: the records of an unchanged source, or built and stored."""

from __future__ import annotations

import sys
from typing import Any, Callable

from .options import QUIET, Feedback


def cached(kind: str, source: str, key: dict[str, Any], files: tuple[str | None, ...], build: Callable[[], Any], *,
           use: bool = True, feedback: Feedback = QUIET) -> Any:
    """The records `build()` makes, from the records cache when an entry of the same kind, source, options (`key`,
    JSON-able), package versions and file contents is there (nothing is imported then, torch included); else built,
    and stored for the next run. `files`: the option files the build reads (config, ...)."""
    from ..records import cache as rc

    if not use or rc.disabled():
        return build()
    entry, inputs = cache_key(kind, source, key, files)
    found = rc.lookup(entry)
    if found.note:
        feedback.note(found.note)
    if found.record is not None:
        return found.record
    vouched = {p: rc.sha256_file(p) for p in inputs}
    before = set(sys.modules)
    record = build()
    vouched.update(rc.record_files(record))
    vouched.update({p: rc.sha256_file(p) for p in rc.new_code_files(before)})
    note = rc.store(entry, record, {p: d for p, d in vouched.items() if d is not None})
    if note:
        feedback.note(note)
    return record


def cache_key(kind: str, source: str, key: dict[str, Any], files: tuple[str | None, ...] = (),
              versions: dict[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The records-cache key of `cached`'s arguments, and the files known before the build that it hashes
    (`versions`: archviz.records.cache.versions(), read once by a caller looking up many keys)."""
    from ..records import cache as rc

    inputs = rc.source_files(source, *files)
    return rc.make_key(kind, source, {**key, "_inputs": inputs}, versions), inputs


def build_key(build: Any) -> dict[str, Any]:
    """`BuildOptions` as a cache key's JSON: every field, the overrides as `key=repr(value)` texts (a value need
    not be JSON: an override `x=(1, 2)` is a tuple)."""
    from dataclasses import fields

    key = {f.name: getattr(build, f.name) for f in fields(build)}
    key["overrides"] = [f"{k}={v!r}" for k, v in build.overrides]
    return key

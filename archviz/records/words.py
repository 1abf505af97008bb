"""A record in its reader's words: the options its text names (`archviz.errors.option` tokens in the build's notes,
the active-parameter assumptions, the modules' assumptions and every stage's extras) spelled as `words` says.

The stages and the records cache keep the tokens, so that one record serves every reader; the library's front door
(`archviz.load`, the results' records) hands a Python caller the record in Python's words (PYTHON_WORDS), and the
command line spells its flags where its text leaves it (archviz.cli.flags)."""

from __future__ import annotations

import dataclasses
from typing import Mapping

from ..errors import PYTHON_WORDS, options_named, spelled, spelled_data
from .types import ModelRecord


def in_words(record: ModelRecord, words: Mapping[str, str] = PYTHON_WORDS) -> ModelRecord:
    """`record` with its option tokens spelled in `words`; the very record where it names no option. The modules
    are made again only where one of their assumptions names an option (a compact file's are left unmade else)."""
    source, summary = record.source, record.summary
    notes = tuple(spelled(n, words) for n in source.notes)
    assumed = tuple(spelled(a, words) for a in summary.active_assumptions)
    extras = spelled_data(record.extras, words)
    changed = {}
    if notes != source.notes:
        changed["source"] = dataclasses.replace(source, notes=notes)
    if assumed != summary.active_assumptions:
        changed["summary"] = dataclasses.replace(summary, active_assumptions=assumed)
    if extras is not record.extras:
        changed["extras"] = extras
    if any(options_named(a) for said in record.column("assumptions") for a in said):
        changed["modules"] = tuple(dataclasses.replace(m, assumptions=tuple(spelled(a, words) for a in m.assumptions))
                                   for m in record.modules)
    return dataclasses.replace(record, **changed) if changed else record

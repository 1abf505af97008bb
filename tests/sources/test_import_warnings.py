"""Warnings the model's code raises while archviz imports it (a registry's "Overwriting ...", a deprecated import
path) reach no stream ahead of the output: they are one note of the build, each message once."""

from __future__ import annotations

import warnings

from helpers import FIXTURES

import archviz

WARNS = FIXTURES / "firstcmds" / "warnsatimport.py"


def test_import_warnings_are_one_note_not_lines_on_stderr():
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        built = archviz.build(f"{WARNS}", model_class="net_small")
    width, classes = 12, 5  # Net's defaults, as net_small builds it
    assert sum(p.numel() for p in built.model.parameters()) == width * width + width + width * classes + classes
    assert not [w for w in shown if "warnsatimport" in str(w.filename)]
    said = [n for n in built.notes if "while importing the model's code" in n]
    assert len(said) == 1 and said[0].startswith("3 warnings")
    assert "Overwriting net_small in registry" in said[0] and "deprecated" in said[0] and "1 more" in said[0]

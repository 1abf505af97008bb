"""Every TOML file archviz reads (the project file, names, annotations, checkpoint rules, an inputs file, a hardware
file) goes through one reader, archviz.files.safetoml: a FIFO is refused unread (names and annotations were read with
a plain open, which blocks on one), and bad TOML, bad UTF-8, nesting too deep for tomllib's recursion and an integer
past Python's digit limit are each one line naming the file. On Python 3.10 without tomli the reader says so in one
line (there `cost --hardware FILE.toml` failed at import: hardware.py imported tomllib with no fallback)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from adv_tools import cli_here, make_special

from archviz.errors import ArchvizError
from archviz.files import safetoml


def _project(path: str):
    from archviz.files.project import load

    return load(path)


def _names(path: str):
    from archviz.group import load_names

    return load_names(path)


def _annotations(path: str):
    from archviz.render.site.annotations import load_annotations

    return load_annotations(path)


def _rules(path: str):
    from archviz.checkpoint.rules import load_rules

    return load_rules(path)


def _inputs(path: str):
    from archviz.input_specs import expand_input_files

    return expand_input_files([f"@{path}"])


def _hardware(path: str):
    from archviz.cost.hardware import resolve

    return resolve(path)


# reader -> the file name it reads (the project file is known by its name)
READERS = {"project": (_project, "archviz.toml"), "names": (_names, "names.toml"),
           "annotations": (_annotations, "annotations.toml"), "rules": (_rules, "rules.toml"),
           "inputs": (_inputs, "inputs.toml"), "hardware": (_hardware, "gpu.toml")}
BAD = {"not TOML": (b"this is = = not toml", "not valid TOML (Expected '=' after a key in a key/value pair (at line 1"),
       "not UTF-8": (b'a = "\xff"\n', "not UTF-8"),
       "nested too deeply": (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
       "an integer of 5000 digits": (b"a = " + b"9" * 5000 + b"\n", "not valid TOML (Exceeds the limit")}


def _line(e: pytest.ExceptionInfo) -> str:
    line = e.value.line()
    assert "\n" not in line
    return line


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("fault", BAD)
def test_a_bad_toml_file_is_one_line_naming_it(tmp_path: Path, reader: str, fault: str) -> None:
    load, name = READERS[reader]
    path = tmp_path / name
    path.write_bytes(BAD[fault][0])
    with pytest.raises(ArchvizError) as e:
        load(str(path))
    line = _line(e)
    assert name in line and BAD[fault][1] in line, line


@pytest.mark.parametrize("reader", READERS)
def test_a_fifo_is_refused_unread(tmp_path: Path, reader: str) -> None:
    load, name = READERS[reader]
    fifo = make_special(tmp_path / name, "fifo")  # a plain open() would wait for a writer forever
    with pytest.raises(ArchvizError) as e:
        load(str(fifo))
    assert "FIFO" in _line(e) and "not a regular file" in _line(e)


@pytest.mark.parametrize("reader", ["names", "annotations"])
def test_a_file_past_the_bound_is_refused_before_it_is_read(tmp_path: Path, reader: str) -> None:
    load, name = READERS[reader]
    path = tmp_path / name
    with open(path, "wb") as f:  # sparse: no disk used
        f.truncate(safetoml.MAX_TOML_BYTES + 1)
    with pytest.raises(ArchvizError) as e:
        load(str(path))
    assert f"over the {safetoml.MAX_TOML_BYTES:,}-byte limit" in _line(e)


def test_without_tomllib_or_tomli_one_line_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(safetoml, "tomllib", None)  # Python 3.10 without tomli
    path = tmp_path / "gpu.toml"
    path.write_text('name = "x"\n')
    for reader in ("hardware", "rules"):
        with pytest.raises(ArchvizError) as e:
            READERS[reader][0](str(path))
        assert "needs Python 3.11 or the tomli package" in _line(e) and "pip install tomli" in e.value.hint


def test_cost_hardware_bad_file_exits_2_in_one_line(tmp_path: Path, archviz_cli) -> None:
    bad = tmp_path / "gpu.toml"
    bad.write_text("memory_gb = = 80\n")
    r = cli_here(archviz_cli, "cost", "hf:llama", "--hardware", str(bad))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and r.stdout == "" and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: --hardware {bad}: not valid TOML (") and "line 1, column 13" in lines[0]
    assert os.listdir(tmp_path) == ["gpu.toml"]

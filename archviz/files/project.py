"""The project file: `[tool.archviz]` in a `pyproject.toml`, or an `archviz.toml` (the same keys at its top level),
found in the current folder or the nearest folder above it that has one. It names what a project's commands would
otherwise repeat as flags; every command reads it and its flags override it (archviz.cli.project).

    [tool.archviz]
    source = "hf:llama"                 # or a config.json, a model folder, model.py, package.module:callable
    config = "configs/config.json"      # a reference model.py's config
    set = { num_hidden_layers = 2 }     # overrides (a factory's keyword arguments); a string as an override's text
    inputs = ["pixel_values=B,3,224,224"]  # or a table: { pixel_values = "B,3,224,224" }
    names = "names.toml"
    annotations = "annotations.toml"
    source_url = "https://github.com/OWNER/REPO/blob/REV/{path}#L{start}-L{end}"
    checkpoint = "model.safetensors"    # or a shard folder, an index, a manifest, hf://owner/name

Paths are relative to the file's folder. A key or value the file may not hold is refused in one line naming the
file, the key and what it must hold (the validators of archviz.records.recordcheck). Reading never runs code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import ArchvizError
from ..records.recordcheck import fail, refused_as, want_bool, want_str, want_table
from .safeio import read_regular
from .safetoml import load_file, loads as toml_loads

PYPROJECT = "pyproject.toml"
OWN_FILE = "archviz.toml"
MAX_BYTES = 1 << 20  # a project file is a few lines; a bigger one is refused before it is read

# key -> (what it must hold, whether it names a path relative to the file)
KEYS: dict[str, tuple[str, bool]] = {
    "source": ("a string: hf:<model_type>, a config.json or model folder, a model.py or package.module:callable",
               True),
    "config": ("a string: the path of a reference model's config.json", True),
    "set": ("a table of config fields (a factory's keyword arguments) and their values", False),
    "inputs": ("a list of input specs (name=B,T,512[:dtype]) or a table of names and specs", False),
    "names": ("a string: the path of a names file (TOML or JSON)", True),
    "annotations": ("a string: the path of an annotations TOML file", True),
    "source_url": ("a string: a link template with {path} (and {start}, {end})", False),
    "checkpoint": ("a string: a .safetensors file, shard folder, index, manifest or hf://owner/name", True),
    "model_class": ("a string: the top nn.Module class of a reference model.py", False),
    "config_class": ("a string: the class a reference model's config JSON builds", False),
    "tokenizer": ("a string: the path of a tokenizer.json", True),
    "trust_remote_code": ("true or false", False),
}


@dataclass(frozen=True)
class Project:
    """What a project file says; paths made relative to the current folder."""

    path: str  # the file read
    values: dict[str, Any] = field(default_factory=dict)  # key -> value, only the keys the file gives

    def sets(self) -> list[str]:
        """`set` as `key=value` texts (a string value as the text after `=` of an override, anything else as JSON)."""
        import json

        return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in self.values.get("set", {}).items()]


def find(start: str | None = None) -> str | None:
    """The project file that applies in `start` (default: the current folder): an archviz.toml, or a pyproject.toml
    with a [tool.archviz] table, in it or the nearest folder above; None where there is none."""
    folder = os.path.abspath(start or os.getcwd())
    while True:
        own = os.path.join(folder, OWN_FILE)
        if os.path.isfile(own):
            return own
        py = os.path.join(folder, PYPROJECT)
        if os.path.isfile(py) and _has_table(py):
            return py
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _has_table(path: str) -> bool:
    try:
        text = read_regular(path, max_bytes=MAX_BYTES, what="project file").decode("utf-8", "replace")
    except (ArchvizError, OSError):
        return False
    return any(line.strip().replace(" ", "").startswith(("[tool.archviz]", "[tool.archviz.")) for line in
               text.splitlines())


def load(path: str) -> Project:
    """The project file at `path`, every key and value checked."""
    return _project(load_file(path, what="project file", max_bytes=MAX_BYTES, hint="fix the file"), path)


def loads(text: str, path: str) -> Project:
    """The project file `path` whose text is `text`, every key and value checked."""
    return _project(toml_loads(text, where=path, hint="fix the file"), path)


def _project(data: dict[str, Any], path: str) -> Project:
    """The project file `path`, its TOML decoded to `data`, every key and value checked."""
    own = os.path.basename(path) == OWN_FILE
    table = data if own else data.get("tool", {}).get("archviz", {})
    prefix = "" if own else "tool.archviz."
    with refused_as(lambda m: ArchvizError(f"{path}: {m}", hint="see docs/python.md (the project file)")):
        values = _checked(table, prefix)
    folder = os.path.dirname(os.path.abspath(path))
    for key, value in list(values.items()):
        if KEYS[key][1] and not _remote(value) and os.path.exists(os.path.join(folder, value)):
            values[key] = os.path.relpath(os.path.join(folder, value))
    return Project(path=path, values=values)


def _remote(value: str) -> bool:
    return value.startswith(("hf:", "hf://", "http://", "https://"))


def _checked(table: Any, prefix: str) -> dict[str, Any]:
    want_table(prefix.rstrip("."), table, KEYS, what="a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        where, what = f"{prefix}{key}", KEYS[key][0]
        if key == "set":
            want_table(where, value, what=what)
            for k, v in value.items():
                if not isinstance(v, (str, int, float, bool, list)):
                    fail(f"{where}.{k}", "a string, number, boolean or list", v)
        elif key == "inputs":
            if isinstance(value, dict):
                value = [f"{name}={want_str(f'{where}.{name}', spec, nonempty=True)}" for name, spec in value.items()]
            elif type(value) is not list or any(type(x) is not str or "=" not in x for x in value):
                fail(where, what, value)
        elif key == "trust_remote_code":
            want_bool(where, value)
        elif type(value) is not str or not value.strip():
            fail(where, what, value)
        if key == "source_url" and "{path}" not in value:
            fail(where, "a link template with {path} (and {start}, {end})", value)
        values[key] = value
    return values


__all__ = ["KEYS", "OWN_FILE", "PYPROJECT", "Project", "find", "load", "loads"]

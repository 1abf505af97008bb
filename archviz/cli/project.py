"""The project file on the command line: its values as every command's defaults (flags override them). The file
itself: archviz.files.project; `archviz init`, which writes one: archviz.cli.init."""

from __future__ import annotations

from typing import Any

from ..files import project as pf

# the project file's key -> the commands' parameters it gives a default to
PARAMETERS = {"source": ("source", "sources"), "config": ("config",), "inputs": ("input_", "inputs"),
              "names": ("names",), "annotations": ("annotations",), "source_url": ("source_url",),
              "checkpoint": ("checkpoint",), "model_class": ("model_class",), "config_class": ("config_class",),
              "tokenizer": ("tokenizer",), "trust_remote_code": ("trust_remote_code",)}
NOT_READ_BY = {"gallery", "init", "manifest"}  # a gallery's models are its own; init writes the file; a manifest
# is of a checkpoint given by itself


def default_map(commands: dict[str, Any], start: str | None = None) -> dict[str, dict[str, Any]]:
    """The project file's values as click's default map ({command: {parameter: value}}) of `commands` (name ->
    click command), for the parameters each command has; {} without a project file. Its `set` table goes to
    archviz.cli.common.overrides instead, which merges it with --set key by key."""
    from . import common

    path = pf.find(start)
    project = pf.load(path) if path is not None else None
    common.PROJECT_SETS[:] = project.sets() if project is not None else []  # merged with --set key by key
    if project is None:
        return {}
    values = {k: v for k, v in project.values.items() if k != "set"}
    out: dict[str, dict[str, Any]] = {}
    for name, command in commands.items():
        if name in NOT_READ_BY:
            continue
        params = {p.name for p in command.params}
        given: dict[str, Any] = {}
        for key, value in values.items():
            for param in PARAMETERS[key]:
                if param in params:
                    given[param] = [value] if param == "sources" else value
        if given:
            out[name] = given
    return out


__all__ = ["NOT_READ_BY", "PARAMETERS", "default_map"]

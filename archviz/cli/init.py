"""`archviz init`: the project file (`[tool.archviz]` in pyproject.toml, or archviz.toml; archviz.files.project)
written from a command line that works."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Optional

import typer

from .app import app
from .common import (
    atomic_write,
    emit_json,
    err,
    handled,
    load_record,
    overrides,
)
from .options import (
    Annotations,
    Config,
    ConfigClass,
    Debug,
    Input,
    Json,
    ModelClass,
    Names,
    Set,
    Source,
    SourceUrl,
    Tokenizer,
    TrustRemoteCode,
)
from ..errors import ArchvizError
from ..files import project as pf


@app.command()
def init(
    source: Source,
    config: Config = None,
    set_: Set = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    trust_remote_code: TrustRemoteCode = False,
    input_: Input = None,
    names: Names = None,
    annotations: Annotations = None,
    source_url: SourceUrl = None,
    checkpoint: Annotated[Optional[str], typer.Option("--checkpoint", "-k", help="the checkpoint `archviz check` "
                                                                                "compares with")] = None,
    file: Annotated[str, typer.Option("--file", help="pyproject.toml (a [tool.archviz] table added) or "
                                                     "archviz.toml")] = pf.PYPROJECT,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """Write the project file (`[tool.archviz]` in pyproject.toml, or archviz.toml) from a command line that works:
    the model is built once first. Then `archviz check`, `archviz build`, ... need no arguments."""
    from ..sources.options import BuildOptions

    with handled(debug, json_):
        target = _target(file)
        build = BuildOptions(config=config, overrides=overrides(set_), model_class=model_class,
                             config_class=config_class, tokenizer=tokenizer, trust_remote_code=trust_remote_code)
        _check_files(names, annotations, checkpoint, source_url, input_)
        load_record(source, build, group=False, cache=True)  # the command line works: the model builds
        folder = os.path.dirname(os.path.abspath(target))
        values = {"source": source, "config": config, "set": _sets(set_), "inputs": list(input_ or ()) or None,
                  "names": names, "annotations": annotations, "source_url": source_url, "checkpoint": checkpoint,
                  "model_class": model_class, "config_class": config_class, "tokenizer": tokenizer,
                  "trust_remote_code": trust_remote_code or None}
        lines = [f"{key} = {_toml(_relative(key, value, folder))}" for key, value in values.items()
                 if value is not None]
        own = os.path.basename(target) == pf.OWN_FILE
        before = "" if own or not os.path.isfile(target) else open(target, encoding="utf-8").read()
        text = ("" if own else (before.rstrip() + "\n\n" if before.strip() else "") + "[tool.archviz]\n") + \
            "\n".join(lines) + "\n"
        pf.loads(text, target)  # it reads back as written, before anything is written
        atomic_write(target, text)
        if json_:
            emit_json({"output": target, "keys": [line.split(" = ", 1)[0] for line in lines]})
        else:
            err.print(f"wrote {'' if own else '[tool.archviz] in '}{target}: `archviz check`, `archviz build`, ... "
                      "read it; their flags override it", highlight=False, markup=False)


def _target(file: str) -> str:
    """The file to write, refused where it holds a project table already."""
    if os.path.basename(file) not in (pf.PYPROJECT, pf.OWN_FILE):
        raise ArchvizError(f"--file {file!r}: a project file is a pyproject.toml or an archviz.toml",
                           hint="give --file pyproject.toml or --file archviz.toml")
    if os.path.basename(file) == pf.OWN_FILE and os.path.exists(file):
        raise ArchvizError(f"{file} exists already", hint="edit it, or remove it to write it again")
    if os.path.isfile(file) and pf.find(os.path.dirname(os.path.abspath(file))) == os.path.abspath(file):
        raise ArchvizError(f"{file} has a [tool.archviz] table already", hint="edit it, or remove the table")
    return file


def _check_files(names: str | None, annotations: str | None, checkpoint: str | None, source_url: str | None,
                 inputs: list[str] | None) -> None:
    """The files and values the project file will name, read and checked as the commands would."""
    from .validate import check_options

    check_options(inputs=inputs)
    if names:
        from ..group import load_names

        load_names(names)
    if annotations:
        from ..render.site.annotations import load_annotations

        load_annotations(annotations)
    if source_url is not None and "{path}" not in source_url:
        raise ArchvizError(f"--source-url {source_url!r}: the template has no {{path}}",
                           hint="write e.g. https://github.com/OWNER/REPO/blob/REV/{path}#L{start}-L{end}")
    if checkpoint and "://" not in checkpoint and not os.path.exists(checkpoint):
        raise ArchvizError(f"--checkpoint {checkpoint}: no such file or folder", hint="check the path")


def _sets(texts: list[str] | None) -> dict[str, str] | None:
    """--set texts as the project file's `set` table: each value the text after `=`, read back as --set reads it."""
    if not texts:
        return None
    return {k: text.split("=", 1)[1] for text in texts for k in [text.split("=", 1)[0].strip()]}


def _relative(key: str, value: Any, folder: str) -> Any:
    """A path the project file names, relative to the file's folder (as it is read back)."""
    if isinstance(value, str) and pf.KEYS[key][1] and os.path.exists(value):
        return os.path.relpath(os.path.abspath(value), folder)
    return value


def _toml(value: Any) -> str:
    """A TOML value: strings as basic strings (JSON's escapes are TOML's), lists as arrays, tables inline."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


__all__ = ["init"]

"""Errors that reach the user as one line and a distinct exit code.

The library raises these; only the CLI turns them into a message and an exit status.

A message names the user's options as tokens (`option("set")`), never as the CLI's flags: `str(e)` spells them as
a Python caller gives them (PYTHON_WORDS: `overrides`), the CLI as its flags (archviz.cli.flags), every
text that leaves it spelled at that boundary (`spelled`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from .files.sanitize import printable

# How a Python caller gives each option a message may name (archviz.load's keywords and the results' methods), by
# the option's key: the name of the CLI's flag without its dashes (archviz.cli.flags spells the key as that flag).
PYTHON_WORDS: dict[str, str] = {
    # the build (archviz.load / archviz.build keywords, BuildOptions fields)
    "config": "`config`", "set": "`overrides`", "model-class": "`model_class`", "config-class": "`config_class`",
    "tokenizer": "`tokenizer`", "world-size": "`world_size`", "rank": "`rank`",
    "trust-remote-code": "`trust_remote_code=True`", "quantized": "`quantized=True`",
    # the meta pass (archviz.load keywords, PassOptions fields)
    "input": "`inputs`", "shapes": "`shapes=True`", "no-shapes": "`shapes=False`", "batch": "`batch`",
    "seq": "`seq`", "kernel-rules": "`kernel_rules`", "every-block": "`every_block=True`", "train": "`train=True`",
    "names": "`names`",
    # what a result shows (archviz.render.results) and how an error is read
    "json": "`.to_json()`", "debug": "`e.__cause__`", "limit": "`limit`", "flow": "`flow`",
    "no-cache": "`cache=False`",
    # cost, check, diff, site, gallery, probe (their functions' keywords and options' fields)
    "context": "`context`", "kv-dtype": "`kv_dtype`", "hardware": "`hardware`", "checkpoint": "`checkpoint`",
    "rank-pattern": "`rank_pattern`", "timeout": "`timeout`", "ignore": "`ignore`", "annotations": "`annotations`",
    "source-url": "`source_url`", "cost": "`cost`", "site": "`site`", "transformers": "`transformers`",
    "pairs": "`pairs`", "sets": "`sets`", "device": "`device`", "max-memory": "`max_memory`",
    "config-a": "`config` of A", "config-b": "`config` of B", "set-a": "`overrides` of A",
    "set-b": "`overrides` of B",
}

_OPEN, _CLOSE = "\u27e6", "\u27e7"  # ⟦set⟧: brackets no user text holds, one terminal cell each (a token is as wide
# as the CLI's flag it stands for, so a table laid out with tokens is laid out as with the flags)
_TOKEN = re.compile(r"(?:\u27e6|\\u27e6)([a-z][a-z0-9-]*)(?:\u27e7|\\u27e7)")  # as is, or escaped in JSON text


def option(name: str) -> str:
    """The token naming the user option `name` (a key of PYTHON_WORDS: "set", "input", ...) in a message, a hint
    or a note; the CLI spells it as its flag, a Python caller reads `overrides`."""
    if name not in PYTHON_WORDS:
        raise ValueError(f"no option {name!r} (archviz.errors.PYTHON_WORDS names each option a message may name)")
    return f"{_OPEN}{name}{_CLOSE}"


def spelled(text: str, words: Mapping[str, str]) -> str:
    """`text` with each option token (`option`) replaced by its word in `words`: PYTHON_WORDS, or the CLI's flags."""
    if _OPEN not in text and "\\u27e6" not in text:
        return text
    return _TOKEN.sub(lambda m: words.get(m[1], m[0]), text)


def spelled_bytes(data: bytes, words: Mapping[str, str]) -> bytes:
    """UTF-8 `data` (a file archviz writes) spelled as `spelled` spells text; bytes that are not UTF-8 kept as they
    are."""
    if b"\xe2\x9f\xa6" not in data and b"\\u27e6" not in data:  # neither ⟦ nor its JSON escape
        return data
    return spelled(data.decode("utf-8", "surrogateescape"), words).encode("utf-8", "surrogateescape")


def spelled_data(value: Any, words: Mapping[str, str]) -> Any:
    """`value` (JSON-able data, or a frozen dataclass of such: a cost report) with the option tokens of its strings
    spelled in `words`; the very object, not a copy, wherever it holds none."""
    if isinstance(value, str):
        return spelled(value, words)
    if isinstance(value, dict):
        out = {k: spelled_data(v, words) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, (list, tuple)):
        items = [spelled_data(v, words) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = {f.name: new for f in dataclasses.fields(value)
                   if (new := spelled_data(old := getattr(value, f.name), words)) is not old}
        return dataclasses.replace(value, **changed) if changed else value
    return value


def options_named(text: str) -> tuple[str, ...]:
    """The keys of the options `text` names by token, in order, each once."""
    return tuple(dict.fromkeys(m[1] for m in _TOKEN.finditer(text)))

# Exit codes shared by every command.
EXIT_OK = 0
EXIT_MISMATCH = 1  # `archviz check`: the model and the checkpoint disagree; `probe`: shapes disagree
EXIT_USAGE = 2  # unusable input: bad source, bad config, bad checkpoint, ...


class ArchvizError(Exception):
    """A problem with the user's input, told in one line: what, where, what to do. `message`, `hint` and `line()`
    hold option tokens (a message nests another's `line()`); `str(e)` spells them with `words` (PYTHON_WORDS; the
    CLI spells its own); `options`: the options the error names, the fields to fix."""

    exit_code: int = EXIT_USAGE
    words: Mapping[str, str] = PYTHON_WORDS

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return spelled(self.message, self.words)

    @property
    def options(self) -> tuple[str, ...]:
        """The keys of the options (PYTHON_WORDS) the message and hint name: the fields that fix it."""
        return options_named(f"{self.message} {self.hint or ''}")

    def line(self) -> str:
        """Message and hint as one line (option tokens kept: see `spelled`)."""
        return one_line(f"{self.message} — {self.hint}" if self.hint else self.message)


# The end of the line of a meta pass that died on the model's own float32 tensors meeting the 16-bit dtype it was
# built in (archviz.shapes.trace): `archviz gallery` reads it to count such a model again in float32.
FLOAT32_FIX = f"build it in float32 with {option('set')} dtype=float32"


def one_line(text: str) -> str:
    """`text` with its line breaks folded: a message may quote a multi-line exception (transformers' config
    validators), and the CLI promises one line; any other control character (an escape sequence in a tensor name
    the message quotes) shown escaped, never sent to the terminal (archviz.files.sanitize)."""
    return printable(" ".join(text.split()) if "\n" in text or "\r" in text else text)


def shown(text: str, limit: int = 80) -> str:
    """`text` quoted for a message, cut to about `limit` characters (a 5,000-digit value stays one short line)."""
    return repr(text if len(text) <= limit else f"{text[:limit - 20]}...{text[-12:]}")


class SourceError(ArchvizError):
    """The model source cannot be resolved, imported or built."""


class UnknownArgument(SourceError):
    """A key (of the overrides or the config) that the constructor, builder or config class does not take: a caller
    that added keys of its own (the runtime limits `cost` builds with) builds again without them."""


class CheckpointError(ArchvizError):
    """A checkpoint (file, index, folder, manifest, remote repo) is unusable."""


class ShapeError(ArchvizError):
    """The meta forward pass cannot continue (e.g. a kernel without a shape rule)."""

"""YAML config files from untrusted sources: the config files of training codebases (`model_config.yaml` beside a
checkpoint, a run's `config.yml`), read as JSON configs are.

A file is read as `safeio` reads every input (a regular file, at most `MAX_YAML_BYTES`: a model's config is a few
KB, and PyYAML parses in Python), decoded as UTF-8 and parsed by PyYAML's safe loader, which builds plain values and
never runs code or makes objects a tag names. What it builds is copied into JSON values with a budget of nodes and a
depth limit, so that aliases (`&a` / `*a`, each a reference to one node) cannot expand into a billion values later:
every fault is one line naming the file. PyYAML is not one of archviz's requirements: without it, the line says to
install it.

Pure library code: nothing here prints.
"""

from __future__ import annotations

import datetime
import math
import os
from typing import Any

from archviz.errors import ArchvizError

from .safeio import MiB, read_regular
from .safejson import MAX_DEPTH, MAX_INT_DIGITS

__all__ = ["MAX_YAML_BYTES", "MAX_YAML_NODES", "YAML_SUFFIXES", "load_config"]

#: Largest YAML config read.
MAX_YAML_BYTES = 1 * MiB
#: Most values a YAML config may hold once its aliases are followed (a config holds hundreds).
MAX_YAML_NODES = 100_000
YAML_SUFFIXES = (".yaml", ".yml")


def load_config(path: str | os.PathLike[str], *, error: type[ArchvizError] = ArchvizError) -> Any:
    """The YAML file at `path` as JSON values (dicts with string keys, lists, str, int, float, bool, None)."""
    where = os.fspath(path)
    try:
        import yaml
    except ImportError:
        raise error(f"{where}: a YAML config needs PyYAML, which is not installed",
                    hint="pip install pyyaml, or give the config as JSON") from None
    raw = read_regular(where, max_bytes=MAX_YAML_BYTES, what="YAML config", error=error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not a readable YAML config (not UTF-8 at byte {e.start})", hint="check the file") from None
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError) as e:
        raise error(f"{where}: not a readable YAML config ({' '.join(str(e).split())[:200]})",
                    hint="fix the line it names") from None
    return _plain(data, where, error, [MAX_YAML_NODES], 0)


def _plain(value: Any, where: str, error: type[ArchvizError], budget: list[int], depth: int) -> Any:
    """`value` copied as JSON values, each node (an alias's each time it is reached) spending one of `budget`."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise error(f"{where}: refused YAML config (more than {MAX_YAML_NODES:,} values once its aliases are "
                    f"followed, or nested deeper than {MAX_DEPTH})", hint="give the model's config alone")
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise error(f"{where}: refused YAML config (a key of type {type(k).__name__})",
                            hint="keys of a config are names")
            out[k if isinstance(k, str) else str(k)] = _plain(v, where, error, budget, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, where, error, budget, depth + 1) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and len(str(abs(value))) > MAX_INT_DIGITS:
        raise error(f"{where}: refused YAML config (an integer of more than {MAX_INT_DIGITS} digits)",
                    hint="check the file")
    if isinstance(value, float) and not math.isfinite(value) or isinstance(value, (str, int, float, bool)) or \
            value is None:
        return value
    if isinstance(value, (datetime.date, datetime.datetime, bytes)):
        return str(value)  # a date or a binary scalar: kept as its text
    raise error(f"{where}: refused YAML config (a value of type {type(value).__name__})", hint="check the file")

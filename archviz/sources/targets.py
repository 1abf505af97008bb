"""A config in the `target`/`params` convention: nodes `{target: "pkg.module.Class", params: {...}}` anywhere in it,
as latent-diffusion codebases write their YAML (`model.params.unet_config`) and build each with their own
`instantiate_from_config`. Given such a config and a model file (or `module:callable`), the node whose target is a
class or function of that file is the model: its `params` are the constructor's keyword arguments, and the class
it names is the one built. A config with no such node is used as it is.
"""

from __future__ import annotations

import inspect
from typing import Any, Iterator

from ..errors import SourceError, option

_MAX_DEPTH = 12


def _nodes(value: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, node) of every mapping with a string `target` (and `params`, a mapping, or none)."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        if isinstance(value.get("target"), str) and isinstance(value.get("params", {}), dict):
            yield path, value
        for k, v in value.items():
            yield from _nodes(v, f"{path}.{k}" if path else str(k), depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, f"{path}[{i}]", depth + 1)


def _defined_in(obj: Any, module: Any) -> bool:
    where = getattr(obj, "__module__", None) or ""
    return where == module.__name__ or hasattr(module, "__path__") and where.startswith(module.__name__ + ".")


def target_config(config: Any, module: Any, wanted: str | None, where: str) -> tuple[Any, str | None, str | None]:
    """(the config to build from, the class or function to build or `wanted`, a note or None): the `params` of the
    node whose target is a class or function of `module` (and is `wanted`, where one is named); `config` itself
    where no node names one. Several nodes naming different ones are refused, each named."""
    if not isinstance(config, dict):
        return config, wanted, None
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for path, node in _nodes(config):
        mod, _, name = node["target"].rpartition(".")
        obj = getattr(module, name, None)
        if obj is None or not (inspect.isclass(obj) or inspect.isfunction(obj)) or not _defined_in(obj, module):
            continue
        if wanted and name != wanted:
            continue
        if mod and mod != module.__name__ and name in found:
            continue  # a node naming the file's module exactly is kept before one naming it by another path
        found[name] = (path, node)
    if not found:
        return config, wanted, None
    if len(found) > 1:
        listing = "; ".join(f"{p} ({name})" for name, (p, _) in found.items())
        raise SourceError(f"{where}: {len(found)} nodes of the config name a model of the file: {listing}",
                          hint=f"name one with {option('model-class')}")
    name, (path, node) = next(iter(found.items()))
    params = dict(node.get("params") or {})
    return params, name, (f"config: {path or 'the file'} names {node['target']}: its params "
                          f"({len(params)}) are {name}'s keyword arguments")


__all__ = ["target_config"]

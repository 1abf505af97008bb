"""transformers' model types as a sweep or a gallery enumerates them: every config type, the causal LMs, the type
each one's modular file derives from, and its default config. Reads transformers' auto mappings and
its modular source files (parsed, never imported); builds nothing."""

from __future__ import annotations

import ast
import functools
import os
from collections import Counter
from typing import Any

from ..errors import SourceError, option


def model_types(which: str) -> list[str]:
    """`all`: every config type; `causal`: the types with a causal-LM class; else a comma-separated list, each
    checked against transformers' config types (sorted, as given otherwise)."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError as e:
        raise SourceError("transformers is not installed", hint="pip install 'archviz[hf]'") from e
    if which == "all":
        return sorted(CONFIG_MAPPING_NAMES)
    if which == "causal":
        return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    asked = [t.strip() for t in which.split(",") if t.strip()]
    unknown = [t for t in asked if t not in CONFIG_MAPPING_NAMES]
    if unknown or not asked:
        raise SourceError(f"{option('transformers')} {which!r}: {', '.join(unknown) or 'no type'} is not a model type "
                          "of the installed transformers",
                          hint="give all, causal, or model types such as llama,mistral (transformers' model_type)")
    return list(dict.fromkeys(asked))


@functools.lru_cache(maxsize=1)
def _module_dirs() -> dict[str, str]:
    """transformers' models/ folder name -> model type."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES, model_type_to_module_name

    return {model_type_to_module_name(t): t for t in sorted(CONFIG_MAPPING_NAMES, reverse=True)}


def parent_type(model_type: str) -> str | None:
    """The model type whose code `model_type`'s modular file (`modular_<name>.py`) takes the most names from
    (`from ..deepseek_v3.modeling_deepseek_v3 import ...`): deepseek_v32 -> deepseek_v3; None without a modular file."""
    import transformers
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    folder = model_type_to_module_name(model_type)
    path = os.path.join(os.path.dirname(transformers.__file__), "models", folder, f"modular_{folder}.py")
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    taken: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module and "." in node.module:
            other = node.module.split(".", 1)[0]
            if other != folder:
                taken[other] += len(node.names)
    dirs = _module_dirs()
    for other, _ in taken.most_common():
        if other in dirs:
            return dirs[other]
    return None


def default_config(model_type: str) -> dict[str, Any] | None:
    """transformers' default config of `model_type` as a dict (its `dtype` as a name), or None where transformers
    cannot make one (the build then fails and says why)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        config: Any = CONFIG_MAPPING[model_type]()
        data = config.to_dict()
    except Exception:  # noqa: BLE001 - a config that cannot be made fails the build, which says why
        return None
    dtype = getattr(config, "dtype", None)
    data["dtype"] = None if dtype is None else str(dtype).replace("torch.", "")
    return data


__all__ = ["model_types", "parent_type", "default_config"]

"""Where the inputs of a byte figure came from: the config a source is built from (transformers' default config for
`hf:TYPE`) and the dtype the weights and caches are counted in (the config's, the overrides', or bfloat16 where a
transformers config names none, said so). `archviz cost`, the site's cost and the gallery choose the dtype here, so
they count the same model in the same bytes. No torch."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Mapping

DEFAULT_DTYPE = "bfloat16"  # what a transformers config naming no dtype is counted in (checkpoints ship in it)
DTYPE_KEYS = ("dtype", "torch_dtype")


@dataclass(frozen=True, slots=True)
class DtypeChoice:
    dtype: str | None  # the dtype counted in; None: as the code builds it (a model.py, a factory)
    origin: str  # "config" | "given" (the overrides) | "default" (bfloat16, the config names none) | "code"
    said: str  # one line for a reader: "bfloat16 (the config names none)"

    def json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "origin": self.origin, "said": self.said}


def config_said(spec: str) -> str | None:
    """What builds the model's config, where a reader could not guess it: `hf:TYPE` builds transformers' default
    config for TYPE (no checkpoint's config.json). None for other sources."""
    if spec.startswith("hf:"):
        return f"transformers' default config for {spec[3:]}"
    return None


def built_dtype_said(spec: str, config: Mapping[str, Any]) -> str | None:
    """Where the dtype a model was built in came from, for its stored bytes: the config's (or an override's) where
    it names one, else the default of the code that built it (a transformers config naming none builds float32, and
    cost figures count it in bfloat16); None for a model whose own code sets its dtypes (a model.py)."""
    named = config.get("dtype") or config.get("torch_dtype")
    if spec.startswith("hf:") or "model_type" in config:
        if isinstance(named, str) and named:
            return f"the config's dtype, {named}"
        return f"the config names no dtype: as transformers builds it (cost counts {DEFAULT_DTYPE})"
    return None


def config_of(source: str) -> dict[str, Any] | None:
    """The transformers config a source is built from, as a dict: a type's default, a config.json's fields; None
    for other sources (a model.py, a factory) and for a file that is not a transformers config."""
    if source.startswith("hf:"):
        from ..sources.hf_types import default_config

        return default_config(source[3:]) or {}
    path = os.path.join(source, "config.json") if os.path.isdir(source) else source
    if not (path.endswith(".json") and os.path.isfile(path)):
        return None
    from ..errors import ArchvizError
    from ..files.safejson import load_config_file

    try:
        data = load_config_file(path)  # bounded, regular files only (a FIFO would hang a plain open)
    except ArchvizError:
        return None  # the build says what is wrong with it
    if not isinstance(data, dict) or "model_type" not in data:
        return None
    return {**data, "dtype": data.get("dtype") or data.get("torch_dtype")}


def dtype_choice(source: str, overrides: Mapping[str, Any], config: Mapping[str, Any] | None = None
                 ) -> DtypeChoice:
    """The dtype `source` is counted in: the overrides' where they name one, else the config's, else bfloat16 for
    a transformers config (DEFAULT_DTYPE, said so), else the code's own. bfloat16 given for a config that names
    none or names bfloat16 is said as the default or the config's (the gallery gives it so; `cost` chooses it: one
    records-cache entry, one word). `config`: config_of(source) where the caller read it already."""
    given = next((overrides[k] for k in DTYPE_KEYS if k in overrides), None)
    if given is not None and str(given).replace("torch.", "") != DEFAULT_DTYPE:
        return DtypeChoice(str(given).replace("torch.", ""), "given", f"{given} (as the overrides give it)")
    config = config_of(source) if config is None else config
    if config is None:
        return DtypeChoice(DEFAULT_DTYPE, "given", f"{given} (as the overrides give it)") if given is not None \
            else DtypeChoice(None, "code", "as the code builds it")
    named = config.get("dtype") or config.get("torch_dtype")
    named = named if isinstance(named, str) else None
    if given is not None and named and named.replace("torch.", "") != DEFAULT_DTYPE:  # given over the config's
        return DtypeChoice(DEFAULT_DTYPE, "given", f"{given} (as the overrides give it)")
    if named:
        return DtypeChoice(named.replace("torch.", ""), "config", f"{named} (the config's)")
    return DtypeChoice(DEFAULT_DTYPE, "default", f"{DEFAULT_DTYPE} (the config names none)")


__all__ = ["DEFAULT_DTYPE", "DtypeChoice", "built_dtype_said", "config_of", "config_said", "dtype_choice"]

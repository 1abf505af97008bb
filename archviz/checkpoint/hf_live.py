"""transformers' own checkpoint conversions, run by transformers, as one more candidate ruleset.

When ``from_pretrained`` loads a checkpoint it renames keys and converts tensors: per-model lists of
``WeightRenaming`` / ``WeightConverter`` / ``PrefixChange`` in ``transformers/conversion_mapping.py`` (251 model types
and classes in transformers 5.23), scoped to each sub-model, then the "legacy" renames (``LayerNorm.gamma`` →
``weight``, ...), then it adds or strips the base-model prefix; keys matching ``_keys_to_ignore_on_load_unexpected``
are skipped. The hand-written rulesets in ``rules/transformers.json`` cover a few families; this covers every model
transformers knows, exactly as the installed version loads it, because transformers itself renames each name.

The record carries the facts the lookup needs (``extras["transformers_loading"]``, written at build time without
building transformers' mapping table, which costs more than a small model's walk); the transforms are fetched
here, when a checkpoint is compared. Without transformers installed, or for records of other sources, there is no
such ruleset and the hand-written ones remain.

Checkpoint tensors a converter joins (``MergeModulelist``, ``Concatenate``: per-expert tensors into one) or reshapes
(``Transpose``, ``PermuteForRope``) are compared by sums, like archviz's own fuse rules; one a converter splits
(``Chunk``, ``Split``: a fused ``qkv`` into ``q``, ``k``, ``v``) is compared with the sum of the model tensors it
becomes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterable
from typing import Any

from .rules import Fuse, Label, Ruleset

__all__ = ["FACTS_KEY", "LIVE_NAME", "LiveMapper", "live_ruleset"]

#: The record extra written at build time for transformers models.
FACTS_KEY = "transformers_loading"
#: The name the live ruleset goes by in results (``rules.ruleset.name``, ``rules.scores``).
LIVE_NAME = "transformers:from_pretrained"


def _conversions(facts: dict[str, Any]) -> list[Any]:
    """The transforms ``transformers.conversion_mapping.get_model_conversion_mapping(model)`` returns for the model
    these facts describe: the same lookup (class name first, then model_type; custom code skipped unless
    registered), the same scoping of sub-models and the same skipping of sub-models an ancestor already covers."""
    from transformers.conversion_mapping import USER_REGISTERED_MAPPINGS, get_checkpoint_conversion_mapping

    base = facts.get("base_model_prefix") or ""
    seen: defaultdict[str, list[str]] = defaultdict(list)
    out: list[Any] = []

    def covered(key: str, path: str) -> bool:
        return any(s == "" or path.startswith(s + ".") for s in seen[key])

    for path, cls, model_type, custom in facts.get("submodels", ()):
        if custom and cls not in USER_REGISTERED_MAPPINGS and model_type not in USER_REGISTERED_MAPPINGS:
            continue
        if covered(cls, path):
            continue
        conversions = get_checkpoint_conversion_mapping(cls)
        via_class = conversions is not None
        if not via_class:
            if model_type and covered(model_type, path):
                continue
            if model_type is not None:
                conversions = get_checkpoint_conversion_mapping(model_type)
        if conversions is None:
            continue
        if path != "":
            scope = path.removeprefix(base).removeprefix(".")
            for t in conversions:
                t.scope_prefix = scope
                t.base_model_prefix = base
        out.extend(conversions)
        seen[cls].append(path)
        if not via_class and model_type:
            seen[model_type].append(path)
    out.extend(get_checkpoint_conversion_mapping("legacy") or ())
    return out


def _ops(conv: Any) -> str:
    return " + ".join(repr(op) for op in getattr(conv, "operations", None) or ()) or type(conv).__name__


class LiveMapper:
    """checkpoint name → (model name, conversion or None, the other model names a split conversion fills).

    The renaming is transformers' own (``apply_renamings``, then at most one converter's ``rename_source_key``); only
    the final base-model-prefix step, a two-line lookup in the model's names, is written out here."""

    def __init__(self, transforms: list[Any], base_model_prefix: str, model_names: Collection[str],
                 checkpoint_names: Iterable[str]):
        from transformers.core_model_loading import (
            GroupWeightRename, WeightConverter, apply_renamings, dot_natural_key,
        )

        self.renamings = [t for t in transforms if not isinstance(t, WeightConverter)]
        self.converters = [t for t in transforms if isinstance(t, WeightConverter)]
        self.base = base_model_prefix
        self.names = model_names
        self.fuses: dict[int, Fuse] = {}
        groups = [t for t in self.renamings if isinstance(t, GroupWeightRename)]
        if groups:  # their guard arms on the first key it matches, in the order transformers reads keys
            for n in sorted(checkpoint_names, key=dot_natural_key):
                for g in groups:
                    g.rename_source_key(n)
        self._apply_renamings = apply_renamings

    def _fuse(self, conv: Any) -> Fuse:
        f = self.fuses.get(id(conv))
        if f is None:
            f = self.fuses[id(conv)] = Fuse(" | ".join(conv.source_patterns), conv.target_patterns[0],
                                            f"transformers {_ops(conv)}", conv.compiled_sources)
        return f

    def __call__(self, name: str) -> tuple[str, Fuse | None, tuple[str, ...]]:
        key = self._apply_renamings(name, self.renamings)
        conv = None
        for c in self.converters:
            renamed, pattern = c.rename_source_key(key)
            if pattern is not None:
                key, conv = renamed, c
                break
        base = self.base
        if base:
            stripped = re.sub(f"^{base}.", "", key, count=1)
            if key.startswith(base) and stripped in self.names:
                key = stripped
            elif f"{base}.{key}" in self.names:
                key = f"{base}.{key}"
        if conv is None:
            return key, None, ()
        others: tuple[str, ...] = ()
        first = conv.target_patterns[0]
        if len(conv.target_patterns) > 1 and first in key:
            others = tuple(key.replace(first, t, 1) for t in conv.target_patterns[1:])
        return key, self._fuse(conv), others


def live_ruleset(record_facts: dict[str, Any] | None, model_type: str | None, model_names: Collection[str],
                 checkpoint_names: Iterable[str]) -> tuple[Ruleset | None, str | None]:
    """(the ruleset, None), or (None, why not) when there is none to offer (not a transformers record, or
    transformers not importable); (None, None) when transformers has nothing to say about this model."""
    if not record_facts:
        return None, None
    try:
        import transformers

        transforms = _conversions(record_facts)
    except Exception as e:  # noqa: BLE001 - an old or broken transformers: fall back to the hand-written rules
        return None, f"transformers' own conversions not applied ({type(e).__name__}: {e})"
    ignore = tuple(Label(p, "ignored on load", "transformers skips this key when it loads the model "
                                               "(_keys_to_ignore_on_load_unexpected)", re.compile(p))
                   for p in record_facts.get("ignore_unexpected", ()))
    if not transforms and not ignore:
        return None, None
    mapper = LiveMapper(transforms, record_facts.get("base_model_prefix") or "", model_names, checkpoint_names)
    classes = [s[1] for s in record_facts.get("submodels", ())]
    n_conv = len(mapper.converters)
    about = (f"the renames and conversions transformers {transformers.__version__} applies when from_pretrained "
             f"loads {classes[0] if classes else 'this model'}: {len(transforms) - n_conv} renames and {n_conv} "
             "conversions from its conversion_mapping.py, applied by transformers itself")
    provenance = "; ".join(f"{type(t).__name__}({', '.join(t.source_patterns)} -> {', '.join(t.target_patterns)}"
                           + (f"; {_ops(t)}" if t in mapper.converters else "")
                           + (f"; under {t.scope_prefix}" if t.scope_prefix else "") + ")" for t in transforms)
    return Ruleset(name=LIVE_NAME, about=about, provenance=provenance, file="",
                   model_types=(model_type,) if model_type else (), source_kinds=("hf",), ignore=ignore,
                   mapper=mapper), None

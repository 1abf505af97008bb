"""transformers' own load-time renames as diff renames, for a side transformers built (its `transformers_loading`
extra): what `archviz diff` and `archviz.diff` match modules by after the built-in rules."""

from __future__ import annotations

from typing import Any, Callable


def live_renames(a: Any, b: Any) -> list[tuple[str, Callable[[str], str]]]:
    """transformers' own load-time renames (`archviz.checkpoint.hf_live`) for a side built by transformers, reading
    the other side's names as a checkpoint's: made on first use, so a diff with nothing left to match by rule never
    imports transformers' conversion tables."""
    out = []
    for model, other in ((a, b), (b, a)):
        from ..checkpoint.hf_live import FACTS_KEY, LIVE_NAME

        facts = model.extra(FACTS_KEY)
        if not facts:
            continue
        made: list[Any] = []

        def rename(name: str, model: Any = model, other: Any = other, facts: Any = facts, made: list = made) -> str:
            if not made:
                from ..checkpoint.hf_live import live_ruleset

                names = [n for n, _ in model.iter_tensors()]
                ruleset, _ = live_ruleset(facts, dict(model.source.config).get("model_type"), names,
                                          [n for n, _ in other.iter_tensors()])
                made.append(ruleset)
            return made[0].rename(name) if made[0] is not None else name

        out.append((LIVE_NAME, rename))
    return out


__all__ = ["live_renames"]

"""What a diff says first: the config keys that changed, the layer count of every stack, the headline totals
(parameters, active, weight bytes, KV cache and FLOPs) and how many modules moved in the source only. Pure function
of two records and their diff's totals and folded entries (no torch)."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from ..records import ModelRecord
from .result import ConfigChange, Delta, Folded, Stack, Summary

# The totals a summary shows, by the start of their name, in this order (the rest stay in the full totals table).
# A name ending in a space is a start ("decode FLOPs per token at L=32,768"); the others are whole names.
_HEADLINE = ("parameters", "active parameters", "stored bytes", "KV-cache bytes per token", "KV-cache bytes at ",
             "decode FLOPs ", "prefill FLOPs ")


def lines_only(f: Folded) -> bool:
    """Whether an entry's changes are all of aspect "lines": the code moved in its file, nothing else changed."""
    return f.kind == "changed" and bool(f.changes) and all(c.aspect == "lines" for c in f.changes)


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, Mapping) and k.endswith("_config"):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _text(v: Any) -> str:
    try:
        s = json.dumps(v, sort_keys=True, default=str)
    except (TypeError, ValueError):
        s = str(v)
    return s if len(s) <= 80 else s[:79] + "…"


def config_changes(a: ModelRecord, b: ModelRecord) -> tuple[ConfigChange, ...]:
    """Every config key whose value differs, in A's key order then B's new keys."""
    ca, cb = _flat(dict(a.source.config or {})), _flat(dict(b.source.config or {}))
    keys = list(ca) + [k for k in cb if k not in ca]
    return tuple(ConfigChange(k, _text(ca[k]) if k in ca else None, _text(cb[k]) if k in cb else None)
                 for k in keys if k not in ca or k not in cb or ca[k] != cb[k])


def _stacks_of(record: ModelRecord) -> dict[str, int]:
    """Top-level lists of blocks: a module whose children are all numbered items, outside any numbered item."""
    children: dict[str, list[str]] = {}
    for m in record.modules:
        if m.path:
            parent, _, name = m.path.rpartition(".")
            children.setdefault(parent, []).append(name)
    return {p: len(names) for p, names in children.items()
            if p and names and all(n.isdigit() for n in names) and not any(s.isdigit() for s in p.split("."))}


def _kinds(record: ModelRecord) -> tuple[str, str]:
    """(the main layer list's path, "1 dense + 2 MoE") from the grouping's layer kinds; ("", "") without."""
    from ..group import grouping

    layers = grouping(record).get("layers") or {}
    kinds = [(k["name"], len(k.get("layers") or ())) for k in layers.get("kinds") or ()]
    if len(kinds) < 2:
        return layers.get("path", ""), ""
    short = [(name[:-len(" layer")] if name.endswith(" layer") else name, n) for name, n in kinds]
    return layers.get("path", ""), " + ".join(f"{n} {name}" for name, n in short)


def stacks(a: ModelRecord, b: ModelRecord) -> tuple[Stack, ...]:
    sa, sb = _stacks_of(a), _stacks_of(b)
    (pa, ka), (pb, kb) = _kinds(a), _kinds(b)
    return tuple(Stack(p, sa.get(p, 0), sb.get(p, 0), ka if p == pa else "", kb if p == pb else "")
                 for p in list(sa) + [p for p in sb if p not in sa])


def headline(totals: Sequence[Delta]) -> tuple[Delta, ...]:
    out = []
    for start in _HEADLINE:
        out += [t for t in totals if (t.name.startswith(start) if start.endswith(" ") else t.name == start)
                and t not in out and t.a is not None and t.b is not None]
    return tuple(out)


def summarize(a: ModelRecord, b: ModelRecord, totals: Sequence[Delta], folded: Sequence[Folded]) -> Summary:
    return Summary(config_changes(a, b), stacks(a, b), headline(totals),
                   sum(f.count for f in folded if lines_only(f)))


__all__ = ["summarize", "lines_only", "config_changes", "stacks", "headline"]

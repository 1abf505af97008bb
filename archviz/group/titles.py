"""Words: what distinguishes kinds, in words a person reads ("5 reusing layers", "dense MLP")."""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from ..records import ModuleRecord
from .kinds import ABSENT, Kinds, hashable

_ACRONYMS = {"kv": "KV", "moe": "MoE", "mlp": "MLP", "mtp": "MTP", "hc": "HC", "ffn": "FFN", "lm": "LM", "qk": "QK",
             "rope": "RoPE", "csa": "CSA", "hca": "HCA"}


_BOOL_WORDS = {  # (attribute, value) -> (priority, adjective)
    ("is_kv_source", True): (1.0, "KV-source"), ("is_kv_source", False): (1.0, "reusing"),
    ("is_index_source", True): (1.5, "index-source"), ("is_index_source", False): (1.5, "index-reusing"),
    ("owns_k", True): (1.8, "key-owning"),
    ("hash", True): (1.2, "hash-routed"), ("hash", False): (1.2, "score-routed"),
    ("is_hash", True): (1.2, "hash-routed"), ("is_hash", False): (1.2, "score-routed"),
    ("is_sliding", True): (1.1, "sliding-window"), ("is_sliding", False): (1.1, "global"),
    ("use_sliding_window", True): (1.1, "sliding-window"),
}


_NOUNS = {"layers": ("layer", "layers"), "layer": ("layer", "layers"), "h": ("layer", "layers"),
          "blocks": ("block", "blocks"), "block": ("block", "blocks"), "mtp": ("MTP layer", "MTP layers"),
          "experts": ("expert", "experts"), "heads": ("head", "heads")}


def _human(name: str) -> str:
    return " ".join(_ACRONYMS.get(w.lower(), w) for w in name.split("_") if w)


def nouns(list_name: str, siblings: Iterable[str]) -> tuple[str, str]:
    hit = _NOUNS.get(list_name)
    if hit is None:
        h = _human(list_name)
        hit = (h[:-1], h) if h.endswith("s") and len(h) > 1 else (h, h + "s")
    if list_name == "experts" and any("shared" in s for s in siblings):
        hit = ("routed expert", "routed experts")
    return hit


def _class_words(classes: list[str]) -> dict[str, str]:
    """Class names with their common model prefix cut at a word boundary: DeepseekV3MLP/DeepseekV3MoE -> MLP/MoE."""
    real = [c for c in classes if isinstance(c, str)]
    if len(real) < 2:
        return {c: c for c in real}
    prefix = os.path.commonprefix(real)
    cut = len(prefix)
    while cut > 0 and not all(_word_start(c, cut) for c in real):
        cut -= 1
    out = {c: c[cut:] or c for c in real}
    moe = any("moe" in v.lower() or "sparse" in v.lower() for v in out.values())
    for c, v in out.items():
        if "moe" in v.lower() or ("sparse" in v.lower() and "block" in v.lower()):
            out[c] = "MoE"
        elif moe and ("mlp" in v.lower() or "dense" in v.lower() or "feedforward" in v.lower()):
            out[c] = "dense"
    return out


def _word_start(s: str, i: int) -> bool:
    if i >= len(s):
        return True
    if not s[i].isupper():
        return False
    prev = s[i - 1]
    nxt = s[i + 1] if i + 1 < len(s) else ""
    return prev.islower() or prev.isdigit() or (prev.isupper() and nxt.islower())


def _attr_word(name: str, v: Any) -> tuple[float, str | None, str | None] | None:
    """(priority, adjective before the noun, phrase after it) for an attribute value; None: no good word."""
    if v is ABSENT or v is None:
        return None
    if isinstance(v, bool):
        w = _BOOL_WORDS.get((name, v))
        if w:
            return w[0], w[1], None
        base = re.sub(r"^(is|has|use|uses|with|enable|enabled)_", "", name)
        return (5, _human(base).replace(" ", "-"), None) if v else (6, None, f"without {_human(base)}")
    if isinstance(v, str):
        if "attention" in v or "type" in name or name in ("mode", "kind"):
            return 0, _human(v).replace("-", " "), None
        return 7, None, f"{_human(name)} {v}"
    if isinstance(v, (int, float)):
        if "compress" in name and ("ratio" in name or "rate" in name) or name == "ratio":
            return 0.5, ("sliding-window-only" if v == 0 else f"compress-ratio-{v:g}"), None
        if name == "sliding_window":
            return 0.6, f"sliding-window-{v:g}", None
        return 7, None, f"{_human(name)} {v:g}"
    if isinstance(v, tuple):
        return 8, None, f"{_human(name)} {list(v)}"
    return None


class Features:
    """Per kind: the attributes and children of its representative's subtree, lists collapsed to their kinds."""

    MAX_DEPTH = 3

    def __init__(self, index: dict[str, ModuleRecord], kinds: Kinds):
        self.index = index
        self.kinds = kinds
        self.memo: dict[tuple[int, int], dict] = {}
        self.words_memo: dict[tuple, tuple[list[str], list[str]]] = {}

    def of(self, path: str, depth: int = 0) -> dict:
        k = self.kinds.kid[path]
        hit = self.memo.get((k, depth))
        if hit is not None:
            return hit
        m = self.index[path]
        dropped = self.kinds.dropped
        out: dict[tuple, Any] = {("cls", ""): m.class_name}
        for a, v in m.attributes:
            if v is not None and not dropped(m.class_name, a):
                out[("a", "", a)] = hashable(v)
        if depth < self.MAX_DEPTH:
            seen: set[int] = set()
            cut = len(path) + 1 if path else 0
            for c in m.children:
                name = c[cut:]
                rel = name
                if name.isdigit():
                    ck = self.kinds.kid[c]
                    if ck in seen:
                        continue
                    seen.add(ck)
                    rel = "*"
                out[("c", rel)] = self.index[c].class_name
                for key, v in self.of(c, depth + 1).items():
                    if key[0] == "cls":
                        continue
                    sub = key[1]
                    out[(key[0], f"{rel}.{sub}" if sub else rel) + key[2:]] = v
        self.memo[(k, depth)] = out
        return out

    def words(self, rep_of: dict[int, str], k: int, group: tuple[int, ...]) -> tuple[list[str], list[str]]:
        """Adjectives and phrases that tell kind k apart from the other kinds of `group`."""
        key = (k, group)
        hit = self.words_memo.get(key)
        if hit is not None:
            return hit
        feats = {g: self.of(rep_of[g]) for g in group}
        others = [g for g in group if g != k]
        keys = set()
        for f in feats.values():
            keys.update(f)
        cands = []
        for fk in keys:
            vals = {g: feats[g].get(fk, ABSENT) for g in group}
            if len(set(map(repr, vals.values()))) < 2:
                continue
            v = vals[k]
            typ = fk[0]
            depth = fk[1].count(".") + (1 if fk[1] else 0)
            if typ == "a":
                w = _attr_word(fk[2], v)
            elif typ == "c" or typ == "cls":
                if v is ABSENT:
                    leaf = fk[1].rsplit(".", 1)[-1]
                    w = (6, None, f"without {_human(leaf)}") if leaf != "*" else None
                elif all(x is not ABSENT for x in vals.values()):
                    cw = _class_words(sorted({x for x in vals.values()}))
                    w = (3, cw.get(v, v), None)
                else:
                    leaf = fk[1].rsplit(".", 1)[-1]
                    w = (4, None, f"with {_human(leaf)}") if leaf != "*" else None
            else:
                w = None
            if w is None:
                continue
            if typ == "a":  # an attribute tells apart only kinds that both have it (presence is a "c" key)
                sep = frozenset(g for g in others if vals[g] is not ABSENT and repr(vals[g]) != repr(v))
            else:
                sep = frozenset(g for g in others if repr(vals[g]) != repr(v))
            if sep:
                cands.append(((w[0], depth, repr(fk)), w, sep))
        cands.sort(key=lambda c: c[0])
        remaining = set(others)
        chosen = []
        for c in cands:
            if c[2] & remaining:
                chosen.append(c)
                remaining -= c[2]
            if not remaining:
                break
        for c in list(reversed(chosen)):
            rest = [x for x in chosen if x is not c]
            covered = set().union(*[x[2] for x in rest]) if rest else set()
            if covered >= set(others):
                chosen = rest
        pre = [c[1][1] for c in reversed(chosen) if c[1][1]]
        post = [c[1][2] for c in chosen if c[1][2]]
        out = (_dedupe(pre), _dedupe(post))
        self.words_memo[key] = out
        return out


def _dedupe(xs: list[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in xs if not (x in seen or seen.add(x))]


def phrase(count: int | None, pre: list[str], noun: str, post: list[str], index: str | None = None) -> str:
    parts = []
    if count is not None:
        parts.append(str(count))
    parts.extend(pre)
    parts.append(noun)
    if index is not None:
        parts.append(index)
    text = " ".join(parts)
    if post:
        text += " " + ", ".join(post)
    return text

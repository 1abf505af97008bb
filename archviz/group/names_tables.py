"""The tables of a names file beside its titles and `[groups]`: `[dims]` and `[descriptions]` (read by
`archviz.group.names.load_names`, which stays the one reader of names files).

    [dims]                              # rename dims wherever shapes are shown (site, terminal, JSON)
    "n_groups × o_lora_rank" = "groups × rank"   # a name as archviz finds it: a config field or a product of two
    dim = "d"
    "8192" = "groups × rank"            # a width, named even where the config leaves it unnamed (wins over a name)
    T = "tokens"                        # a symbol of the shape pass (B, T) gets this word

    [descriptions]                      # a node's description, keyed as titles are (path, glob, class, kind title)
    "layers.*.attn.wo_b" = "Maps the grouped heads back to the model width."
    "5 reusing layers" = "Layers that reuse the previous layer's top-k."

An annotations file's description (`archviz build` with annotations) wins over a names file's.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Mapping

from ..errors import ArchvizError
from ..records.recordcheck import want_str, want_table

TABLES = ("dims", "descriptions")


def _bad(where: str, table: str, what: str, hint: str) -> ArchvizError:
    return ArchvizError(f"{where}: [{table}] {what}", hint=hint)


_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _plain(text: str, where: str, table: str, key: str, lines: bool = False) -> str:
    """Text that reaches a terminal: no control characters (escape sequences) and no bidi overrides; a
    description may have line breaks and tabs."""
    ok = "\n\t" if lines else ""
    bad = next((c for c in text if (unicodedata.category(c) == "Cc" and c not in ok) or c in _BIDI), None)
    if bad is not None:
        raise _bad(where, table, f"{key[:40]!r} holds the control character U+{ord(bad):04X}",
                   "names are plain text: remove it")
    return text


def check_dims(raw: Any, where: str) -> dict[str, str]:
    hint = 'e.g. [dims] "n_groups × o_lora_rank" = "groups × rank", or "8192" = "groups × rank"'
    want_table("dims", raw, what='a table of name = "new name"')
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not k.strip():
            raise _bad(where, "dims", "has an empty key", hint)
        want_str(f"dims.{k}", v, nonempty=True)
        if re.fullmatch(r"\s*-?\d+\s*", k) and int(k) < 1:
            raise _bad(where, "dims", f"{k!r} is not a width (a positive integer)", hint)
        key = k.strip()
        if key in out:
            raise _bad(where, "dims", f"{key!r} is given twice", "give each dim one name")
        out[key] = _plain(v.strip(), where, "dims", key)
    return out


def check_descriptions(raw: Any, where: str) -> dict[str, str]:
    want_table("descriptions", raw, what='a table of key = "Description"')
    for k, v in raw.items():
        want_str(f"descriptions.{k}", v, nonempty=True)
    return {str(k): _plain(v.strip(), where, "descriptions", str(k), lines=True) for k, v in raw.items()}


def split_tables(data: dict[str, Any], where: str) -> dict[str, dict[str, str]]:
    """Remove `[dims]` and `[descriptions]` from a names file's top-level table; return them checked."""
    out: dict[str, dict[str, str]] = {}
    for name, check in (("dims", check_dims), ("descriptions", check_descriptions)):
        if isinstance(data.get(name), dict):
            out[name] = check(data.pop(name), where)
    return out


def node_descriptions(grouping: Any) -> dict[str, str]:
    """node id -> description, from a grouping made with a names file's `[descriptions]`."""
    nodes = grouping.get("nodes") if isinstance(grouping, Mapping) else None
    return {str(n["id"]): n["description"] for n in (nodes or ())
            if isinstance(n, Mapping) and isinstance(n.get("description"), str) and n["description"]}


__all__ = ["TABLES", "check_descriptions", "check_dims", "node_descriptions", "split_tables"]

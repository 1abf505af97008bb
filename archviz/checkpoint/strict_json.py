"""A safetensors header's JSON read as the safetensors library reads it (serde_json), not as ``json.loads`` does.

``json.loads`` is laxer than serde_json in ways a checkpoint can exploit or a CI gate can trip on. Each difference
below was measured against the safetensors library (``tests/adversarial/test_parity_safetensors.py`` holds them),
and each is refused here as the library refuses it:

- nesting of 128 or more brackets (serde_json's recursion limit);
- a lone UTF-16 surrogate anywhere (``"\\ud800"``), which no UTF-8 file can hold and no terminal can print;
- ``NaN``, ``Infinity`` and numbers beyond the float range (``1e400``; Python reads ``inf``);
- ``-0`` as a dimension or an offset (serde_json reads it as a float);
- a field of a tensor entry (``dtype``, ``shape``, ``data_offsets``) or ``__metadata__`` given twice (serde's
  derived structs refuse duplicate fields; a tensor name given twice keeps its last entry, as in a map);
- integers of more than 308 digits (serde_json reads an integer beyond 64 bits as a float, out of range past
  about 1.8e308).

Used on headers that miss the bulk path's canonical layout (``header.py``); the canonical layout holds none of
these by construction (no escapes, digits only where numbers go).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from archviz.errors import CheckpointError
from archviz.files.safejson import MAX_DEPTH, JSONLimitError, check_text

__all__ = ["ENTRY_FIELDS", "HEADER_INT_DIGITS", "decode_header_json"]

#: The fields of a tensor entry, which serde reads into a struct (a duplicate is an error there).
ENTRY_FIELDS = frozenset(("dtype", "shape", "data_offsets"))
#: Longest integer literal a header may hold anywhere (serde_json reads longer ones as out-of-range floats).
HEADER_INT_DIGITS = 308
_NEG_ZERO = re.compile(r"-0(?![0-9.eE])")


class _NegZero(int):
    """``-0`` as read: an int that is not ``int``, so every ``type(d) is int`` check refuses it as a dimension or
    an offset (serde_json reads ``-0`` as a float)."""


def _no_constant(name: str) -> Any:
    raise JSONLimitError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JSONLimitError(f"number {text[:40]} is out of range")
    return value


def _int_or_neg_zero(text: str) -> int:
    return _NegZero(0) if text == "-0" else int(text)


def decode_header_json(text: str, where: str, bad: Callable[[str, str], CheckpointError]) -> Any:
    """The header text's JSON value, or ``bad(where, what)`` raised for anything serde_json refuses."""
    dups: list[tuple[dict[str, Any], list[tuple[str, Any]]]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(items)
        if len(d) != len(items):
            dups.append((d, items))
        return d

    try:
        obj = json.loads(text, object_pairs_hook=pairs, parse_constant=_no_constant, parse_float=_finite,
                         parse_int=_int_or_neg_zero if _NEG_ZERO.search(text) else None)
        check_text(text, obj, max_nesting=MAX_DEPTH, max_int_digits=HEADER_INT_DIGITS)
    except json.JSONDecodeError as e:
        raise bad(where, f"header is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise bad(where, f"header is not valid JSON (nested more than {MAX_DEPTH} levels deep)") from None
    except JSONLimitError as e:
        raise bad(where, f"header is not valid JSON ({e})") from None
    except ValueError as e:  # e.g. an integer literal beyond Python's 4300-digit limit
        raise bad(where, f"header is not valid JSON ({str(e).split(';')[0]})") from None
    if dups and type(obj) is dict:
        _check_duplicates(obj, dups, where, bad)
    return obj


def _check_duplicates(obj: dict[str, Any], dups: list[tuple[dict[str, Any], list[tuple[str, Any]]]], where: str,
                      bad: Callable[[str, str], CheckpointError]) -> None:
    entries = {id(v) for v in obj.values()}
    for d, items in dups:
        seen: set[str] = set()
        for k, _ in items:
            if k in seen:
                if d is obj and k == "__metadata__":
                    raise bad(where, "header gives __metadata__ twice")
                if id(d) in entries and k in ENTRY_FIELDS:
                    name = next(n for n, v in obj.items() if v is d)
                    raise bad(where, f"tensor {ascii(name)[:80]}: {k!r} is given twice")
            seen.add(k)

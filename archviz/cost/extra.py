"""The `cost` extra a records file carries, checked when the file is read: every part the cost report, the curve and
the site's cost section read has the type `archviz.cost.measure` gives it (see archviz/cost/report.py), so that a
damaged or hand-edited file is refused then, with the part named, instead of failing in a renderer."""

from __future__ import annotations

from typing import Any
from ..errors import option


def _fail(where: str, what: str, v: Any) -> None:
    shown = repr(v)
    raise ValueError(f"extras.cost.{where}: {what}, not {shown[:60] + '…' if len(shown) > 60 else shown}")


def _int(where: str, v: Any, *, optional: bool = False, positive: bool = False) -> None:
    if optional and v is None:
        return
    if type(v) is not int or v < (1 if positive else 0):
        _fail(where, ("a positive" if positive else "a non-negative") + " integer" + (" or null" if optional else ""),
              v)


def _number(where: str, v: Any, *, optional: bool = False) -> None:
    if optional and v is None:
        return
    if type(v) not in (int, float) or v != v or v < 0:
        _fail(where, "a non-negative number" + (" or null" if optional else ""), v)


def _str(where: str, v: Any, *, optional: bool = False) -> None:
    if not (type(v) is str or (optional and v is None)):
        _fail(where, "a string" + (" or null" if optional else ""), v)


def _strs(where: str, v: Any) -> None:
    if type(v) is not list or any(type(x) is not str for x in v):
        _fail(where, "a list of strings", v)


def _counts(where: str, v: Any) -> None:
    if type(v) is not dict:
        _fail(where, "an object of module paths to counts", v)
    for k, n in v.items():
        _int(f"{where}[{k!r}]", n)


def _pass(where: str, d: Any) -> None:
    if type(d) is not dict:
        _fail(where, "an object", d)
    for k in ("B", "T", "start"):
        _int(f"{where}.{k}", d.get(k))
    _counts(f"{where}.flops", d.get("flops"))
    _counts(f"{where}.calls", d.get("calls", {}))
    unknown = d.get("unknown", {})
    if type(unknown) is not dict:
        _fail(f"{where}.unknown", "an object of module paths to reasons", unknown)
    for k, why in unknown.items():
        _strs(f"{where}.unknown[{k!r}]", why)
    _strs(f"{where}.notes", d.get("notes", []))
    _int(f"{where}.attended_flops", d.get("attended_flops"), optional=True)
    _counts(f"{where}.masked_flops", d.get("masked_flops", {}))
    _counts(f"{where}.mixing_flops", d.get("mixing_flops", {}))
    _counts(f"{where}.unknown_calls", d.get("unknown_calls", {}))


def check(c: Any) -> None:
    """Raise ValueError unless `c` (a records file's `extras.cost`) holds what the cost renderers read."""
    if type(c) is not dict:
        _fail("", "an object", c)
    _int("batch", c.get("batch"), positive=True)
    _int("seq", c.get("seq"), positive=True)
    _int("context", c.get("context"))
    _pass("prefill", c.get("prefill"))
    if c.get("decode") is not None:
        _pass("decode", c["decode"])
    kv = c.get("kv")
    if type(kv) is not dict:
        _fail("kv", "an object", kv)
    _str("kv.source", kv.get("source"), optional=True)
    entries = kv.get("entries")
    if type(entries) is not list:
        _fail("kv.entries", "a list", entries)
    for i, e in enumerate(entries):
        at = f"kv.entries[{i}]"
        if type(e) is not dict:
            _fail(at, "an object", e)
        for k in ("path", "name", "dtype", "what"):
            _str(f"{at}.{k}", e.get(k))
        _int(f"{at}.layer", e.get("layer"), optional=True)
        _number(f"{at}.element_bytes", e.get("element_bytes"))
        _int(f"{at}.width", e.get("width"))
        _int(f"{at}.ratio", e.get("ratio"), optional=True, positive=True)
        _int(f"{at}.slots", e.get("slots"), optional=True)
        _int(f"{at}.fixed", e.get("fixed"), optional=True)
        if e.get("ratio") is None and e.get("slots") is None:
            _fail(f"{at}", "a ratio or a number of slots", e)
    _str("layer_list", c.get("layer_list"), optional=True)
    kinds = c.get("layer_kinds") or {}
    if type(kinds) is not dict or any(not str(k).isdigit() or type(v) is not str for k, v in kinds.items()):
        _fail("layer_kinds", "an object of layer numbers to kind names", kinds)
    _number("activation_peak", c.get("activation_peak"), optional=True)
    _strs("notes", c.get("notes", []))
    chosen = c.get("dtype")
    if chosen is not None:
        if type(chosen) is not dict:
            _fail("dtype", "an object of dtype, origin and said", chosen)
        _str("dtype.dtype", chosen.get("dtype"), optional=True)
        _str("dtype.origin", chosen.get("origin"))
        _str("dtype.said", chosen.get("said"))
    unit = c.get("unit")
    if unit is not None and (type(unit) is not dict or any(type(unit.get(k)) is not str for k in ("name", "inputs"))):
        _fail("unit", 'an object of "name" and "inputs" strings', unit)
    if c.get("hardware") is not None:
        from ..errors import ArchvizError
        from .bounds import site_devices

        try:
            site_devices(c)
        except (ArchvizError, TypeError, ValueError, AttributeError) as e:
            why = e.message if isinstance(e, ArchvizError) else e  # its options as tokens, spelled where it is shown
            _fail("hardware", f"devices as `archviz build {option('hardware')}` writes them ({why})", c["hardware"])
    curve = c.get("curve") or []
    if type(curve) is not list:
        _fail("curve", "a list", curve)
    for i, p in enumerate(curve):
        if type(p) is not dict:
            _fail(f"curve[{i}]", "an object", p)
        _int(f"curve[{i}].L", p.get("L"))
        for k in ("flops", "attention", "mlp"):
            _int(f"curve[{i}].{k}", p.get(k))
        _strs(f"curve[{i}].unknown", p.get("unknown", []))


__all__ = ["check"]

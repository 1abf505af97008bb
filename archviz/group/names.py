"""Names files (doc authors' titles): keys by path, glob, class with attributes, class or title, each a title;
`[groups]` gathering named children of a module under one virtual node."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from ..errors import ArchvizError
from ..files.safejson import load_file as load_json
from ..files.safetoml import MAX_TOML_BYTES, load_file as load_toml
from ..records.recordcheck import fail, refused_as, want_str, want_strs, want_table
from .names_tables import split_tables
from ..records import ModuleRecord

# Key kinds, most specific first.
_EXACT, _GLOB, _CLASS_ATTRS, _CLASS, _TITLE = range(5)


def load_names(path: str) -> dict[str, Any]:
    """A names file: TOML or JSON, a flat table (or a `[names]` table) of `key = "Title"`, plus an optional
    `[groups]` table.

    Keys: a module path (`layers.3.attn`) or glob (`layers.*.attn.wo_b`), a class (`Attention`, `class:Attention`),
    a class with attribute values (`Attention[compress_ratio=4]`), or a default title / layer-kind name
    (`"5 reusing layers"`). More specific keys win: path, glob, class with attributes, class, title.

    `[groups]` gathers children of a module under a virtual node: `key = { "Title" = ["attr", ...], ... }`, the key
    as above, each list naming direct children by attribute name:

        [groups]
        "Attention" = { "Grouped output" = ["wo_a", "wo_b"] }

    Wherever a module node matching the key is expanded, the named children it has (at least one) are placed, in
    the order given, under one virtual node titled so, where the first of them stood; its count is the sum of
    theirs. When several keys match a module the most specific wins, as for titles. (JSON: `{"groups": {...}}`.)

    `[dims]` and `[descriptions]` tables rename dims and describe nodes (archviz/group/names_tables.py).

    Returns the titles as `key -> "Title"`, and the groups, if any, under "groups" as `key -> {title -> [attr]}`
    (a dict value; without a `[groups]` table, `"groups" = "Title"` titles a module or class so named, as ever)."""
    where = f"names file {path}"
    # both bounded reads of a regular file (archviz.files): a FIFO or a huge file is refused unread
    if path.lower().endswith(".json"):
        data: Any = load_json(path, what="names", max_bytes=MAX_TOML_BYTES)
    else:
        data = load_toml(path, what="names", where=where)
    with refused_as(lambda m: ArchvizError(f"{where}: {m}", hint='e.g. "layers.*.attn.wo_b" = "Output projection"; '
                                           '[groups] "Attention" = { "Grouped output" = ["wo_a", "wo_b"] }')):
        return _checked(data, where)


def _checked(data: Any, where: str) -> dict[str, Any]:
    """The titles, tables and groups of a decoded names file, each field's type checked (archviz.records.recordcheck)."""
    groups = None
    tables: dict[str, Any] = {}
    want_table("", data, what="a table of key = \"Title\" strings")
    data = dict(data)
    if type(data.get("groups")) is dict:
        groups = data.pop("groups")
    tables = split_tables(data, where)  # [dims], [descriptions]: names_tables.py
    if type(data.get("names")) is dict:
        data = data["names"]
    for k, v in data.items():
        want_str(k, v)
    out: dict[str, Any] = dict(data)
    out.update(tables)
    if groups is not None:
        if "groups" in out:
            raise ArchvizError(f"{where}: \"groups\" is both a title key and the [groups] table",
                               hint="title a module or class named groups as \"path:groups\" or \"class:groups\"")
        _check_groups(groups, where)
        out["groups"] = {k: {t: list(v) for t, v in spec.items()} for k, spec in groups.items()}
    return out


def _check_groups(groups: dict[str, Any], where: str) -> None:
    for k, spec in groups.items():
        want_table(f"groups.{k}", spec, what='a table of "Title" = ["attr", ...]')
        if not spec:
            fail(f"groups.{k}", 'a table of "Title" = ["attr", ...]', spec)
        seen: set[str] = set()
        for t, v in spec.items():
            want_str(f"groups.{k}", t, nonempty=True)
            want_strs(f"groups.{k}.{t}", v, nonempty=True)
            dup = [x for x in v if x in seen or v.count(x) > 1]
            if dup:
                raise ArchvizError(f"{where}: [groups] {k!r}: {dup[0]!r} is listed twice",
                                   hint="a child can be gathered under one title only")
            seen.update(v)


def _parse_value(text: str) -> str:
    return text.strip().strip("\"'").lower()


def _parse_key(key: str) -> list[tuple[int, Any]]:
    """A names key -> the tests it stands for: [(rank, data)]. A bare word is both a class and a path."""
    k = key.strip()
    if k.startswith("class:"):
        return [(_CLASS, k[6:].strip())]
    if k.startswith("path:"):
        p = k[5:].strip()
        return [(_GLOB, p)] if any(c in p for c in "*?[") else [(_EXACT, p)]
    if re.fullmatch(r"[A-Za-z_][\w.]*\[[^\]]*\]", k) and "=" in k:
        cls, _, rest = k.partition("[")
        conds = []
        for part in rest.rstrip("]").split(","):
            if "=" in part:
                a, _, v = part.partition("=")
                negate = a.endswith("!")
                conds.append((a.rstrip("!").strip(), _parse_value(v), negate))
        return [(_CLASS_ATTRS, (cls, conds))]
    if " " in k:
        return [(_TITLE, k)]
    if any(c in k for c in "*?["):
        return [(_GLOB, k)]
    # A bare word is a class or a path ("embed"); a dotted name is a path.
    return ([] if "." in k else [(_CLASS, k)]) + [(_EXACT, k)]


def _attrs_match(module: ModuleRecord, conds: list[tuple[str, str, bool]], cache: dict) -> bool:
    attrs = cache.get("attrs")
    if attrs is None:
        attrs = cache["attrs"] = {k: _parse_value(str(v)) for k, v in module.attributes}
    return all((attrs.get(a) == v) != negate for a, v, negate in conds)


class Titles:
    """Compiled names mapping: each key becomes (rank, test)."""

    def __init__(self, names: dict[str, Any] | None):
        self.exact_paths: dict[str, str] = {}
        self.globs: list[tuple[str, str]] = []
        self.class_attrs: list[tuple[str, list[tuple[str, str, bool]], str]] = []
        self.classes: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        for key, title in (names or {}).items():
            if not isinstance(title, str):  # the "groups" table
                continue
            explicit = key.strip().startswith(("class:", "path:"))  # these override a bare word's guess
            for rank, data in _parse_key(key):
                if rank == _EXACT:
                    if explicit:
                        self.exact_paths[data] = title
                    else:
                        self.exact_paths.setdefault(data, title)
                elif rank == _GLOB:
                    self.globs.append((data, title))
                elif rank == _CLASS_ATTRS:
                    self.class_attrs.append((data[0], data[1], title))
                elif rank == _CLASS:
                    if explicit:
                        self.classes[data] = title
                    else:
                        self.classes.setdefault(data, title)
                else:
                    self.titles[data] = title

    def __bool__(self) -> bool:
        return bool(self.exact_paths or self.globs or self.class_attrs or self.classes or self.titles)

    def title_for(self, node: dict, module: ModuleRecord | None, default: str, paths_exact: bool) -> str | None:
        if module is not None and not node.get("virtual"):
            if paths_exact:
                for p in node["paths"]:
                    hit = self.exact_paths.get(p)
                    if hit is not None:
                        return hit
            rep = node["representative"]
            for pattern, title in self.globs:
                if fnmatch.fnmatchcase(rep, pattern):
                    return title
            cache: dict = {}
            for cls, conds, title in self.class_attrs:
                if cls == module.class_name and _attrs_match(module, conds, cache):
                    return title
            hit = self.classes.get(module.class_name)
            if hit is not None:
                return hit
        return self.titles.get(default)


class Gatherings:
    """Compiled `[groups]` table: which children of a module node gather under which virtual titles."""

    def __init__(self, names: dict[str, Any] | None):
        raw = (names or {}).get("groups")
        self.rules: list[tuple[list[tuple[int, Any]], list[tuple[str, list[str]]]]] = []
        if raw is None or isinstance(raw, str):
            return
        _check_groups(raw, "names")
        for key, spec in raw.items():
            self.rules.append((_parse_key(key), [(t, list(v)) for t, v in spec.items()]))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def match(self, node: dict, module: ModuleRecord) -> list[tuple[str, list[str]]] | None:
        """The gatherings of the most specific key matching a module node (its default title, before names)."""
        best = None
        cache: dict = {}
        for tests, spec in self.rules:
            for rank, data in tests:
                if best is not None and rank >= best[0]:
                    continue
                if rank == _EXACT:
                    hit = data in node["paths"]
                elif rank == _GLOB:
                    hit = fnmatch.fnmatchcase(node["representative"], data)
                elif rank == _CLASS_ATTRS:
                    hit = data[0] == module.class_name and _attrs_match(module, data[1], cache)
                elif rank == _CLASS:
                    hit = data == module.class_name
                else:
                    hit = data == node["title"]
                if hit:
                    best = (rank, spec)
        return best[1] if best else None

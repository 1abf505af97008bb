"""Grouping: fold a model's ~60,000 modules into the few dozen kinds they come in, each with how many there are.

A pure function of records (no torch). `group(record)` returns `record.with_extra("grouping", G)`:

1. Every module gets a structural signature: class, own tensors (name, kind, shape, dtype, counted elements), the
   scalar attributes that change what it does, the kernels it calls, and its children's signatures (computed bottom-up
   in one reverse pre-order pass, interned to small ids). Attributes that merely number a module (`layer_id`,
   `layer_idx`, ... or any int equal to the item's index plus a constant) are left out. Equal signatures: same kind.
2. The numbered children of a list (layers, experts) are split into runs of one kind; repeating patterns of runs are
   found (the longest tandem repeat first, then recursively left and right) and become group nodes ("2 groups of 6
   layers"). Runs and groups are named by the attributes that distinguish their kinds ("5 reusing layers"); a names
   mapping (`load_names`, `names=`) overrides any title, and its `[groups]` gather named children of a module
   under one virtual node ("Grouped output" over `wo_a`, `wo_b`).
3. Every node carries its per-instance count, its multiplicity path (`× 2 groups × 5 layers`) and its total; totals
   add up exactly: a node's children plus its own tensors make its total, and the root's make the model's.

G's layout is documented in `group`'s docstring.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import operator
import os
import re
from typing import Any, Iterable

from .errors import ArchvizError
from .names_tables import split_tables
from .records import ModelRecord, ModuleRecord

NAMES_ENV = "ARCHVIZ_NAMES"  # a names file applied when `group` is called without `names`

_CONTAINERS = frozenset(("ModuleList", "Sequential", "ModuleDict"))
# Attribute names that number a module rather than configure it.
_INDEX_NAME = re.compile(r"(^|_)(layer_?(id|idx|index|no|num|number)|idx|index|block_?(id|idx)|expert_?(id|idx)|"
                         r"layer|layer_?ids?)$")
_ABSENT = ("<absent>",)
_SEP = " › "


# ---------------------------------------------------------------------------------------------------------------------
# Names mapping (doc authors' titles)


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

    `[dims]` and `[descriptions]` tables rename dims and describe nodes (archviz/names_tables.py).

    Returns the titles as `key -> "Title"`, and the groups, if any, under "groups" as `key -> {title -> [attr]}`
    (a dict value; without a `[groups]` table, `"groups" = "Title"` titles a module or class so named, as ever)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ArchvizError(f"names file {path}: {e.strerror or e}", hint="give a readable TOML or JSON file") from None
    data: Any
    if path.lower().endswith(".json"):
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ArchvizError(f"names file {path}: not JSON ({e})", hint="fix the file") from None
    else:
        try:
            import tomllib  # type: ignore[import-not-found]
        except ImportError:  # Python 3.10
            try:
                import tomli as tomllib  # type: ignore[import-not-found,no-redef]
            except ImportError:
                raise ArchvizError(f"names file {path}: reading TOML needs Python 3.11 or tomli",
                                   hint="write the names as JSON instead") from None
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ArchvizError(f"names file {path}: not TOML ({e})", hint="fix the file") from None
    groups = None
    tables: dict[str, Any] = {}
    if isinstance(data, dict):
        data = dict(data)
        if isinstance(data.get("groups"), dict):
            groups = data.pop("groups")
        tables = split_tables(data, f"names file {path}")  # [dims], [descriptions]: archviz/names_tables.py
        if isinstance(data.get("names"), dict):
            data = data["names"]
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ArchvizError(f"names file {path}: expected a table of key = \"Title\" strings",
                           hint="e.g. \"layers.*.attn.wo_b\" = \"Output projection\"")
    out: dict[str, Any] = dict(data)
    out.update(tables)
    if groups is not None:
        if "groups" in out:
            raise ArchvizError(f"names file {path}: \"groups\" is both a title key and the [groups] table",
                               hint="title a module or class named groups as \"path:groups\" or \"class:groups\"")
        _check_groups(groups, f"names file {path}")
        out["groups"] = {k: {t: list(v) for t, v in spec.items()} for k, spec in groups.items()}
    return out


def _check_groups(groups: Any, where: str) -> None:
    ok = isinstance(groups, dict) and all(
        isinstance(k, str) and isinstance(spec, dict) and spec and all(
            isinstance(t, str) and t.strip() and isinstance(v, list) and v and all(isinstance(x, str) and x for x in v)
            for t, v in spec.items())
        for k, spec in groups.items())
    if not ok:
        raise ArchvizError(f"{where}: [groups] expects key = {{ \"Title\" = [\"attr\", ...] }} tables",
                           hint="e.g. \"Attention\" = { \"Grouped output\" = [\"wo_a\", \"wo_b\"] }")
    for k, spec in groups.items():
        seen: set[str] = set()
        for v in spec.values():
            dup = [x for x in v if x in seen or v.count(x) > 1]
            if dup:
                raise ArchvizError(f"{where}: [groups] {k!r}: {dup[0]!r} is listed twice",
                                   hint="a child can be gathered under one title only")
            seen.update(v)


def _parse_value(text: str) -> str:
    return text.strip().strip("\"'").lower()


# Key kinds, most specific first.
_EXACT, _GLOB, _CLASS_ATTRS, _CLASS, _TITLE = range(5)


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


class _Names:
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


class _Groups:
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


# ---------------------------------------------------------------------------------------------------------------------
# Signatures


def _hashable(v: Any) -> Any:
    t = type(v)
    if t is list or t is tuple:
        return tuple(_hashable(x) for x in v)
    if t is float and v != v:
        return "nan"
    if t is dict:
        return tuple(sorted((str(k), _hashable(x)) for k, x in v.items()))
    return v


_MIN_ITEMS = 3  # a list needs this many items before values following the index count as numbering


class _Kinds:
    """Interned structural signatures, computed bottom-up in one reverse pre-order pass.

    Attributes that number a module are left out: by name (`layer_id`, `layer_idx`, `idx`, ...), and, found from the
    data, any int equal to its list item's index plus one constant (MTP blocks' `n_layers + i`) or string holding the
    index. Such an attribute makes every item of its list a kind of its own, so only lists whose items all differ are
    looked at; when one is found, the signatures are computed again without it."""

    def __init__(self, record: ModelRecord):
        self.record = record
        self.name_ok: dict[str, bool] = {}
        self.drop: set[tuple[str, str]] = set()  # (class, attribute) found from the data
        suspects = self._pass()
        found = self._numbering(suspects)
        if found:
            self.drop |= found
            self._pass()
        self._hash: dict[int, str] = {}

    def dropped(self, class_name: str, attr: str) -> bool:
        ok = self.name_ok.get(attr)
        if ok is None:
            ok = self.name_ok[attr] = _INDEX_NAME.search(attr) is None
        return not ok or (class_name, attr) in self.drop

    def _filter(self, attrs: tuple, class_name: str) -> tuple:
        dropped = self.dropped
        return tuple((k, _hashable(v)) for k, v in attrs if not dropped(class_name, k))

    def _pass(self) -> list[str]:
        modules = self.record.modules
        intern: dict[tuple, int] = {}
        sigs: list[tuple] = []
        kid: dict[str, int] = {}
        suspects: list[str] = []
        plain_key = operator.attrgetter("name", "kind", "shape", "dtype", "elements", "persistent", "packing")

        def tensor_key(t: Any) -> tuple:
            # A buffer shared by several modules (DeepSeek-V4.1 caches `freqs_cis`) is counted where first seen and
            # an alias elsewhere; structurally every holder has the same buffer, so the alias does not make a kind.
            if t.kind == "alias" and t.persistent is not None:
                return (t.name, "buffer", t.shape, t.dtype, t.storage_elements, t.persistent, t.packing)
            return plain_key(t)

        by_class = bool(self.drop)
        drop_classes = {c for c, _ in self.drop}
        fcache: dict[tuple, tuple] = {}  # attributes -> attributes that are not numbering (cached: most repeat)
        get = intern.get
        for m in reversed(modules):
            cn = m.class_name
            attrs = m.attributes
            if attrs:
                if by_class and cn in drop_classes:
                    attrs = self._filter(attrs, cn)
                else:
                    try:
                        fa = fcache.get(attrs)
                    except TypeError:  # list values
                        fa = None
                        attrs = tuple((k, _hashable(v)) for k, v in attrs)
                    if fa is None:
                        fa = fcache[attrs] = self._filter(attrs, "")
                    attrs = fa
            # (an alias's target path differs per instance: not part of the signature, its kind is)
            tensors = tuple(map(tensor_key, m.tensors)) if m.tensors else ()
            ch = m.children
            if ch:
                cut = len(m.path) + 1 if m.path else 0
                children = tuple([(c[cut:], kid[c]) for c in ch])
                if len(ch) >= _MIN_ITEMS and children[0][0].isdigit():
                    suspects.append(m.path)
            else:
                children = ()
            sig = (cn, m.class_module, tensors, attrs, m.kernels, children)
            k = get(sig)
            if k is None:
                k = intern[sig] = len(sigs)
                sigs.append(sig)
            kid[m.path] = k
        self.kid = kid
        self.sigs = sigs
        return suspects

    def _numbering(self, suspects: list[str]) -> set[tuple[str, str]]:
        """(class, attribute) pairs that follow the item index in a list whose items are all different kinds."""
        index = None
        found: set[tuple[str, str]] = set()
        for lp in suspects:
            if index is None:
                index = self.record.index()
            lst = index[lp]
            cut = len(lp) + 1 if lp else 0
            names = [c[cut:] for c in lst.children]
            if not all(n.isdigit() for n in names):
                continue
            if len({self.kid[c] for c in lst.children}) != len(names):
                continue
            seen: dict[tuple, list] = {}
            for c, n in zip(lst.children, names):
                i = int(n)
                stack = [(c, "", 0)]
                while stack:
                    path, rel, depth = stack.pop()
                    m = index[path]
                    for a, v in m.attributes:
                        if type(v) in (int, str) and not self.dropped(m.class_name, a):
                            seen.setdefault((rel, m.class_name, a), []).append((i, v))
                    if depth < 2:
                        pcut = len(path) + 1
                        for cc in m.children:
                            sub = cc[pcut:]
                            if not sub.isdigit():
                                stack.append((cc, f"{rel}.{sub}", depth + 1))
            for (_, cn, a), pairs in seen.items():
                if len(pairs) != len(names):
                    continue
                vals = [v for _, v in pairs]
                if all(type(v) is int for v in vals):
                    if len({v - i for i, v in pairs}) == 1:
                        found.add((cn, a))
                elif all(type(v) is str for v in vals):
                    if len(set(vals)) == len(vals) and all(str(i) in v for i, v in pairs):
                        found.add((cn, a))
        return found

    def hash(self, k: int) -> str:
        h = self._hash.get(k)
        if h is None:
            sig = self.sigs[k]
            text = repr((sig[:5], tuple((n, self.hash(c)) for n, c in sig[5])))
            h = self._hash[k] = hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()
        return h


# ---------------------------------------------------------------------------------------------------------------------
# Runs and repeating patterns


def _rle(kinds: list[int]) -> list[tuple[int, int, int]]:
    """(kind, start, count) runs."""
    out: list[tuple[int, int, int]] = []
    for i, k in enumerate(kinds):
        if out and out[-1][0] == k:
            kk, s, c = out[-1]
            out[-1] = (kk, s, c + 1)
        else:
            out.append((k, i, 1))
    return out


_MAX_PATTERN_TOKENS = 1024  # longer sequences of runs are left as runs: the search is quadratic in them


def _decompose(tokens: list[tuple[int, int, int]], lo: int, hi: int) -> list[tuple]:
    """Segments of tokens[lo:hi]: ("run", token) or ("repeat", unit_segments, repeats, unit_items, first_item).

    The tandem repeat covering the most items is taken first (ties: the shortest unit, then a unit that starts with
    its smallest run, e.g. the one KV-source layer before the reusing ones, then the leftmost); the parts left and
    right of it are decomposed the same way. Token equality is (kind, count)."""
    n = hi - lo
    best = None
    if 4 <= n <= _MAX_PATTERN_TOKENS:
        keys = [(t[0], t[2]) for t in tokens[lo:hi]]
        prefix = [0]
        for _, c in keys:
            prefix.append(prefix[-1] + c)
        for p in range(2, n // 2 + 1):
            # run[i]: how many consecutive j >= i have keys[j] == keys[j + p]
            m = n - p
            run = [0] * (m + 1)
            for i in range(m - 1, -1, -1):
                run[i] = run[i + 1] + 1 if keys[i] == keys[i + p] else 0
            for s in range(0, m):
                if run[s] < p:
                    continue
                r = 1 + run[s] // p
                key = (-(r * (prefix[s + p] - prefix[s])), p, keys[s][1], s)
                if best is None or key < best[0]:
                    best = (key, s, p, r)
    if best is None:
        return [("run", t) for t in tokens[lo:hi]]
    _, s, p, r = best
    s += lo
    unit = _decompose(tokens, s, s + p)
    unit_items = sum(t[2] for t in tokens[s:s + p])
    return (_decompose(tokens, lo, s) + [("repeat", unit, r, unit_items, tokens[s][1], p)] +
            _decompose(tokens, s + r * p, hi))


# ---------------------------------------------------------------------------------------------------------------------
# Words: what distinguishes kinds, in words a person reads

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


def _nouns(list_name: str, siblings: Iterable[str]) -> tuple[str, str]:
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
    if v is _ABSENT or v is None:
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


class _Features:
    """Per kind: the attributes and children of its representative's subtree, lists collapsed to their kinds."""

    MAX_DEPTH = 3

    def __init__(self, index: dict[str, ModuleRecord], kinds: _Kinds):
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
                out[("a", "", a)] = _hashable(v)
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
            vals = {g: feats[g].get(fk, _ABSENT) for g in group}
            if len(set(map(repr, vals.values()))) < 2:
                continue
            v = vals[k]
            typ = fk[0]
            depth = fk[1].count(".") + (1 if fk[1] else 0)
            if typ == "a":
                w = _attr_word(fk[2], v)
            elif typ == "c" or typ == "cls":
                if v is _ABSENT:
                    leaf = fk[1].rsplit(".", 1)[-1]
                    w = (6, None, f"without {_human(leaf)}") if leaf != "*" else None
                elif all(x is not _ABSENT for x in vals.values()):
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
                sep = frozenset(g for g in others if vals[g] is not _ABSENT and repr(vals[g]) != repr(v))
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


def _phrase(count: int | None, pre: list[str], noun: str, post: list[str], index: str | None = None) -> str:
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


# ---------------------------------------------------------------------------------------------------------------------
# The grouped tree


class _Builder:
    def __init__(self, record: ModelRecord, kinds: _Kinds, groups: _Groups | None = None):
        self.record = record
        self.groups = groups
        self.index = record.index()
        self.kinds = kinds
        self.kid = kinds.kid
        self.features = _Features(self.index, kinds)
        self.nodes: list[dict] = []
        self.modules_of: dict[str, ModuleRecord | None] = {}  # node id -> representative module (None: virtual)
        self.by_path: dict[str, dict] = {}
        self.entries: list[tuple[dict, str]] = []  # (by_path entry, node id) to fill "group" later
        self.chain: dict[str, list[str]] = {}  # node id -> ids of the fold nodes (list runs, groups) down to it
        self.layers: dict | None = None
        try:
            from .layers import main_layer_list

            self.main_list = main_layer_list(record).path
        except ArchvizError:
            self.main_list = None

    # -- nodes ----------------------------------------------------------------------------------------------------

    def _node(self, parent: dict | None, *, title: str, kind: str, class_name: str, representative: str,
              paths: list[str], count: int, factor_name: str | None, per_instance: int, own: int, scales: int,
              buffers: int, fold: bool, module: ModuleRecord | None, extra: dict | None = None) -> dict:
        mult = list(parent["multiplicity"]) if parent else []
        if count > 1:
            mult.append({"factor": count, "name": factor_name or "instances"})
        prod = 1
        for f in mult:
            prod *= f["factor"]
        nid = f"n{len(self.nodes)}"
        node = {
            "id": nid, "parent": parent["id"] if parent else None, "children": [], "title": title, "kind": kind,
            "class_name": class_name, "representative": representative, "paths": paths, "count": count,
            "multiplicity": mult, "per_instance": per_instance, "total": per_instance * prod,
            "own_total": own * prod, "scale_elements_total": scales * prod, "buffer_elements_total": buffers * prod,
            "breadcrumb": [],
        }
        if extra:
            node.update(extra)
        self.nodes.append(node)
        self.modules_of[nid] = module
        chain = list(self.chain[parent["id"]]) if parent else []
        if fold:
            chain.append(nid)
        self.chain[nid] = chain
        if parent is not None:
            parent["children"].append(nid)
        return node

    def _entry(self, node: dict, paths: Iterable[str], total: int | None = None,
               multiplicity: list | None = None) -> None:
        e = {"node": node["id"], "multiplicity": node["multiplicity"] if multiplicity is None else multiplicity,
             "total": node["total"] if total is None else total, "group": None}
        self.entries.append((e, node["id"]))
        for p in paths:
            self.by_path[p] = e

    def module_node(self, parent: dict | None, m: ModuleRecord, paths: list[str], count: int,
                    factor_name: str | None, title: str, fold: bool = False, extra: dict | None = None) -> dict:
        t = m.totals
        node = self._node(parent, title=title, kind=self.kinds.hash(self.kid[m.path]), class_name=m.class_name,
                          representative=m.path, paths=paths, count=count, factor_name=factor_name,
                          per_instance=t.parameters, own=m.own.parameters, scales=t.scale_elements,
                          buffers=t.buffer_elements, fold=fold, module=m, extra=extra)
        self._entry(node, paths)
        self.expand(node, m, paths)
        return node

    def expand(self, node: dict, m: ModuleRecord, paths: list[str]) -> None:
        cut = len(m.path) + 1 if m.path else 0
        siblings = [c[cut:] for c in m.children]
        gathers = self.groups.match(node, m) if self.groups and siblings else None
        if not gathers:
            for c, name in zip(m.children, siblings):
                self.child(node, c, name, paths, siblings)
            return
        # [groups]: named children move, in the order given, under one virtual node where the first of them stood
        where: dict[str, int] = {}
        plan: list[tuple[str, list[str]]] = []
        have = set(siblings)
        for title, members in gathers:
            present = [x for x in members if x in have and x not in where]
            if present:
                for x in present:
                    where[x] = len(plan)
                plan.append((title, present))
        done: set[int] = set()
        for c, name in zip(m.children, siblings):
            gi = where.get(name)
            if gi is None:
                self.child(node, c, name, paths, siblings)
            elif gi not in done:
                done.add(gi)
                self.gather(node, m, paths, siblings, *plan[gi])

    def child(self, node: dict, c: str, name: str, paths: list[str], siblings: list[str]) -> None:
        cm = self.index[c]
        cpaths = [f"{p}.{name}" if p else name for p in paths]
        ccut = len(c) + 1
        if cm.children and all(x[ccut:].isdigit() for x in cm.children):
            self.list_node(node, cm, name, cpaths, siblings)
        else:
            self.module_node(node, cm, cpaths, 1, None, f"{name} ({cm.class_name})")

    def gather(self, node: dict, m: ModuleRecord, paths: list[str], siblings: list[str], title: str,
               members: list[str]) -> None:
        """A virtual node titled `title` over the children `members` of the module node (each of its instances)."""
        mods = [self.index[f"{m.path}.{x}" if m.path else x] for x in members]
        kind = "gather:" + hashlib.blake2b(repr((title, [(x, self.kinds.hash(self.kid[cm.path]))
                                                         for x, cm in zip(members, mods)])).encode(),
                                           digest_size=8).hexdigest()
        vnode = self._node(node, title=title, kind=kind, class_name="", representative=m.path,
                           paths=[f"{p}.{x}" if p else x for x in members for p in paths], count=1,
                           factor_name=None, per_instance=sum(cm.totals.parameters for cm in mods), own=0,
                           scales=sum(cm.totals.scale_elements for cm in mods),
                           buffers=sum(cm.totals.buffer_elements for cm in mods), fold=True, module=None,
                           extra={"virtual": True, "segment": "gather", "period": len(members), "items": members})
        for x, cm in zip(members, mods):
            self.child(vnode, cm.path, x, paths, siblings)

    # -- lists ------------------------------------------------------------------------------------------------------

    def list_node(self, parent: dict, lst: ModuleRecord, name: str, lpaths: list[str], siblings: list[str]) -> None:
        items = list(lst.children)
        cut = len(lst.path) + 1 if lst.path else 0
        item_names = [c[cut:] for c in items]
        kinds = [self.kid[c] for c in items]
        tokens = _rle(kinds)
        rep_of: dict[int, str] = {}
        for c, k in zip(items, kinds):
            rep_of.setdefault(k, c)
        group = tuple(sorted(rep_of))
        sing, plural = _nouns(name, siblings)
        is_main = lst.path == self.main_list
        classes = [self.index[rep_of[k]].class_name for k in group]
        by_class = not is_main and len(set(classes)) > 1
        ctx = {"items": items, "names": item_names, "kinds": kinds, "rep_of": rep_of, "sing": sing,
               "plural": plural, "group": group, "main": is_main, "by_class": by_class}
        segs = _decompose(tokens, 0, len(tokens))
        elide = len(tokens) == 1 and lst.class_name in _CONTAINERS and not lst.tensors
        if elide:
            run_nodes = self.emit(parent, segs, [(p, 0) for p in lpaths], ctx, top=True)
            # The list module itself: the run node stands for it, with the list's own count.
            prod = 1
            for f in parent["multiplicity"]:
                prod *= f["factor"]
            self._entry(run_nodes[0], lpaths, total=lst.totals.parameters * prod, multiplicity=parent["multiplicity"])
            holder = parent
        else:
            t = lst.totals
            holder = self._node(parent, title=f"{len(items)} {plural}", kind=self.kinds.hash(self.kid[lst.path]),
                                class_name=lst.class_name, representative=lst.path, paths=lpaths, count=1,
                                factor_name=None, per_instance=t.parameters, own=lst.own.parameters,
                                scales=t.scale_elements, buffers=t.buffer_elements, fold=False, module=lst)
            self._entry(holder, lpaths)
            run_nodes = self.emit(holder, segs, [(p, 0) for p in lpaths], ctx, top=True)
        if is_main and self.layers is None:
            self.layers = self._layers_info(lst, ctx, segs, run_nodes, run_nodes[0] if elide else holder)

    def emit(self, parent: dict, segs: list[tuple], bases: list[tuple[str, int]], ctx: dict,
             top: bool) -> list[dict]:
        out = []
        names = ctx["names"]
        for seg in segs:
            if seg[0] == "run":
                k, start, count = seg[1]
                paths = [f"{lp}.{names[off + start + j]}" if lp else names[off + start + j]
                         for lp, off in bases for j in range(count)]
                rep = self.index[ctx["items"][start]]
                if len(ctx["group"]) > 1:
                    pre, post = self.features.words(ctx["rep_of"], k, ctx["group"] if top else ctx["unit_group"])
                else:
                    pre, post = [], []
                if count > 1:
                    title = _phrase(count, pre, ctx["plural"], post)
                elif top:
                    title = _phrase(None, pre, ctx["sing"], post, names[start])
                else:
                    title = _phrase(None, pre, ctx["sing"], post)
                if top and count == 1 and not pre and not post and ctx["sing"][:1].islower():
                    title = f"{ctx['sing']} {names[start]} ({rep.class_name})"
                if ctx["by_class"]:  # a stack of different modules (Sequential(conv, act, ...)): say the class
                    title = f"{names[start]} ({rep.class_name})" if count == 1 else \
                        f"{names[start]}–{names[start + count - 1]} ({count} × {rep.class_name})"
                extra = {"segment": "run", "items": [names[start + j] for j in range(count)]}
                out.append(self.module_node(parent, rep, paths, count, ctx["plural"].split()[-1], title, fold=True,
                                            extra=extra))
            else:
                _, unit, r, unit_items, first, _ntok = seg
                new_bases = [(lp, off + rho * unit_items) for lp, off in bases for rho in range(r)]
                unit_kinds = tuple(sorted({ctx["kinds"][i] for i in range(first, first + unit_items)}))
                paths = [f"{lp}.{names[off + first + j]}" if lp else names[off + first + j]
                         for lp, off in new_bases for j in range(unit_items)]
                params = scales = buffers = 0
                for j in range(unit_items):
                    t = self.index[ctx["items"][first + j]].totals
                    params += t.parameters
                    scales += t.scale_elements
                    buffers += t.buffer_elements
                kind = "group:" + hashlib.blake2b(
                    repr([self.kinds.hash(ctx["kinds"][first + j]) for j in range(unit_items)]).encode(),
                    digest_size=8).hexdigest()
                title = f"{r} groups of {unit_items} {ctx['plural'].split()[-1]}"
                node = self._node(parent, title=title, kind=kind, class_name="", representative=paths[0],
                                  paths=paths, count=r, factor_name="groups", per_instance=params, own=0,
                                  scales=scales, buffers=buffers, fold=True, module=None,
                                  extra={"virtual": True, "segment": "group", "period": unit_items, "repeats": r,
                                         "items": [names[first + j] for j in range(unit_items)]})
                sub = dict(ctx, unit_group=unit_kinds)
                self.emit(node, unit, new_bases, sub, top=False)
                out.append(node)
        return out

    def _layers_info(self, lst: ModuleRecord, ctx: dict, segs: list[tuple], top_nodes: list[dict],
                     node: dict) -> dict:
        names = ctx["names"]
        kinds_out = []
        kind_name: dict[int, str] = {}
        order: list[int] = []
        for k in ctx["kinds"]:
            if k not in kind_name:
                kind_name[k] = ""
                order.append(k)
        for k in order:
            if len(ctx["group"]) > 1:
                pre, post = self.features.words(ctx["rep_of"], k, ctx["group"])
            else:
                pre, post = [], []
            kind_name[k] = _phrase(None, pre, ctx["sing"], post)
            kinds_out.append({"name": kind_name[k], "class_name": self.index[ctx["rep_of"][k]].class_name,
                              "layers": [_num(names[i]) for i, kk in enumerate(ctx["kinds"]) if kk == k],
                              "signature": self.kinds.hash(k),
                              "parameters": self.index[ctx["rep_of"][k]].totals.parameters})
        runs = []
        for seg, node in zip(segs, top_nodes):
            if seg[0] == "run":
                k, start, count = seg[1]
                runs.append({"node": node["id"], "title": node["title"], "first": _num(names[start]),
                             "last": _num(names[start + count - 1]), "repeats": count, "period": 1,
                             "unit": [{"kind": kind_name[k], "count": count}]})
            else:
                _, unit, r, unit_items, first, _ntok = seg
                toks = _rle(ctx["kinds"][first:first + unit_items])
                runs.append({"node": node["id"], "title": node["title"], "first": _num(names[first]),
                             "last": _num(names[first + r * unit_items - 1]), "repeats": r, "period": unit_items,
                             "unit": [{"kind": kind_name[k], "count": c} for k, _, c in toks]})
        return {"path": lst.path, "count": len(ctx["items"]), "node": node["id"], "kinds": kinds_out, "pattern": "",
                "runs": runs}

    # -- finishing ---------------------------------------------------------------------------------------------------

    def finish(self, names: _Names) -> None:
        nodes = self.nodes
        by_id = {n["id"]: n for n in nodes}
        if names:
            exact = bool(names.exact_paths)
            for n in nodes[1:]:
                hit = names.title_for(n, self.modules_of[n["id"]], n["title"], exact)
                if hit is not None:
                    n["title"] = hit
            if self.layers:
                for k in self.layers["kinds"]:
                    k["name"] = names.titles.get(k["name"], k["name"])
        for n in nodes:
            parent = by_id.get(n["parent"]) if n["parent"] else None
            n["breadcrumb"] = (parent["breadcrumb"] + [n["title"]]) if parent is not None else []
        for e, nid in self.entries:
            chain = self.chain[nid]
            e["group"] = _SEP.join(by_id[c]["title"] for c in chain) if chain else None
        if self.layers:
            rename = names.titles if names else {}
            parts = []
            for r in self.layers["runs"]:
                r["title"] = by_id[r["node"]]["title"]
                for u in r["unit"]:
                    u["kind"] = rename.get(u["kind"], u["kind"])
                if r["period"] == 1:
                    parts.append(r["title"])
                else:
                    inner = ", ".join(f"{u['count']} × {u['kind']}" if u["count"] > 1 else u["kind"]
                                      for u in r["unit"])
                    parts.append(f"{r['repeats']} × ({inner})")
            text = parts[0] if parts else ""
            if len(parts) > 1:
                text = ", ".join(parts[:-1]) + ", then " + parts[-1]
            self.layers["pattern"] = text


def _num(name: str) -> int | str:
    return int(name) if name.isdigit() else name


def group(record: ModelRecord, names: dict[str, Any] | None = None) -> ModelRecord:
    """Fold the record's modules into kinds and counts; returns `record.with_extra("grouping", G)`.

    G = {"nodes": [...], "by_path": {...}, "layers": {...} | None}:
    - nodes, pre-order, nodes[0] the model: id, parent, children, title, kind (signature hash; "group:…" for a
      repeating group, "gather:…" for a names-file gathering), class_name ("" for both), representative (one module
      path standing for all), paths (every module path the node stands for), count (instances folded at this
      level), multiplicity (factors > 1 from the root down: [{"factor": 2, "name": "groups"}, {"factor": 5,
      "name": "layers"}]), per_instance (parameters of one instance), total (per_instance × the factors), own_total
      (own tensors' parameters × the factors), scale_elements_total, buffer_elements_total, breadcrumb (titles below
      the root down to the node); list runs and groups also carry segment ("run" | "group") and items (item names
      of one instance), groups virtual, period and repeats. A gathering (`[groups]` in the names file) is a virtual
      node with segment "gather", items (the gathered children's attribute names), period (how many), the
      parent's multiplicity, per_instance the sum of its children's, representative the parent module's path and
      paths every gathered module's path (each child's paths in turn); it owns nothing and no by_path entry points
      at it.
    - by_path: module path -> {"node", "multiplicity", "total", "group"}; group is the chain of list runs,
      repeating groups and gatherings above the module ("2 groups of 6 layers › 5 reusing layers"), or None.
    - layers: the main layer list: path, count, node, kinds [{name, class_name, layers, signature, parameters}],
      pattern (one line a person reads), runs [{node, title, first, last, repeats, period, unit}].

    `names` maps keys to titles, and "groups" to gatherings (see `load_names`); without it, the file named by
    $ARCHVIZ_NAMES applies."""
    if names is None:
        env = os.environ.get(NAMES_ENV)
        if env:
            names = load_names(env)
    kinds = _Kinds(record)
    b = _Builder(record, kinds, _Groups(names))
    root = record.modules[0]
    b.module_node(None, root, [root.path], 1, None, record.source.name or root.class_name)
    described = _Names(names.get("descriptions") if isinstance((names or {}).get("descriptions"), dict) else None)
    for n in b.nodes if described else ():  # keyed as titles are; a kind by its default title, before renaming
        hit = described.title_for(n, b.modules_of[n["id"]], n["title"], bool(described.exact_paths))
        if hit is not None:
            n["description"] = hit
    b.finish(_Names(names))
    g = {"nodes": b.nodes, "by_path": b.by_path, "layers": b.layers}
    if isinstance((names or {}).get("dims"), dict):
        g["dims"] = dict(names["dims"])  # read by archviz.dims.dim_renames
    return record.with_extra("grouping", g)


def grouping(record: ModelRecord) -> dict:
    """The record's grouping, computing it if the record has none."""
    g = record.extra("grouping")
    if g is None:
        g = group(record).extra("grouping")
    return g


def multiplicity_text(multiplicity: list[dict]) -> str:
    """[{2, groups}, {5, layers}] -> '× 2 groups × 5 layers'."""
    return " ".join(f"× {f['factor']:,} {f['name']}" for f in multiplicity)


def layer_membership(record: ModelRecord, path: str) -> str | None:
    """'layer 3 belongs to 2 groups of 6 layers › 5 reusing layers (kind reusing compress-ratio-2 layer)' for an item
    of the main layer list; None for any other path."""
    g = grouping(record)
    layers = g.get("layers")
    if not layers or not path:
        return None
    lp = layers["path"]
    prefix = f"{lp}." if lp else ""
    if not path.startswith(prefix) or not path[len(prefix):].isdigit():
        return None
    n = _num(path[len(prefix):])
    entry = g["by_path"].get(path)
    kind = next((k["name"] for k in layers["kinds"] if n in k["layers"]), None)
    where = entry.get("group") if entry else None
    count = len({i for k in layers["kinds"] for i in k["layers"]})
    text = f"layer {n} is the model's only layer" if count == 1 else f"layer {n} belongs to {where or 'the layer list'}"
    if kind:
        text += f" (kind {kind})"
    return text


__all__ = ["group", "grouping", "load_names", "layer_membership", "multiplicity_text", "NAMES_ENV"]

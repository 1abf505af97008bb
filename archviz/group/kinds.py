"""Structural signatures: every module's kind (class, own tensors, the attributes that change what it does, its
kernels, its children's kinds), with the attributes that merely number it left out."""

from __future__ import annotations

import hashlib
import operator
import re
from typing import Any

from ..records import ModelRecord

# Attribute names that number a module rather than configure it.
_INDEX_NAME = re.compile(r"(^|_)(layer_?(id|idx|index|no|num|number)|idx|index|block_?(id|idx)|expert_?(id|idx)|"
                         r"layer|layer_?ids?)$")


ABSENT = ("<absent>",)


def hashable(v: Any) -> Any:
    t = type(v)
    if t is list or t is tuple:
        return tuple(hashable(x) for x in v)
    if t is float and v != v:
        return "nan"
    if t is dict:
        return tuple(sorted((str(k), hashable(x)) for k, x in v.items()))
    return v


_MIN_ITEMS = 3  # a list needs this many items before values following the index count as numbering


class Kinds:
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
        return tuple((k, hashable(v)) for k, v in attrs if not dropped(class_name, k))

    def _pass(self) -> list[str]:
        record = self.record
        modules = record.modules
        # A compact file's modules (records.compactfile) are read as columns of shared values, no module made, and
        # most are found by their row and their children's kinds, without hashing their values: (row, kinds of the
        # children) -> kind. A walk's modules share no values: only hashing finds them.
        shared = hasattr(modules, "child_rows")
        if shared:
            paths = modules.paths
            row_id = modules.row_ids()
            names, child_rows = modules.column("children"), modules.child_rows()
            rows: Any = zip(range(len(paths) - 1, -1, -1), reversed(modules.column("class_name")),
                            reversed(modules.column("class_module")), reversed(modules.column("tensors")),
                            reversed(modules.column("attributes")), reversed(modules.column("kernels")))
        else:
            rows = ((m, m.class_name, m.class_module, m.tensors, m.attributes, m.kernels) for m in reversed(modules))
        intern: dict[tuple, int] = {}
        sigs: list[tuple] = []
        kid: Any = [0] * len(modules) if shared else {}
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
        fcache: dict[Any, tuple] = {}  # attributes -> attributes that are not numbering (cached: most repeat)
        seen: dict[tuple, int] = {}
        get, look = intern.get, seen.get
        quick = k = None
        for at, cn, cm, ts, attrs, kernels in rows:
            if shared:
                cr = child_rows[at]
                kids = tuple([kid[r] for r in cr]) if cr else ()
                if len(cr) >= _MIN_ITEMS and names[at][0].isdigit():
                    suspects.append(paths[at])
                quick = (row_id[at], kids)  # the same row: the same values in every field but the path
                k = look(quick)
                if k is None:
                    children = tuple(zip(names[at], kids))
            else:
                ch = at.children
                if ch:
                    cut = len(at.path) + 1 if at.path else 0
                    children = tuple([(c[cut:], kid[c]) for c in ch])
                    if len(ch) >= _MIN_ITEMS and children[0][0].isdigit():
                        suspects.append(at.path)
                else:
                    children = ()
            if k is None:
                if attrs:
                    if by_class and cn in drop_classes:
                        attrs = self._filter(attrs, cn)
                    else:
                        try:
                            fa = fcache.get(attrs)
                        except TypeError:  # list values
                            fa = None
                            attrs = tuple((k, hashable(v)) for k, v in attrs)
                        if fa is None:
                            fa = fcache[attrs] = self._filter(attrs, "")
                        attrs = fa
                # (an alias's target path differs per instance: not part of the signature, its kind is)
                sig = (cn, cm, tuple(map(tensor_key, ts)) if ts else (), attrs, kernels, children)
                k = get(sig)
                if k is None:
                    k = intern[sig] = len(sigs)
                    sigs.append(sig)
                if shared:
                    seen[quick] = k  # type: ignore[index]
            if shared:
                kid[at] = k
            else:
                kid[at.path] = k
            k = None
        self.kid = dict(zip(paths, kid)) if shared else kid
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

"""Find the model's main layer list in records (no torch): `archviz inspect SOURCE layer 3`."""

from __future__ import annotations

from ..errors import ArchvizError
from ..records import ModelRecord, ModuleRecord

_PREFERRED = ("layers", "h", "blocks", "layer", "block")


def main_layer_list(record: ModelRecord) -> ModuleRecord:
    """The ModuleList holding the model's repeated blocks: the list with the most parameters among lists whose items
    have children of their own (not routed experts)."""
    index = record.index()
    best: tuple | None = None
    lists = [i for i, cn in enumerate(record.column("class_name")) if cn in ("ModuleList", "Sequential")]
    for m in map(record.modules.__getitem__, lists):  # (a compact file's other modules stay unread)
        if not m.children:
            continue
        if "expert" in m.name.lower():
            continue
        items = [index[c] for c in m.children]
        if not any(i.children for i in items):
            continue
        depth = m.path.count(".") if m.path else 0
        # a list of one block counts only where none holds more (a model cut to one layer with --set)
        key = (len(m.children) > 1, m.name in _PREFERRED, m.totals.parameters, -depth)
        if best is None or key > best[0]:
            best = (key, m)
    if best is None:
        raise ArchvizError("no layer list found in this model", hint="name a module path instead of `layer N`")
    return best[1]


def layer_path(record: ModelRecord, n: int) -> str:
    lst = main_layer_list(record)
    children = lst.children
    for c in children:
        if c.rsplit(".", 1)[-1] == str(n):
            return c
    first, last = children[0].rsplit(".", 1)[-1], children[-1].rsplit(".", 1)[-1]
    held = f"1 layer ({first})" if len(children) == 1 else f"{len(children)} layers ({first}–{last})"
    raise ArchvizError(f"layer {n}: {lst.path or 'the layer list'} has {held}",
                       hint="give a layer number in that range" if len(children) > 1 else f"give layer {first}")


def resolve_target(record: ModelRecord, target: list[str]) -> str:
    """`[]` -> root; `["layer", "3"]` -> that layer's path; `["layers.3.attn"]` -> that path (checked)."""
    if not target:
        return ""
    if target[0] in ("layer", "layers") and len(target) == 2:
        try:
            n = int(target[1])
        except ValueError:
            raise ArchvizError(f"layer {target[1]!r}: not a number", hint="write e.g. `layer 3`") from None
        return layer_path(record, n)
    if len(target) != 1:
        raise ArchvizError(f"{' '.join(target)!r}: give one module path or `layer N`",
                           hint="e.g. `layers.3.attn.wo_b` or `layer 3`")
    path = target[0]
    index = record.index()
    if path not in index:
        raise ArchvizError(f"no module {path!r} in this model", hint=_path_hint(path, index))
    return path


def _path_hint(path: str, index: dict) -> str:
    """What the user most likely meant: the same path under a prefix they left out (`layers.0.mlp` for
    `model.layers.0.mlp`), else a child of the deepest part of the path that exists, else the closest paths."""
    import difflib

    under = [p for p in index if p.endswith("." + path)]
    if under:
        return "did you mean " + ", ".join(sorted(under, key=len)[:3]) + "?"
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:cut])
        if parent in index:
            children = [c.rsplit(".", 1)[-1] for c in index[parent].children]
            close = difflib.get_close_matches(parts[cut], children, n=3, cutoff=0.5)
            if close:
                return "did you mean " + ", ".join(f"{parent}.{c}" for c in close) + "?"
            if not children:
                return f"{parent} has no sub-modules"
            shown = ", ".join(children[:8]) + (f", … ({len(children)} in all)" if len(children) > 8 else "")
            return f"{parent} has: {shown}"
    close = difflib.get_close_matches(path, list(index), n=3)
    return ("did you mean " + ", ".join(close) + "?") if close else "list the tree with `archviz inspect SOURCE`"

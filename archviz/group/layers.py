"""Find the model's main layer list in records (no torch): `archviz inspect SOURCE layer 3`."""

from __future__ import annotations

from ..errors import ArchvizError
from ..records import ModelRecord, ModuleRecord

_PREFERRED = ("layers", "h", "blocks", "layer", "block")
_CONTAINERS = ("ModuleList", "Sequential", "ModuleDict")


def _is_stack(m: ModuleRecord, index: dict) -> bool:
    """A container of blocks whose items have children of their own (not routed experts, not a list of bare
    Linears): a ModuleList or Sequential; a ModuleDict of blocks of one class (`layers["0"]`, ...); or any module
    whose children are all numbered blocks of one class."""
    if not m.children or "expert" in m.name.lower():
        return False
    items = [index[c] for c in m.children]
    if not any(i.children for i in items):
        return False
    if m.class_name in ("ModuleList", "Sequential"):
        return True
    same = len({i.class_name for i in items}) == 1  # blocks of one class (dense and MoE layers of one block class)
    if m.class_name == "ModuleDict":  # layers["0"], ...; never a dict of different towers or heads
        return same
    return len(items) > 1 and not m.tensors and same and all(c.rsplit(".", 1)[-1].isdigit() for c in m.children)


def layer_stacks(record: ModelRecord) -> list[ModuleRecord]:
    """Every stack of repeated blocks (Flux's double and single blocks are two), the main one first: a list of
    more than one block before one of a single block (a model cut to one layer with overrides), a list named as layer
    lists are, the most parameters, the shallowest. A stack inside another stack's items is not one of them."""
    index = record.index()
    classes, paths = record.column("class_name"), record.column("path")
    # candidates: the containers, and the parents of a module numbered 0 (read without making a compact file's
    # other modules)
    parents = {p.rpartition(".")[0] for p in paths if p.rpartition(".")[2] == "0"}
    found: list[tuple[tuple, ModuleRecord]] = []
    for i, p in enumerate(paths):
        if classes[i] not in _CONTAINERS and p not in parents:
            continue
        m = index[p]
        if not _is_stack(m, index):
            continue
        depth = m.path.count(".") if m.path else 0
        found.append(((len(m.children) > 1, m.name in _PREFERRED, m.totals.parameters, -depth), m))
    found.sort(key=lambda km: km[0], reverse=True)
    out: list[ModuleRecord] = []
    for _, m in found:
        if not any(m.path.startswith(o.path + ".") or o.path.startswith(m.path + ".") or not m.path for o in out):
            out.append(m)
    return out


def main_layer_list(record: ModelRecord) -> ModuleRecord:
    """The container holding the model's repeated blocks: the first of `layer_stacks`."""
    stacks = layer_stacks(record)
    if not stacks:
        raise ArchvizError("no layer list found in this model", hint="name a module path instead of `layer N`")
    return stacks[0]


def layer_path(record: ModelRecord, n: int) -> str:
    lst = main_layer_list(record)
    children = lst.children
    for c in children:
        if c.rsplit(".", 1)[-1] == str(n):
            return c
    first, last = children[0].rsplit(".", 1)[-1], children[-1].rsplit(".", 1)[-1]
    held = f"1 layer ({first})" if len(children) == 1 else f"{len(children)} layers ({first}–{last})"
    raise ArchvizError(f"layer {n}: {lst.path or 'the layer list'} has {held}" + _others(record, lst),
                       hint="give a layer number in that range" if len(children) > 1 else f"give layer {first}")


def _others(record: ModelRecord, lst: ModuleRecord) -> str:
    others = [m for m in layer_stacks(record)[1:] if len(m.children) > 1]
    if not others:
        return ""
    return "; other stacks: " + ", ".join(f"{m.path} ({len(m.children)})" for m in others)


def layer_note(record: ModelRecord, target: list[str]) -> str | None:
    """For `layer N` in a model of several stacks of blocks: which stack it took and the others, by path (a path
    such as `single_blocks.3` reaches their layers); None otherwise."""
    if not target or target[0] not in ("layer", "layers") or len(target) != 2:
        return None
    lst = main_layer_list(record)
    others = _others(record, lst)
    if not others:
        return None
    return f"layer {target[1]} of {lst.path} ({len(lst.children)} blocks, the largest stack){others}: give a path " \
           f"such as {layer_stacks(record)[1].children[0]} for theirs"


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

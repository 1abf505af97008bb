"""Forward arguments that are neither tensors nor token ids, given defaults read from the code itself: a required
bool, int, float or str (by its annotation, else by how the forward uses it), and a list of dicts whose keys the
forward reads (by the AST of its loops over the list), each record built from what consumes it. Also the position
limit a token table's own position table sets. Imports nothing of `inputs`, which calls it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import typing
import textwrap
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from ..errors import ShapeError, option


@dataclass(frozen=True)
class ScalarDefault:
    """A required forward argument of a plain type given a value: its name, the value, and why that type."""
    name: str
    value: Any
    why: str


@dataclass(frozen=True)
class RecordsDefault:
    """A list-of-dicts input made up: its name, the keys each record holds with their value specs (as the `input`
    option writes them), the optional keys left out, and the `input` option's text that gives the same."""
    name: str
    keys: tuple[tuple[str, str], ...]
    optional: tuple[str, ...]
    spec: str


def _forward_tree(model: Any) -> tuple[ast.FunctionDef, list[inspect.Parameter]] | None:
    """The forward's AST and its parameters after self, or None where its source cannot be read."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
        source = textwrap.dedent(inspect.getsource(model.forward))
        tree = ast.parse(source)
    except (TypeError, ValueError, OSError, SyntaxError, IndentationError):
        return None
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    return (fn, params) if fn is not None else None


_PLAIN = {bool: False, int: 1, float: 1.0}
_PLAIN_NAMES = {"bool": bool, "int": int, "float": float, "str": str}


def _annotated_type(p: inspect.Parameter) -> type | None:
    a = p.annotation
    if isinstance(a, str):
        return _PLAIN_NAMES.get(a.strip())
    return a if a in (bool, int, float, str) else None


def _used_as(fn: ast.AST, name: str) -> tuple[type, Any] | None:
    """How the forward uses `name` where its annotation says nothing: a test (`if name:`, `not name`, `name and
    ...`) makes it a bool, `range(name)` an int, `name == "literal"` a str (the first literal it is compared with)."""
    def is_name(n: ast.AST) -> bool:
        return isinstance(n, ast.Name) and n.id == name

    for node in ast.walk(fn):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)) and is_name(node.test) or \
                isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and is_name(node.operand) or \
                isinstance(node, ast.BoolOp) and any(is_name(v) for v in node.values):
            return bool, False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and \
                any(is_name(a) for a in node.args):
            return int, 1
        if isinstance(node, ast.Compare) and is_name(node.left) and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            lit = node.comparators[0]
            if isinstance(lit, ast.Constant) and isinstance(lit.value, str):
                return str, lit.value
    return None


def scalar_defaults(model: Any, filled: set[str]) -> list[ScalarDefault]:
    """A value for each required argument of the forward that `filled` does not hold and whose type is plain: a bool
    False, an int 1, a float 1.0, by its annotation or else its use (`_used_as`); a str only where the forward
    compares it with a literal (that literal). A required argument of another kind is left to the caller."""
    got = _forward_tree(model)
    if got is None:
        return []
    fn, params = got
    out = []
    for p in params:
        if p.name in filled or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        t = _annotated_type(p)
        if t is not None and t is not str:
            out.append(ScalarDefault(p.name, _PLAIN[t], f"annotated {t.__name__}"))
            continue
        used = _used_as(fn, p.name)
        if used is not None and (t is None or used[0] is t):
            how = {bool: "tested as a condition", int: "passed to range()", str: "compared with that string"}
            out.append(ScalarDefault(p.name, used[1], f"{how[used[0]]} in the forward"))
    return out


def scalar_note(model: Any, values: list[ScalarDefault]) -> str | None:
    if not values:
        return None
    name = type(model).__name__
    shown = ", ".join(f"{v.name}={v.value!r} ({v.why})" for v in values)
    forms = " ".join(f"{option('input')} {v.name}={_form(v.value)}" for v in values)
    return f"required {name}.forward arguments given a default: {shown}; {forms} gives another"


def _form(value: Any) -> str:
    if isinstance(value, bool):
        return f"bool:{str(not value).lower()}"
    if isinstance(value, int):
        return "int:N"
    if isinstance(value, float):
        return "float:X"
    return "..."


def _loop_names(fn: ast.AST, arg: str) -> list[str]:
    """The names a loop (for statement or comprehension) binds to the items of `arg`: `for x in arg`, and the
    matching place of `for a, x in zip(other, arg)`."""
    out = []
    for node in ast.walk(fn):
        if not isinstance(node, (ast.For, ast.comprehension)):
            continue
        it, target = node.iter, node.target
        if isinstance(it, ast.Name) and it.id == arg and isinstance(target, ast.Name):
            out.append(target.id)
        elif isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip" and \
                isinstance(target, ast.Tuple):
            for a, t in zip(it.args, target.elts):
                if isinstance(a, ast.Name) and a.id == arg and isinstance(t, ast.Name):
                    out.append(t.id)
    return out


def _key_tests(node: ast.AST, names: set[str]) -> set[str]:
    """The string keys `node` tests membership of in a record (`"k" in record`)."""
    return {n.left.value for n in ast.walk(node) if isinstance(n, ast.Compare) and
            isinstance(n.left, ast.Constant) and isinstance(n.left.value, str) and
            isinstance(n.ops[0], (ast.In, ast.NotIn)) and isinstance(n.comparators[0], ast.Name) and
            n.comparators[0].id in names}


def record_keys(model: Any, arg: str) -> tuple[list[str], list[str]] | None:
    """(required keys, optional keys) of the dicts a forward's list argument `arg` holds, as its code reads them:
    `record["k"]` read outside any `if "k2" in record:` is required; a key tested with `in`, read with `.get`, or
    read only under such a test is optional. Keys in the order the source first reads them; None where no loop
    over `arg` reads a string key."""
    got = _forward_tree(model)
    if got is None:
        return None
    fn = got[0]
    names = set(_loop_names(fn, arg))
    if not names:
        return None
    optional = _key_tests(fn, names)
    guarded: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.If, ast.IfExp)) and _key_tests(node.test, names):
            for part in (node.body if isinstance(node.body, list) else [node.body]):
                guarded.update(id(n) for n in ast.walk(part))
    reads = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and
                    n.value.id in names and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)),
                   key=lambda n: (n.lineno, n.col_offset))
    for n in ast.walk(fn):  # record.get("k", ...)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and \
                isinstance(n.func.value, ast.Name) and n.func.value.id in names and n.args and \
                isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            optional.add(n.args[0].value)
    required: list[str] = []
    for n in reads:
        key = n.slice.value
        if id(n) in guarded:
            optional.add(key)
        elif key not in required:
            required.append(key)
    required = [k for k in required if k not in optional]
    if not required:
        return None
    return required, sorted(optional)


_SIZE_LIKE = ("size", "shape", "hw", "resolution")


def records_default(model: Any, arg: str, image: tuple[int, ...] | None) -> RecordsDefault | None:
    """The records of a list-of-dicts argument, from the keys its forward reads (`record_keys`): the first required
    key that is not size-like holds the tensor the model's first consumer takes (`image`, (C, H, W): its channels
    and size, one sample's, no batch dim: the list is the batch); a size-like key (`..._size`, `..._shape`) the
    image's (H, W) as a list of ints. None where a required key is neither, or there is no image to make."""
    keys = record_keys(model, arg)
    if keys is None or image is None or len(image) != 3:
        return None
    required, optional = keys
    made: list[tuple[str, str]] = []
    tensor_taken = False
    for key in required:
        if any(s in key.lower() for s in _SIZE_LIKE):
            made.append((key, "list:" + ",".join(map(str, image[1:]))))
        elif not tensor_taken:
            made.append((key, ",".join(map(str, image))))
            tensor_taken = True
        else:
            return None
    if not tensor_taken:
        return None
    spec = f"{arg}=[{{{', '.join(f'{k}: {v}' for k, v in made)}}}]"
    return RecordsDefault(arg, tuple(made), tuple(optional), spec)


def records_value(default: RecordsDefault, B: int) -> list[dict[str, Any]]:
    """B records (the list is the batch), each a dict of meta tensors and lists as `default` says."""
    def one() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, spec in default.keys:
            if spec.startswith("list:"):
                out[key] = [int(x) for x in spec[5:].split(",")]
            else:
                out[key] = torch.zeros(tuple(int(x) for x in spec.split(",")), dtype=torch.float32, device="meta")
        return out
    return [one() for _ in range(B)]


def records_note(model: Any, default: RecordsDefault) -> str:
    image = next(v for k, v in default.keys if not v.startswith("list:"))
    left = f"; optional keys left out: {', '.join(default.optional)}" if default.optional else ""
    return (f"default input: {default.name} = B records (the list is the batch) of the keys "
            f"{type(model).__name__}.forward reads, each an image [{image.replace(',', ', ')}] (float32) sized "
            f"from the first module that takes it and a size-like key as the image's size{left}; "
            f"{option('input')} '{default.spec}' gives another")


_LIST_OF_DICTS = re.compile(r"(?:list|List|Sequence)\[(?:typing\.)?(?:dict|Dict|Mapping)")


def structured_forms(model: Any) -> str | None:
    """The form to type for each forward argument whose annotation asks for a list of dicts or a dataclass of
    inputs (`batched_input: List[Dict[str, Any]]`, `inputs: Batch`), or None where none does."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    forms = []
    held = dataclass_argument(model)
    for p in params:
        text = _annotation_text(p.annotation)
        if _LIST_OF_DICTS.search(text):
            forms.append(f"{option('input')} '{p.name}=[{{image: 3,1024,1024, original_size: list:1024,1024}}]' (a list of "
                         "dicts, its keys as the code reads them)")
        elif held is not None and held[0] == p.name:
            fields = ", ".join(f"{f.name}: B,T" for f in dataclasses.fields(held[1])[:2])
            forms.append(f"{option('input')} '{p.name}={{{fields}}}' (the fields of {held[1].__name__})")
    return "; ".join(forms) or None


def _annotation_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else str(annotation).replace("typing.", "")


def dataclass_argument(model: Any) -> tuple[str, type] | None:
    """(name, class) of the forward's first argument where its annotation is a dataclass (`forward(self, inputs:
    Batch)`, read as `inputs.tokens`); None otherwise."""
    try:
        first = next(iter(inspect.signature(model.forward).parameters.values()), None)
        hints = typing.get_type_hints(model.forward) if first is not None else {}
    except Exception:  # noqa: BLE001 - an annotation that does not resolve names no dataclass
        return None
    cls = hints.get(first.name) if first is not None else None
    return (first.name, cls) if isinstance(cls, type) and dataclasses.is_dataclass(cls) else None


def filled_dataclass(cls: type, given: dict[str, Any], ids: Any) -> Any:
    """`cls` made of the given fields, each required field not given that holds a tensor filled with the token
    ids (`ids`), the others left to their defaults; a required field of another kind is a ShapeError naming it."""
    hints = typing.get_type_hints(cls)
    values = dict(given)
    for f in dataclasses.fields(cls):
        if f.name in values or f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        if "Tensor" in str(hints.get(f.name, "")) and ids is not None:
            values[f.name] = ids
        else:
            raise ShapeError(f"{cls.__name__}.{f.name} (a field of the forward's input) was not given",
                             hint=f"give it inside the input's dict, e.g. {option('input')} 'inputs={{{f.name}: B,T}}'")
    unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ShapeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}",
                         hint=f"its fields: {', '.join(f.name for f in dataclasses.fields(cls))}")
    return cls(**values)


def _position_tables(model: Any) -> Iterator[tuple[str, Any, str, int, int, str]]:
    """Each token table's position table: an nn.Embedding [V, D] whose module also holds a parameter or buffer
    [N, D] (or an nn.Embedding [N, D]), V > N: (the owner's path, the owner, the position table's name, N, D, the
    token table's name). An nn.Embedding the owner's forward hands one of its arguments to (an encoder-decoder's
    source table beside its target table) reads token ids, no positions."""
    for owner_name, owner in model.named_modules():
        tables = [(n, m) for n, m in owner.named_children() if isinstance(m, torch.nn.Embedding)]
        fed = _fed_tables(owner) if len(tables) > 1 else set()
        for name, table in tables:
            width, rows = table.embedding_dim, table.num_embeddings
            own = [(n, tuple(t.shape)) for n, t in (*owner.named_parameters(recurse=False),
                                                    *owner.named_buffers(recurse=False))]
            own += [(n, (m.num_embeddings, m.embedding_dim)) for n, m in tables if m is not table and n not in fed]
            for pos, shape in own:
                if len(shape) == 2 and shape[1] == width and 1 < shape[0] < rows:
                    yield owner_name, owner, pos, shape[0], width, name


def _fed_tables(owner: Any) -> set[str]:
    """The submodules `owner`'s forward hands one of its own required arguments to whole (`self.src_embed(src)`),
    position ids (`pos`, `position_ids`) left out."""
    from .arguments import ForwardReading

    try:
        params = {p.name for p in inspect.signature(owner.forward).parameters.values()
                  if p.default is p.empty and "pos" not in p.name.lower()}
    except (TypeError, ValueError):
        return set()
    return {sub for name, sub in ForwardReading(owner).consumer.items() if name in params}


def position_limit(model: Any) -> tuple[int, str] | None:
    """The longest token sequence a model takes where its token table's owner holds a position table (see
    `_position_tables`): (N, where). None where no token table has one."""
    for owner_name, _, pos, rows, width, name in _position_tables(model):
        where = f"{owner_name + '.' if owner_name else ''}{pos}"
        return rows, f"the position table {where} [{rows}, {width}] beside its token table {name}"
    return None


def _adds_whole(cls: type, attr: str) -> bool:
    """`cls`'s code adds `self.<attr>` whole (`x = self.tok(t) + self.pos`: neither indexed, sliced nor called)."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch."):
            break
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.Add):
                sides = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.value,)
                if any(_is_whole(x, attr) for x in sides):
                    return True
    return False


# Methods that give the whole tensor again, converted or viewed (`self.pos.type(self.dtype)`, `.to(x.dtype)`)
_WHOLE_METHODS = ("type", "to", "float", "half", "bfloat16", "double", "unsqueeze", "contiguous", "detach", "clone",
                  "type_as")


def _is_whole(node: Any, attr: str) -> bool:
    """`node` is `self.<attr>`, or it through conversions only (`self.<attr>.type(dtype)`)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _WHOLE_METHODS:
        node = node.func.value
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
        and node.value.id == "self"


def fixed_context(model: Any) -> tuple[int, str] | None:
    """A token sequence of one length only: the token table's owner adds its whole position table [N, D] to the
    embedded tokens (a fixed context of N, as contrastive text towers have): (N, what says so). None otherwise."""
    for owner_name, owner, pos, rows, width, name in _position_tables(model):
        if _adds_whole(type(owner), pos):
            where = f"{owner_name + '.' if owner_name else ''}{pos}"
            return rows, (f"{type(owner).__name__} adds its whole position table {where} [{rows}, {width}] to the "
                          f"tokens of {name} (a fixed context)")
    return None


__all__ = ["structured_forms", "dataclass_argument", "filled_dataclass", "ScalarDefault", "RecordsDefault", "scalar_defaults", "scalar_note", "record_keys", "records_default",
           "records_value", "records_note", "position_limit", "fixed_context"]

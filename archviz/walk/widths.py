"""Widths named by the code that built a module: `self.wo_b = RowParallelLinear(self.n_groups * args.o_lora_rank,
self.dim)` names in_features "n_groups × o_lora_rank" and out_features "dim"."""

from __future__ import annotations

import ast
import copy
import functools
import re
from typing import Any, Callable

from ..records import (
    SourceSpan,
)
from .moe import module_attr
from .spans import statements

_PREFIXES = re.compile(r"\b(?:self\.config|self\.args|self|args|config|params)\.")


@functools.lru_cache(maxsize=4096)
def _humanize(expr: str) -> str | None:
    text = " ".join(expr.split())
    if re.fullmatch(r"[\d_]+", text):
        return None
    text = _PREFIXES.sub("", text)
    text = text.replace(" * ", " × ").replace(" // ", " ÷ ").replace("**", "^")
    return text if len(text) <= 60 else None


@functools.lru_cache(maxsize=None)
def _init_tree(file: str, start: int, end: int) -> tuple[ast.Module, Callable[[ast.expr], str | None]] | None:
    """Lines [start, end] of `file` (a class's __init__) parsed, with a function giving a node's source text; None
    where they do not read or parse."""
    try:
        with open(file, encoding="utf-8") as f:
            lines = f.read().splitlines()[start - 1:end]
    except (OSError, UnicodeDecodeError):
        return None
    import textwrap

    src = textwrap.dedent("\n".join(lines))
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    encoded = [line.encode("utf-8") for line in src.splitlines()]

    def segment(node: ast.expr) -> str | None:  # ast.get_source_segment, without re-splitting the source each call
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return encoded[first][node.col_offset:node.end_col_offset].decode("utf-8")
        parts = [encoded[first][node.col_offset:], *encoded[first + 1:last], encoded[last][:node.end_col_offset]]
        return b"\n".join(parts).decode("utf-8")

    return tree, segment


@functools.lru_cache(maxsize=None)
def _ctor_widths(file: str, start: int, end: int) -> dict[str, tuple[str | None, str | None]]:
    """attribute -> (first argument, second argument) of every `self.<attr> = Call(a, b, ...)` in lines [start, end]
    of `file` (a class's __init__), as source text."""
    parsed = _init_tree(file, start, end)
    if parsed is None:
        return {}
    tree, segment = parsed

    def widths(call: ast.Call) -> tuple[str | None, str | None]:
        args = [segment(a) for a in call.args[:2]]
        kw = {k.arg: segment(k.value) for k in call.keywords if k.arg}
        return (kw.get("in_features", args[0] if args else None),
                kw.get("out_features", args[1] if len(args) > 1 else None))

    found: dict[str, tuple[int, tuple[str | None, str | None]]] = {}

    for depth, node in statements(tree.body):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t = node.targets[0]
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
            continue
        value = node.value
        if isinstance(value, ast.IfExp):  # `self.q_b_proj = (nn.Linear(a, b) if self.q_lora_rank else None)`
            options = {widths(v) for v in (value.body, value.orelse) if isinstance(v, ast.Call)}
            if len(options) != 1:  # two different constructors: which one ran is not in the text
                continue
            first, second = options.pop()
        elif isinstance(value, ast.Call):
            first, second = widths(value)
        else:
            continue
        # The least nested assignment wins, then the first: `self.x = A(...)` beside an `if ...: self.x = B(...)`
        # names A's widths.
        if t.attr not in found or depth < found[t.attr][0]:
            found[t.attr] = (depth, (first, second))
    return {attr: w for attr, (_, w) in found.items()}


_IDENT = re.compile(r"[A-Za-z_]\w*")


def in_config_terms(dims: tuple, parent_attrs: tuple, config: dict[str, int]) -> tuple:
    """Width names in the config's terms where the code's own differ: the DeepSeek-V4 indexer builds kv_proj as
    `Linear(hidden_size, 2 * self.head_dim)` with `self.head_dim = index_head_dim`, so "2 × head_dim" would read as
    the config's head_dim (512); it becomes "2 × index_head_dim" (the one field of that value whose name holds
    "head_dim", else the one field of that value). A name the config does not have stays. One that cannot be put in
    the config's terms becomes "" -- no name, and none guessed from the config either -- rather than a wrong one."""
    attrs = dict(parent_attrs)
    out = []
    for value, label in dims:
        for ident in dict.fromkeys(_IDENT.findall(label)):
            own = attrs.get(ident)
            if ident not in config or type(own) is not int or own == config[ident]:
                continue
            keys = [k for k, v in config.items() if v == own]
            named = [k for k in keys if ident in k]
            pick = named if len(named) == 1 else keys
            if len(pick) != 1:
                label = ""
                break
            label = re.sub(rf"\b{ident}\b", pick[0], label)
        out.append((value, label))
    return tuple(out)


def ctor_named_dims(mod: Any, name: str, parent_init: SourceSpan | None, files: dict[str, str]) -> tuple:
    inf, outf = module_attr(mod, "in_features"), module_attr(mod, "out_features")
    if not (isinstance(inf, int) and isinstance(outf, int)) or parent_init is None or not name:
        return ()
    return _named_dims_of(name, inf, outf, parent_init, files.get(parent_init.file))


@functools.lru_cache(maxsize=65536)
def _named_dims_of(name: str, inf: int, outf: int, parent_init: SourceSpan, absolute: str | None) -> tuple:
    if not absolute:
        return ()
    exprs = _ctor_widths(absolute, parent_init.start, parent_init.end).get(name)
    if not exprs:
        return ()
    out = []
    for value, expr in ((inf, exprs[0]), (outf, exprs[1])):
        label = _humanize(expr) if expr else None
        if label and all(v != value for v, _ in out):
            out.append((value, label))
    return tuple(out)


_SIZED = frozenset({"empty", "zeros", "ones", "randn", "rand"})  # torch's makers of a tensor of the sizes given
_SUBSTITUTIONS = 3  # rounds of local names replaced by their expressions (`n = a * b; m = n + 2`)


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _sizes(value: ast.expr) -> list[ast.expr] | None:
    """The size arguments of `nn.Parameter(torch.empty(a, b))` (or zeros, ones, randn, rand; the sizes given as a
    tuple or list too); None for any other value."""
    if not (isinstance(value, ast.Call) and value.args and _callee(value) == "Parameter"):
        return None
    made = value.args[0]
    if not (isinstance(made, ast.Call) and made.args and _callee(made) in _SIZED):
        return None
    args = made.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    return None if any(isinstance(a, ast.Starred) for a in args) else list(args)


class _Locals(ast.NodeTransformer):
    """Local names replaced by the one expression each is assigned (`mix = (2 + self.hc_mult) * self.hc_mult`)."""

    def __init__(self, values: dict[str, ast.expr]) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.expr:
        v = self.values.get(node.id)
        return node if v is None or not isinstance(node.ctx, ast.Load) else copy.deepcopy(v)


@functools.lru_cache(maxsize=None)
def _param_sizes(file: str, start: int, end: int) -> dict[str, tuple[str | None, ...]]:
    """attribute -> each size's expression (None where it is a bare number or reads as nothing) of every
    `self.<attr> = nn.Parameter(torch.empty(...))` in lines [start, end] of `file` (a class's __init__), the local
    names in it replaced by what they are assigned (once, in a plain assignment, in that __init__):
    `n = (2 + self.hc_mult) * self.hc_mult; self.fn = nn.Parameter(torch.empty(n, ...))` names n
    "(2 + hc_mult) × hc_mult"."""
    parsed = _init_tree(file, start, end)
    if parsed is None:
        return {}
    tree = parsed[0]
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
    values: dict[str, ast.expr] = {}
    found: dict[str, tuple[str | None, ...]] = {}
    for _, node in statements(tree.body):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t = node.targets[0]
        if isinstance(t, ast.Name) and stores.get(t.id) == 1:
            values[t.id] = node.value
            continue
        sizes = _sizes(node.value)
        if sizes is None or not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                 and t.value.id == "self") or t.attr in found:
            continue
        labels = []
        for size in sizes:
            size = copy.deepcopy(size)  # the parsed tree is cached: it stays as read
            for _ in range(_SUBSTITUTIONS):
                size = _Locals(values).visit(size)
            labels.append(_humanize(ast.unparse(size)))
        found[t.attr] = tuple(labels)
    return found


def param_named_dims(mod: Any, init: SourceSpan | None, files: dict[str, str], config: dict[str, int]) -> tuple:
    """The sizes of a module's own parameters named by the expressions its __init__ makes them with (see
    `_param_sizes`): ((size, name), ...), a size two parameters name differently left out. Only expressions of
    config fields (`config`: its int fields) whose values the module does not change: `self.hidden_dim` (the config's
    hidden_size under the code's own name) is left to the config's name."""
    absolute = files.get(init.file) if init is not None else None
    params = mod.__dict__.get("_parameters")
    if not absolute or not params or not config:
        return ()
    shapes = tuple((k, tuple(int(d) for d in p.shape)) for k, p in params.items() if p is not None)
    own = mod.__dict__

    def in_config(label: str) -> bool:
        return all(i in config and (type(own.get(i)) is not int or own[i] == config[i]) for i in _IDENT.findall(label))

    return tuple((v, label) for v, label in _param_dims_of(shapes, init, absolute)
                 if in_config(label) and _value(label, config) == v)


_OPS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__}


def _value(label: str, config: dict[str, int]) -> int | None:
    """A width name's value from the config's ints (`(2 + hc_mult) × hc_mult` → 24): None where it holds anything
    but ints, config fields, + − × ÷. A name whose value is not the size's names something else (an argument
    `hidden_size` that the caller gave q_lora_rank) and is not given."""
    try:
        tree = ast.parse(label.replace("×", "*").replace("÷", "//").replace("−", "-"), mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.expr) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return config.get(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None or (b == 0 and type(node.op) is ast.FloorDiv):
                return None
            return _OPS[type(node.op)](a, b)
        return None

    return ev(tree.body)


@functools.lru_cache(maxsize=65536)
def _param_dims_of(shapes: tuple[tuple[str, tuple[int, ...]], ...], init: SourceSpan, absolute: str) -> tuple:
    exprs = _param_sizes(absolute, init.start, init.end)
    named: dict[int, set[str]] = {}
    for attr, shape in shapes:
        labels = exprs.get(attr)
        if labels is not None and len(labels) == len(shape):
            for value, label in zip(shape, labels):
                if label:
                    named.setdefault(value, set()).add(label)
    return tuple((v, next(iter(ls))) for v, ls in named.items() if len(ls) == 1)

"""Widths named by the code that built a module: `self.wo_b = RowParallelLinear(self.n_groups * args.o_lora_rank,
self.dim)` names in_features "n_groups × o_lora_rank" and out_features "dim"."""

from __future__ import annotations

import ast
import functools
import re
from typing import Any

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
def _ctor_widths(file: str, start: int, end: int) -> dict[str, tuple[str | None, str | None]]:
    """attribute -> (first argument, second argument) of every `self.<attr> = Call(a, b, ...)` in lines [start, end]
    of `file` (a class's __init__), as source text."""
    try:
        with open(file, encoding="utf-8") as f:
            lines = f.read().splitlines()[start - 1:end]
    except (OSError, UnicodeDecodeError):
        return {}
    import textwrap

    src = textwrap.dedent("\n".join(lines))
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return {}
    encoded = [line.encode("utf-8") for line in src.splitlines()]

    def segment(node: ast.expr) -> str | None:  # ast.get_source_segment, without re-splitting the source each call
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return encoded[first][node.col_offset:node.end_col_offset].decode("utf-8")
        parts = [encoded[first][node.col_offset:], *encoded[first + 1:last], encoded[last][:node.end_col_offset]]
        return b"\n".join(parts).decode("utf-8")

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

"""Default values of a forward's further arguments (after the first), from what the code does with each: the module
its forward hands it to (`txt = self.txt_in(txt)`: that module's first Linear or embedding table says its width and
dtype), the rank the forward tests it for (`if txt.ndim != 3: raise`), and what its name says where no module takes
it whole (position ids of a multi-axis rotary embedding, a guidance strength per sample). Read from the forward's
source, never run; an argument none of these settles is left to the caller (the `input` option)."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any

import torch

from ..errors import option

# A guidance strength (classifier-free guidance distilled into the model) per sample: a float [B], as a timestep.
GUIDANCE = re.compile(r"(guidance|guidance_scales?|cfg_scales?|guidance_strength)", re.I)
# Position ids (coordinates of each token on each axis of a multi-axis rotary embedding).
_POSITION_IDS = re.compile(r"(\w+_)?(ids|pos|positions?|coords?)", re.I)
# Token ids beside another modality (a speech model's decoder tokens after its spectrogram).
_TOKENS = re.compile(r"(\w*_)?(tokens?|ids|text|captions?)", re.I)
# A decoder's own token ids beside a source's (an encoder-decoder's `tgt`, `trg`, `decoder_input_ids`).
TARGET = re.compile(r"(\w+_)?(tgt|trg|dec|decoder|prev_output)(_\w+)?", re.I)
# Ids that run beside the first input's own tokens, position by position: never a sequence of their own.
_COMPANION = re.compile(r"(\w+_)?(types?|segments?|positions?|pos|mask|lang|language|labels?|targets?)(_ids?)?", re.I)
# The attribute of a rotary embedding module that lists its axes' widths.
_AXES = re.compile(r"axes(_dims?)?", re.I)


def _forward_tree(model: Any) -> ast.FunctionDef | None:
    try:
        source = textwrap.dedent(inspect.getsource(type(model).forward))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    fn = tree.body[0] if tree.body else None
    return fn if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _in_order(node: ast.AST) -> list[ast.AST]:
    """The nodes under `node` in source order (ast.walk goes breadth first)."""
    nodes = [n for n in ast.walk(node) if hasattr(n, "lineno")]
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class ForwardReading:
    """What a forward's source says of each argument: the submodule it is first handed to whole (`self.x_in(x)`),
    the rank it is tested for (`x.ndim != 3`, `x.dim() == 2`), and whether it first goes through a plain function
    (`timestep_embedding(t, 256)`)."""

    def __init__(self, model: Any):
        self.consumer: dict[str, str] = {}
        self.rank: dict[str, int] = {}
        fn = _forward_tree(model)
        if fn is None:
            return
        for node in _in_order(fn):
            if isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Compare):
                self._compare(node)

    def _call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
            for a in node.args[:1]:
                if isinstance(a, ast.Name):
                    self.consumer.setdefault(a.id, f.attr)

    def _compare(self, node: ast.Compare) -> None:
        left, right = node.left, node.comparators[0] if node.comparators else None
        if not (isinstance(right, ast.Constant) and isinstance(right.value, int)):
            return
        if isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            name = _rank_of(left)
            if name is not None:
                self.rank.setdefault(name, right.value)


def _rank_of(node: ast.AST) -> str | None:
    """`x.ndim` or `x.dim()` or `len(x.shape)`: the argument `x` whose rank it reads."""
    if isinstance(node, ast.Attribute) and node.attr == "ndim" and isinstance(node.value, ast.Name):
        return node.value.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dim" \
            and isinstance(node.func.value, ast.Name):
        return node.func.value.id
    return None


def _first_weighted(module: Any) -> Any:
    for m in module.modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Embedding, torch.nn.EmbeddingBag)):
            return m
    return None


def _rotary_axes(model: Any) -> int | None:
    """The number of axes of a multi-axis rotary embedding the model holds (an attribute listing each axis' width,
    `axes_dim = [16, 56, 56]`), or None."""
    for m in model.modules():
        for key, value in vars(m).items():
            if _AXES.fullmatch(key) and isinstance(value, (list, tuple)) and value and \
                    all(isinstance(v, int) for v in value):
                return len(value)
    return None


def further_default(model: Any, name: str, reading: ForwardReading, B: int, T: int) -> tuple[Any, str] | None:
    """A meta tensor for the forward argument `name` and a note saying what it is, or None where the code does not
    say: the width and dtype of the Linear (float features) or embedding table (int64 ids) of the submodule the
    forward hands it to, at the rank the forward tests for it ([B, T, width] at rank 3, else [B, width]); a
    guidance strength [B] float32; position ids over the axes of the model's multi-axis rotary embedding
    [B, T, axes] float32."""
    if GUIDANCE.fullmatch(name):
        return torch.zeros((B,), dtype=torch.float32, device="meta"), f"{name}=[B] float32 (a guidance strength " \
                                                                      "per sample)"
    sub = reading.consumer.get(name)
    module = getattr(model, sub, None) if sub else None
    first = _first_weighted(module) if isinstance(module, torch.nn.Module) else None
    if isinstance(first, torch.nn.Linear):
        rank = reading.rank.get(name, 2)
        dims = (B, T, first.in_features) if rank == 3 else (B, first.in_features)
        shown = f"[B, T, {first.in_features}]" if rank == 3 else f"[B, {first.in_features}]"
        return torch.zeros(dims, dtype=torch.float32, device="meta"), \
            f"{name}={shown} float32 (what self.{sub} takes)"
    if isinstance(first, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
        rank = reading.rank.get(name, 1)
        dims, shown = ((B, T), "[B, T]") if rank == 2 else ((B,), "[B]")
        return torch.zeros(dims, dtype=torch.long, device="meta"), f"{name}={shown} int64 (ids self.{sub} reads)"
    if _POSITION_IDS.fullmatch(name) and module is None:
        axes = _rotary_axes(model)
        if axes is not None:
            return torch.zeros((B, T, axes), dtype=torch.float32, device="meta"), \
                f"{name}=[B, T, {axes}] float32 (a position on each of the rotary embedding's {axes} axes)"
    return None


def not_given_hint(model: Any, where: str, given: dict[str, Any]) -> str | None:
    """For a pass that died on a None in the submodule `where`: the forward's argument the code hands to that
    submodule (`context = self.context_embedder(context)`), optional and not given, with the input spec its first
    Linear or embedding table asks for; None where no such argument is read there."""
    top = where.split(".", 1)[0]
    for name, sub in ForwardReading(model).consumer.items():
        if sub != top or given.get(name) is not None:
            continue
        first = _first_weighted(getattr(model, sub, None)) if isinstance(getattr(model, sub, None), torch.nn.Module) \
            else None
        if isinstance(first, torch.nn.Linear):
            spec, what = f"{name}=B,T,{first.in_features}", f"a Linear of {first.in_features} inputs"
        elif isinstance(first, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
            spec, what = f"{name}=B,T", "a token table"
        else:
            continue
        return (f"{type(model).__name__}.forward's {name} (optional, handed to self.{sub}, {what}) was not given: give "
                f"it with {option('input')} {spec} (a sequence of its own: {option('input')} {name}=B,T_{name}=N,... "
                f"names its length)")
    return None


def beside_token_ids(model: Any, B: int, T: int) -> tuple[list[Any], list[str]]:
    """For a forward whose first input is token ids: the required positional arguments after it that are token ids
    of a sequence of their own (an encoder-decoder's `forward(src, tgt)`: the decoder's target tokens), each [B, T]
    int64 with its note, in order; stops at the first that is not. One is token ids where the forward hands it to a
    submodule whose first weighted module is a token table (`self.tgt_embed(tgt)`, `self.decoder(tgt, memory)`),
    or, handed to no submodule whole, where its name says so (`tgt`, `prev_output_tokens`, `decoder_input_ids`) and
    the model holds a token table; never one the forward tests for rank 1 (a label per sample), nor ids that run
    beside the first's tokens position by position (`token_type_ids`, `position_ids`, `labels`, `targets`)."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return [], []
    reading = ForwardReading(model)
    table = next((n for n, m in model.named_modules() if isinstance(m, torch.nn.Embedding)), None)
    out: list[Any] = []
    notes: list[str] = []
    for p in params:
        if p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty or reading.rank.get(p.name, 2) != 2 \
                or _COMPANION.fullmatch(p.name):
            break
        sub = reading.consumer.get(p.name)
        module = getattr(model, sub, None) if sub else None
        first = _first_weighted(module) if isinstance(module, torch.nn.Module) else None
        if isinstance(first, torch.nn.Embedding):
            where = f"ids self.{sub} reads"
        elif not isinstance(module, torch.nn.Module) and table is not None and TARGET.fullmatch(p.name):
            where = f"token ids, as its name says, for a token table such as {table}"
        else:
            break
        out.append(torch.zeros((B, T), dtype=torch.long, device="meta"))
        notes.append(f"{p.name}=[B, T] int64 ({where})")
    return out, notes


__all__ = ["ForwardReading", "GUIDANCE", "TARGET", "beside_token_ids", "further_default", "not_given_hint"]


def token_ids_default(model: Any, first: Any, p: inspect.Parameter, B: int, T: int) -> tuple[Any, str] | None:
    """Token ids [B, T] for a tensor argument named as token ids are (`tokens`, `text_ids`, `caption`) of a model
    whose nn.Embedding is not `first`, what takes the first input (an audio encoder's Conv1d does; a decoder's token
    table takes these), with its note; None for any other argument."""
    if not _TOKENS.fullmatch(p.name) or not (p.annotation in (torch.Tensor, p.empty)
                                             or p.annotation in ("Tensor", "torch.Tensor")):
        return None
    table = _later_table(model, first)
    if table is None:
        return None
    return torch.zeros((B, T), dtype=torch.long, device="meta"), \
        f"{p.name}=[B, T] int64 (token ids, for the token table {table})"


def _later_table(model: Any, first: Any) -> str | None:
    """The name of the first nn.Embedding of a model whose first consumer (`first`) is another module, or None."""
    return next((n for n, m in model.named_modules() if isinstance(m, torch.nn.Embedding) and m is not first), None) \
        if not isinstance(first, torch.nn.Embedding) else None

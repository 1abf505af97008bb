"""A forward's further sequence inputs, each its own length: a model whose first input is a sequence over T (image
patches, latents as tokens) and that takes another sequence beside it (text tokens for joint attention, a
cross-attention context, token ids beside a spectrogram over time) gets a dim of its own for that other sequence,
`T_<argument>`, sized from the config where a key names its length, else by a stated default; the position ids of a
stream (`txt_ids` beside `txt`) take its dim. The pass sees each stream as an input spec with a named dim
(`txt=B,T_txt=512,4096:float32`), so the second pass varies it and the records name it, as a dim the user names."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import option
from ..input_specs import check_input_specs
from ..sources import Built
from .arguments import TARGET, ForwardReading, beside_token_ids
from .inputs import conditioning, consumer_default, position_tables

STREAM_DEFAULT = 512  # a further sequence's length where neither the code nor the config says one
_PROBE_T = (97, 101)  # two lengths of T: the dims of a default input that follow T differ between them
# The config keys that may give a stream's length: its name (or a word for text) beside a word for a length.
_LENGTH = r"(max_|n_|num_)?({stem})_?(len|length|seq_len|ctx|tokens|seq|positions)"
_TEXT_WORDS = ("txt", "text", "context", "caption", "prompt", "encoder", "cond")
_TARGET_WORDS = ("tgt", "trg", "target", "dec", "decoder")  # `max_tgt_len`, `max_target_positions`
_POSITIONS = re.compile(r"((?P<stem>\w+?)_)?(ids|pos|positions?|coords?)", re.I)


@dataclass(frozen=True)
class Stream:
    """One further sequence: its dim's name and size, where the size came from, the forward's arguments it sizes
    (the sequence, then its position ids), and the input specs the pass makes those the specs do not give."""

    dim: str
    size: int
    where: str
    arguments: tuple[str, ...]
    specs: tuple[tuple[str, str], ...]  # (argument, spec) of the arguments the pass makes
    example: str  # the sequence's spec, its length N: what the `input` option takes to give another
    beside: str  # the first input, over T
    most: int | None = None  # the longest it takes, where the config or a position table says: a decode's bound

    def note(self) -> str:
        names = ", ".join(self.arguments)
        one = len(self.arguments) == 1
        return (f"{self.dim} = {self.size:,}: {names} {'is' if one else 'are'} a sequence of "
                f"{'its' if one else 'their'} own beside {self.beside}'s T ({self.where}); {option('input')} {self.example} gives another length")


def further_streams(built: Built, input_specs: list[str] | None) -> list[Stream]:
    """The further sequences of a model file's forward whose first input runs over T (none for token ids, an
    image, a fixed window), each a Stream; an argument the input specs already give is left to them, and a stream
    whose sequence the specs give keeps the length they give it."""
    if built.kind == "hf":
        return []
    first = consumer_default(built)
    if first is not None and "T" not in first.dims or built.tokens_1d:
        return []
    model = built.model
    try:
        params = [p.name for p in inspect.signature(model.forward).parameters.values()]
    except (TypeError, ValueError):
        return []
    # beside token ids, a decoder's own token ids (forward(src, tgt)); beside another sequence, what it conditions on
    made = [(conditioning(model, 1, t) if first is not None else beside_token_ids(model, 1, t))[0] for t in _PROBE_T]
    if len(made[0]) != len(made[1]):
        return []
    names = params[1:1 + len(made[0])]
    along: dict[str, tuple[int, ...]] = {}  # argument -> the positions of its dims that follow T
    for name, a, b in zip(names, *made):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim():
            axes = tuple(i for i, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y)
            if axes:
                along[name] = axes
    given = {name: payload for name, kind, payload in check_input_specs(input_specs) if kind == "tensor"}
    shapes = {name: tuple(a.shape) for name, a in zip(names, made[0]) if isinstance(a, torch.Tensor)}
    dtypes = {name: str(a.dtype).removeprefix("torch.") for name, a in zip(names, made[0])
              if isinstance(a, torch.Tensor)}
    streams: list[Stream] = []
    # position ids (float coordinates, `txt_ids`) follow the sequence their name starts with, else the first input
    positions = {n: _POSITIONS.fullmatch(n).group("stem") for n in along if _POSITIONS.fullmatch(n) and
                 dtypes[n].startswith(("float", "bfloat"))}
    for name in (n for n in along if n not in positions):
        members = [name, *(n for n, stem in positions.items() if stem == name)]
        dim = f"T_{name}"
        size, where = _length(built, name, given.get(name), along[name])
        if size is None:
            continue  # the specs size this sequence by T itself: it shares T
        most = _length(built, name, None, along[name])
        most = most[0] if not most[1].startswith("a stated default") else None
        specs = tuple((m, _spec(m, shapes[m], along[m], f"{dim}={size}", dtypes[m])) for m in members
                      if m not in given)
        if specs:
            example = _spec(name, shapes[name], along[name], f"{dim}=N", dtypes[name])
            streams.append(Stream(dim, size, where, tuple(members), specs, example, params[0], most))
    return streams


def _length(built: Built, name: str, given: Any, axes: tuple[int, ...]) -> tuple[int | None, str]:
    """The stream's length: what the input spec of its sequence gives it (None: it gives T, the first input's),
    else a config key naming its length, else STREAM_DEFAULT."""
    if given is not None:
        dims = given[0]
        d = dims[axes[0]] if axes[0] < len(dims) else None
        if d == "T" or d is None:
            return None, ""
        if isinstance(d, tuple):
            return (d[1], f"as {option('input')} {name} names it") if isinstance(d[1], int) else (None, "")
        return (d, f"as {option('input')} {name} gives it") if isinstance(d, int) else (None, "")
    config = built.config if isinstance(built.config, dict) else {}
    words = _TEXT_WORDS if name.lower() in _TEXT_WORDS else _TARGET_WORDS if TARGET.fullmatch(name) else ()
    stems = "|".join(re.escape(s) for s in (name, *words))
    pattern = re.compile(_LENGTH.format(stem=stems), re.I)
    for key, value in config.items():
        if pattern.fullmatch(key) and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"the config's {key}"
    table = _table_rows(built.model, name)
    if table is not None and table[0] < STREAM_DEFAULT:
        return table[0], f"the {table[0]:,} positions of {table[1]}: neither the code nor the config gives its length"
    return STREAM_DEFAULT, "a stated default: neither the code nor the config gives its length"


def _table_rows(model: Any, name: str) -> tuple[int, str] | None:
    """(rows N, name) of the shortest position table [N, D] (or [1, N, D]) held by the submodule the forward hands
    the sequence `name` to (a decoder's sinusoid table beside its token table of width D), or None."""
    sub = ForwardReading(model).consumer.get(name)
    module = getattr(model, sub, None) if sub else None
    table = next((m for m in module.modules() if isinstance(m, torch.nn.Embedding)), None) \
        if isinstance(module, torch.nn.Module) else None
    if table is None:
        return None
    tables = position_tables(module, table.embedding_dim)
    rows, where = min(((r, n) for n, r in tables), default=(None, ""))
    return (rows, f"{sub}.{where}") if rows is not None else None


def _spec(name: str, shape: tuple[int, ...], axes: tuple[int, ...], dim: str, dtype: str) -> str:
    """The input spec of one of a stream's arguments: B first, its stream's `dim` (`T_txt=512`) where it followed
    T, the rest as made."""
    parts = [dim if i in axes else "B" if i == 0 else str(d) for i, d in enumerate(shape)]
    return f"{name}={','.join(parts)}:{dtype}"


__all__ = ["STREAM_DEFAULT", "Stream", "further_streams"]

"""GGUF tensor names mapped to the model's own, as one more candidate ruleset (a name mapper, as ``hf_live``'s).

llama.cpp's converters rename every tensor (``model.layers.3.self_attn.q_proj.weight`` → ``blk.3.attn_q.weight``) by
the table in the ``gguf`` package (``TensorNameMap`` per architecture: the names of every model family llama.cpp
converts, one GGUF name each). Here that table runs the other way: each of the model's own tensor names is looked up
in it (with ``.weight``/``.bias`` tried as suffixes), and the GGUF name it gives maps back to the model's name. The
converters' layouts are answered so the comparison stays exact:

- stacked experts: ``blk.N.ffn_gate_exps`` holds every expert of a layer in one tensor; a model that keeps them
  stacked too maps one to one, one that fuses gate and up (``experts.gate_up_proj``) takes both, compared by sums;
- a 2-D tensor stored transposed (GPT-2's ``Conv1D`` weights are written as ``nn.Linear`` ones) is compared by
  its element count, with the shape noted;
- permuted Q/K rows (llama's converter reorders them for its rope kernel) keep their shape: nothing to answer;
- a tied output (``output.weight`` left out when the model ties it to the embedding) is the model's alias, which
  the comparison already leaves out.

Dims are compared in the model's order: the reader lists GGUF's innermost-first dims reversed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .records import CheckpointInventory
from .rules import Fuse, Ruleset

__all__ = ["GGUF_NAME", "gguf_ruleset"]

GGUF_NAME = "gguf:TensorNameMap"
_SUFFIXES = (".weight", ".bias")
_INDEX = re.compile(r"\.(\d+)\.")


def _fuse(about: str, into: str) -> Fuse:
    return Fuse(re.escape(into), into, about, re.compile(re.escape(into)))


class GgufMapper:
    """GGUF name → (model name, the layout that joins it or None, ())."""

    def __init__(self, table: dict[str, tuple[str, Fuse | None]]) -> None:
        self.table = table

    def __call__(self, name: str) -> tuple[str, Fuse | None, tuple[str, ...]]:
        hit = self.table.get(name)
        return (name, None, ()) if hit is None else (hit[0], hit[1], ())


def _gguf_name(tnm: Any, name: str) -> str | None:
    g = tnm.get_name(name, try_suffixes=_SUFFIXES)
    if g is None:
        return None
    return g if g.endswith(_SUFFIXES) else g + ".weight"


def _table(tnm: Any, model_shapes: Mapping[str, tuple[int, ...]], inventory: CheckpointInventory
           ) -> tuple[dict[str, tuple[str, Fuse | None]], list[str]]:
    """(GGUF name → (model name, layout), the model names the map has no GGUF name for)."""
    table: dict[str, tuple[str, Fuse | None]] = {}
    unnamed: list[str] = []
    tensors = inventory.tensors
    for m, shape in model_shapes.items():
        g = _gguf_name(tnm, m)
        if g is not None:
            if g in table:
                continue
            t = tensors.get(g)
            via = None
            if t is not None and len(shape) == 2 and t.shape != shape and t.shape == shape[::-1]:
                via = _fuse(f"stored transposed by the converter ({list(t.shape)} for the model's {list(shape)})", m)
            table[g] = (m, via)
            continue
        if m.endswith("gate_up_proj") or m.endswith("gate_up_proj.weight"):
            parts = [_gguf_name(tnm, m.replace("gate_up_proj", p)) for p in ("gate_proj", "up_proj")]
            if all(parts):
                via = _fuse("stacked experts' gate and up, fused into one tensor by the model", m)
                for g in parts:
                    table.setdefault(g, (m, via))  # type: ignore[arg-type]
                continue
        if m not in tensors:  # a file that keeps the model's own name holds it after all
            unnamed.append(m)
    return table, unnamed


def _unheld(arch: str, table: Mapping[str, Any], unnamed: list[str]) -> dict[str, str]:
    """The model tensors GGUF's tensor set for ``arch`` has no name for (BERT's pooler): converters leave them out,
    so they are said apart rather than missing. Only where the map names most of the model (a model whose names
    the map does not know at all is not this case: its tensors stay missing)."""
    if len(unnamed) >= len(table):
        return {}
    why = f"GGUF's {arch} tensor set has no tensor for it; converters leave it out"
    return {m: why for m in unnamed}


def gguf_ruleset(inventory: CheckpointInventory, model_shapes: Mapping[str, tuple[int, ...]]
                 ) -> tuple[Ruleset | None, str | None]:
    """(the ruleset, None) for a GGUF inventory whose architecture the gguf package knows; (None, why not) for a GGUF
    one it does not; (None, None) for any other inventory."""
    if inventory.metadata.get("format") != "gguf":
        return None, None
    kv = inventory.metadata.get("gguf") or {}
    arch = kv.get("general.architecture")
    try:
        import gguf
    except ImportError as e:
        return None, f"GGUF names not mapped: the gguf package is not installed ({e})"
    arch_enum = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}.get(arch)
    if arch_enum is None:
        return None, f"GGUF names not mapped: the gguf package does not know the architecture {arch!r}"
    blocks = kv.get(f"{arch}.block_count")
    n = blocks if type(blocks) is int and 0 <= blocks <= 100_000 else 0
    for name in model_shapes:  # a model with more layers than the file: its extra layers' names map too
        m = _INDEX.search(name)  # the first index is the layer's (an expert's comes after it)
        if m is not None:
            n = max(n, min(int(m[1]) + 1, 100_000))
    tnm = gguf.get_tensor_name_map(arch_enum, n)
    table, unnamed = _table(tnm, model_shapes, inventory)
    mapper = GgufMapper(table)
    about = (f"llama.cpp's tensor names for {arch} (gguf {getattr(gguf, '__version__', '')} TensorNameMap), "
             "run from the model's names to the file's")
    return Ruleset(name=GGUF_NAME, about=about, provenance="gguf.tensor_mapping.TensorNameMap", file="",
                   mapper=mapper, unheld=_unheld(str(arch), table, unnamed)), None


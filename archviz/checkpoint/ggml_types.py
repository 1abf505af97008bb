"""GGML tensor types (the ``type`` of a GGUF tensor): their names, ids, and block sizes.

A GGML type stores ``block`` logical values in ``block_bytes`` bytes (F16: 1 value in 2 bytes; Q4_0: 32 values in
18 bytes; Q4_K: 256 in 144). The table is llama.cpp's own (``gguf.GGML_QUANT_SIZES``), read from the ``gguf`` package
when a GGUF file is first met; the plain types (F32, F16, BF16, F64, I8 ... I64) are the safetensors codes of the same
name, so only the block-quantized types are looked up here.
"""

from __future__ import annotations

from functools import cache

from archviz.errors import CheckpointError

__all__ = ["GGUF_HINT", "block_of", "type_names"]

GGUF_HINT = "pip install 'archviz[gguf]' (llama.cpp's gguf package gives the quant types' block sizes)"


@cache
def _table() -> tuple[dict[int, str], dict[str, tuple[int, int]]]:
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError as e:
        raise CheckpointError(f"reading GGUF files needs the gguf package ({e})", hint=GGUF_HINT) from None
    names = {int(t): t.name for t in GGMLQuantizationType if t in GGML_QUANT_SIZES}
    sizes = {t.name: (int(GGML_QUANT_SIZES[t][0]), int(GGML_QUANT_SIZES[t][1]))
             for t in GGMLQuantizationType if t in GGML_QUANT_SIZES}
    return names, sizes


def type_names() -> dict[int, str]:
    """GGML type id → name (``0: "F32"``, ``2: "Q4_0"``, ...), for the types whose block size is known."""
    return _table()[0]


def block_of(dtype: str) -> tuple[int, int] | None:
    """``(values per block, bytes per block)`` of a GGML type name, or ``None`` for a name that is not one."""
    try:
        return _table()[1].get(dtype)
    except CheckpointError:
        return None

"""Typed, immutable records describing a checkpoint from its headers alone.

Nothing here touches tensor data: every number is derived from the safetensors header (dtype, shape,
data offsets) or from a header-only manifest.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .ggml_types import block_of

__all__ = [
    "DTYPE_BITS",
    "CheckpointInventory",
    "ShardInfo",
    "TensorInfo",
    "TypeTotal",
    "dtype_nbytes",
    "known_dtype",
    "stored_problem",
]

#: Bits per element of every dtype code the safetensors format defines (safetensors 0.8: 22 codes).
#: Sub-byte types (F4, F6_*) are packed; a tensor of them must fill whole bytes.
DTYPE_BITS: Mapping[str, int] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}


def dtype_nbytes(dtype: str, numel: int) -> int:
    """Bytes that ``numel`` elements of ``dtype`` occupy on disk (packed for sub-byte dtypes, rounded up; a GGML
    block-quantized type such as ``Q4_K`` takes whole blocks of its size, ``ggml_types.py``)."""
    bits = DTYPE_BITS.get(dtype)
    if bits is not None:
        return (numel * bits + 7) // 8
    block = block_of(dtype)
    if block is None:
        raise KeyError(dtype)
    return -(-numel // block[0]) * block[1]


def known_dtype(dtype: str) -> bool:
    """Whether ``dtype`` is a safetensors code or a GGML type name."""
    return dtype in DTYPE_BITS or block_of(dtype) is not None


def stored_problem(dtype: str, shape: tuple[int, ...] | list[int]) -> str | None:
    """Why ``shape`` cannot be stored in ``dtype`` (sub-byte values not filling whole bytes, rows that are not whole
    blocks of a GGML type), or ``None``."""
    block = None if dtype in DTYPE_BITS else block_of(dtype)
    if block is not None:
        return f"rows of {shape[-1]} are not whole {dtype} blocks of {block[0]}" if shape and shape[-1] % block[0] \
            else None
    return f"{dtype}{list(shape)!r} does not fill whole bytes" if (math.prod(shape) * DTYPE_BITS[dtype]) & 7 else None


class TensorInfo(NamedTuple):
    """One tensor as its header describes it (an immutable named tuple: cheap to build by the hundred thousand).

    ``dtype`` is the safetensors dtype code (``"BF16"``, ``"F8_E4M3"``, ``"F8_E8M0"``, ``"I8"``, ...);
    ``shape`` is the stored shape (a packed fp4 matrix stored in ``I8`` has the *stored* shape);
    ``shard`` is the file name of the shard that holds it; ``data_offsets`` are ``(begin, end)`` byte offsets
    relative to the end of the header, or ``None`` when the source (a manifest) does not record them.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    shard: str
    data_offsets: tuple[int, int] | None = None

    @property
    def numel(self) -> int:
        """Number of stored elements (product of ``shape``; 1 for a scalar)."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes the tensor's data occupies in its shard."""
        return dtype_nbytes(self.dtype, math.prod(self.shape))


class TypeTotal(NamedTuple):
    """One stored type's share of a checkpoint: its tensors, their logical elements and their bytes."""

    dtype: str
    tensors: int
    elements: int
    bytes: int

    @property
    def bits_per_weight(self) -> float:
        """Stored bits per logical element (Q4_0: 4.5, Q8_0: 8.5, F16: 16)."""
        return 8 * self.bytes / self.elements if self.elements else 0.0


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """One shard file: its name, full size, and header size (8-byte length prefix included).

    ``header_sha256`` is the SHA-256 of the prefix plus header bytes when known; ``metadata`` is the shard's
    ``__metadata__`` (string to string) when known.
    """

    name: str
    file_bytes: int
    header_bytes: int
    header_sha256: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def data_bytes(self) -> int:
        """Size of the data region that follows the header."""
        return self.file_bytes - self.header_bytes


@dataclass(frozen=True)
class CheckpointInventory:
    """Everything the headers of a checkpoint say, in on-disk order.

    ``source`` names what was opened (a path or ``hf://owner/name@revision``); ``revision`` is the commit for
    remote or manifest sources, else ``None``; ``shards`` are in order; ``tensors`` maps name to
    :class:`TensorInfo`, insertion-ordered shard by shard and, within a shard, in header order.

    ``metadata`` holds only what the source states, under these keys when present:

    - ``"header"``: ``__metadata__`` entries shared (same key, same value) by every shard, e.g. ``{"format": "pt"}``;
    - ``"index"``: the ``metadata`` object of a ``model.safetensors.index.json`` (e.g. ``{"total_size": ...}``);
    - ``"model"``: the model id a manifest or remote repository names;
    - ``"manifest"``: the manifest format read (``"archviz-manifest/1"`` or ``"header-audit"``);
    - ``"manifest_source"``: where a manifest says its lists came from;
    - ``"requested_revision"``: the revision asked for in an ``hf://`` spec, before resolution to a commit.
    """

    source: str
    revision: str | None
    shards: tuple[ShardInfo, ...]
    tensors: dict[str, TensorInfo]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tensors)

    def __iter__(self) -> Iterator[TensorInfo]:
        return iter(self.tensors.values())

    def numel(self, name: str) -> int:
        """Element count of one tensor."""
        return self.tensors[name].numel

    def element_counts(self) -> dict[str, int]:
        """Element count per tensor, in on-disk order."""
        return {name: math.prod(t.shape) for name, t in self.tensors.items()}

    @property
    def total_numel(self) -> int:
        """Elements over all tensors (stored elements: packed fp4 counts as its storage dtype)."""
        return sum(math.prod(t.shape) for t in self.tensors.values())

    def bytes_by_dtype(self) -> dict[str, int]:
        """Data bytes per dtype code, in order of first appearance."""
        out: dict[str, int] = {}
        for t in self.tensors.values():
            out[t.dtype] = out.get(t.dtype, 0) + dtype_nbytes(t.dtype, math.prod(t.shape))
        return out

    def numel_by_dtype(self) -> dict[str, int]:
        """Element count per dtype code, in order of first appearance."""
        out: dict[str, int] = {}
        for t in self.tensors.values():
            out[t.dtype] = out.get(t.dtype, 0) + math.prod(t.shape)
        return out

    def type_totals(self) -> list[TypeTotal]:
        """Tensors, logical elements and bytes per stored type (a GGUF's quant mix), in order of first appearance."""
        acc: dict[str, list[int]] = {}
        for t in self.tensors.values():
            n = math.prod(t.shape)
            row = acc.setdefault(t.dtype, [0, 0, 0])
            row[0] += 1
            row[1] += n
            row[2] += dtype_nbytes(t.dtype, n)
        return [TypeTotal(d, *row) for d, row in acc.items()]

    def tensors_in(self, shard: str) -> list[TensorInfo]:
        """Tensors of one shard, in header order."""
        return [t for t in self.tensors.values() if t.shard == shard]

    @property
    def total_file_bytes(self) -> int:
        """Sum of shard file sizes."""
        return sum(s.file_bytes for s in self.shards)

    def same_content(self, other: CheckpointInventory) -> bool:
        """Whether two inventories list the same shards and tensors (ignoring ``source`` and ``metadata``)."""
        return self.shards == other.shards and list(self.tensors.items()) == list(other.tensors.items())

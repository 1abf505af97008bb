"""Header-only checkpoint reading: what a checkpoint holds, without reading a byte of tensor data.

>>> inv = open_checkpoint("model.safetensors")              # doctest: +SKIP
>>> inv.tensors["embeddings.position_ids"].shape            # doctest: +SKIP
(1, 512)

Sources: a ``.safetensors`` file, a ``*.safetensors.index.json``, a folder of shards, a header-only manifest
(archviz-manifest/1 or header-audit, see ``FORMATS.md``), a GGUF file (or one of a split GGUF's files), a
``torch.save`` zip (read by a restricted unpickler that runs nothing), or ``hf://owner/name[@revision][/file.gguf]``
(HTTP range requests). Plain pickles are refused. Every bad input raises :class:`archviz.errors.CheckpointError`.
``config_from_gguf(inventory)`` gives the transformers config a GGUF's key-values describe.

``compare(record, inventory, rules=None)`` checks a model's records against those headers (``compare.py``; name
mapping rules as data in ``rules/*.json``, see ``rules.py``) and returns the record with the ``checkpoint`` extra.
"""

from __future__ import annotations

from .assemble import Progress
# The function `compare`: bound after its module is imported, it is what `archviz.checkpoint.compare` names (the
# module's own names: `from archviz.checkpoint.compare import EXTRA_KEY`).
from .compare import check, compare
from .gguf_config import config_from_gguf
from .header import MAX_HEADER_BYTES, parse_header, read_local_shard
from .manifest import ARCHVIZ_MANIFEST_FORMAT, read_manifest, write_manifest
from .records import DTYPE_BITS, CheckpointInventory, ShardInfo, TensorInfo, TypeTotal, dtype_nbytes
from .rules import Rules, load_rules
from .sources import open_checkpoint

__all__ = [
    "ARCHVIZ_MANIFEST_FORMAT",
    "DTYPE_BITS",
    "MAX_HEADER_BYTES",
    "CheckpointInventory",
    "Progress",
    "Rules",
    "ShardInfo",
    "TensorInfo",
    "TypeTotal",
    "check",
    "config_from_gguf",
    "compare",
    "dtype_nbytes",
    "load_rules",
    "open_checkpoint",
    "parse_header",
    "read_local_shard",
    "read_manifest",
    "write_manifest",
]

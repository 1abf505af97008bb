"""A transformers config from a GGUF file's key-values, with no tensor read: what ``summary file.gguf`` builds.

The keys are renamed by transformers' own GGUF table (``transformers.integrations.ggml.GGUF_CONFIG_MAPPING``: per
architecture, ``{arch}.block_count`` → ``num_hidden_layers`` and so on), as its ``load_gguf_checkpoint`` renames them,
but from the key-values archviz read itself (that function opens the file with ``GGUFReader`` and reads every
tensor). What the key-values leave out comes from the tensor table: the vocabulary size (the token embedding's rows),
whether the output is tied (no ``output.weight``), and whether a llama-architecture file holds experts (llama.cpp
writes Mixtral as ``llama`` with ``llama.expert_count``).
"""

from __future__ import annotations

from typing import Any

from archviz.errors import CheckpointError

from .records import CheckpointInventory
from ..errors import option

__all__ = ["config_from_gguf"]

#: llama.cpp architecture names whose transformers model_type is spelt otherwise (load_gguf_checkpoint's renames).
_MODEL_TYPES = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss", "minimax-m2": "minimax_m2",
                "gemma3": "gemma3_text"}
_HINT = f"pass the model's own config or Hugging Face id: archviz check MODEL {option('checkpoint')} FILE.gguf"


def _mapping() -> dict[str, dict[str, str | None]]:
    try:
        from transformers.integrations.ggml import GGUF_CONFIG_MAPPING
    except ImportError as e:
        raise CheckpointError(f"a config from a GGUF file needs transformers ({e})",
                              hint="pip install 'archviz[hf]'") from None
    return GGUF_CONFIG_MAPPING


def config_from_gguf(inventory: CheckpointInventory) -> dict[str, Any]:
    """The transformers config (a ``config.json``'s dict) a GGUF inventory's key-values describe.

    Raises :class:`CheckpointError` for an inventory that is not a GGUF's, or an architecture transformers has no
    GGUF table for."""
    kv = inventory.metadata.get("gguf")
    if inventory.metadata.get("format") != "gguf" or not isinstance(kv, dict):
        raise CheckpointError(f"{inventory.source}: not a GGUF file; a config is read from a GGUF's key-values",
                              hint=_HINT)
    arch = kv.get("general.architecture")
    table = _mapping()
    model_type = _MODEL_TYPES.get(arch, arch) if isinstance(arch, str) else None
    if model_type not in table:
        raise CheckpointError(f"{inventory.source}: transformers has no GGUF config table for the architecture "
                              f"{arch!r}", hint=_HINT)
    config: dict[str, Any] = {}
    for key, name in table[model_type].items():
        value = kv.get(f"{arch}.{key}")
        if name is not None and value is not None and not isinstance(value, dict):
            config[name] = value
    experts = kv.get(f"{arch}.expert_count")
    if arch == "llama" and type(experts) is int and experts > 0:  # Mixtral, as llama.cpp writes it
        model_type = "mixtral"
        config["num_local_experts"] = experts
        used = kv.get(f"{arch}.expert_used_count")
        if type(used) is int:
            config["num_experts_per_tok"] = used
    config["model_type"] = model_type
    embed = inventory.tensors.get("token_embd.weight")
    if "vocab_size" not in config and embed is not None and embed.shape:
        config["vocab_size"] = embed.shape[0]
    config["tie_word_embeddings"] = "output.weight" not in inventory.tensors
    return config

"""The small gallery the gallery tests build (conftest.py) and derive their expectations from."""

from __future__ import annotations

TYPES = ["llama", "mistral", "gemma2", "deepseek_v3", "deepseek_v2", "gemma4_assistant"]
LONG = 1 << 20
# Fields beside transformers' defaults: few layers (the figures per layer are what the tests derive), llama made GQA,
# and a context that reaches 32K and 1M where the test wants both (mistral keeps its 131,072: no KV at 1M).
SETS = {"llama": {"num_hidden_layers": 2, "num_key_value_heads": 8, "max_position_embeddings": LONG},
        "mistral": {"num_hidden_layers": 2},
        "gemma2": {"num_hidden_layers": 4, "max_position_embeddings": LONG},
        "deepseek_v3": {"num_hidden_layers": 3, "first_k_dense_replace": 1, "n_routed_experts": 16,
                        "max_position_embeddings": LONG},
        "deepseek_v2": {"num_hidden_layers": 2}}

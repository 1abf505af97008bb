"""The longest sequence a model takes, and where that was read: its config's position limit (block_size,
max_position_embeddings, max_seq_len, ...), an attribute of the model or its config object, the rows of the position
table beside its token table, else the smallest limit a submodule holds (a rotary table built for
`max_context_length` positions). `cost` caps its prefill and decode at it."""

from __future__ import annotations

from typing import Any

from .curve import max_positions


def model_limit(config: Any, model: Any) -> tuple[int, str] | None:
    """The longest sequence the model takes, and where that was read: its config (block_size,
    max_position_embeddings, max_seq_len, ...), else an attribute of the top module or of its config object, else
    the rows of the position table its token table's module holds."""
    from .curve import _MAX_KEYS

    found = max_positions(config)
    if found is not None:
        key = next((k for k in _MAX_KEYS if config.get(k) == found), None)
        return found, f"its config's {key}" if key else "its config"
    for owner, name in ((model, "the model"), *((getattr(model, a, None), f"model.{a}")
                                              for a in ("config", "params", "args"))):
        for key in _MAX_KEYS if owner is not None else ():
            v = getattr(owner, key, None)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v, f"{name}.{key}"
    from ..shapes.structured import position_limit

    # a position table beside the token table (whisper's decoder: n_text_ctx rows), else a limit a submodule holds
    return position_limit(model) or _submodule_limit(model)


# Keys that name a position limit wherever they are held (never `block_size`: a quantized Linear's block of 128).
_POSITION_KEYS = ("max_position_embeddings", "max_seq_len", "max_sequence_length", "max_sequence_len",
                  "max_context_length", "n_positions")


def _submodule_limit(model: Any) -> tuple[int, str] | None:
    """The smallest position limit a submodule or its config object holds (a rotary embedding built for
    `max_context_length` positions, its tables no longer), and where."""
    found: list[tuple[int, str]] = []
    for path, m in model.named_modules():
        if not path:
            continue
        for owner, name in ((m, path), (getattr(m, "config", None), f"{path}.config")):
            for key in _POSITION_KEYS if owner is not None and not isinstance(owner, dict) else ():
                v = getattr(owner, key, None)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    found.append((v, f"{name}.{key}"))
    return min(found) if found else None

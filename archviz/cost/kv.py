"""KV cache: what the model's code keeps per sequence, per token and at a context length, per layer.

Reference models (DeepSeek's style) register their caches as buffers sized by the runtime limits `max_batch_size`
and `max_seq_len`: the cost build sets both to values no width of the config equals, so a buffer whose first dim is
the batch limit is per-sequence state, and a dim equal to `max_seq_len // r` is a cache that keeps one slot every r
tokens (r = 1: every token; a compressed cache: r = its compression ratio); a buffer whose other dims are fixed
(a sliding window, a compressor's pending group) keeps that much whatever the context.

transformers models keep what their cache layers (`DynamicCache(config=...)`, one layer object per decoder layer)
hold after a prefill on meta: every tensor a layer holds, with the dim equal to the prefill's length growing one
slot a token (full attention) and the rest fixed (a sliding-window layer's window).

An entry is JSON-able: bytes at (B, L) = B × width × slots(L) × element bytes, slots(L) = L // ratio, or `slots`
for a fixed one. `--kv-dtype` replaces the element size with the asked dtype's.
"""

from __future__ import annotations

from typing import Any

_ELEMENT_BYTES = {"float64": 8, "float32": 4, "complex64": 8, "complex128": 16, "bfloat16": 2, "float16": 2,
                  "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
                  "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e8m0fnu": 1, "float8_e4m3fnuz": 1,
                  "float8_e5m2fnuz": 1, "float4_e2m1fn_x2": 1}
KV_DTYPES = {"fp8": "float8_e4m3fn", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "int8": "int8",
             "fp4": "float4_e2m1fn_x2"}


MAX_RATIO = 1024  # the largest compression ratio a cache dim is read as (DeepSeek-V4: 4 and 128)


def element_bytes(dtype: str) -> float:
    """Bytes a value of `dtype` takes (fp4 packs two per byte: 0.5)."""
    if dtype == "float4_e2m1fn_x2":
        return 0.5
    return float(_ELEMENT_BYTES.get(dtype, 0) or 0)


def kv_dtype_name(text: str) -> str | None:
    """--kv-dtype: a short name (fp8, bf16, fp16, fp32, int8, fp4) or a torch dtype name; None if neither."""
    t = text.strip().lower().replace("torch.", "")
    t = KV_DTYPES.get(t, t)
    return t if t in _ELEMENT_BYTES else None


def _layer_of(path: str, layer_list: str | None) -> int | None:
    if not layer_list:
        return None
    prefix = layer_list + "."
    if not path.startswith(prefix):
        return None
    head = path[len(prefix):].split(".", 1)[0]
    return int(head) if head.isdigit() else None


def reference_entries(record: Any, max_batch: int, max_seq: int, layer_list: str | None) -> list[dict[str, Any]]:
    """Per-sequence buffers of a reference model built with max_batch_size=max_batch, max_seq_len=max_seq."""
    out = []
    for m in record.modules:
        for t in m.tensors:
            if t.kind != "buffer" or len(t.shape) < 2 or t.shape[0] != max_batch:
                continue
            rest = [int(d) for d in t.shape[1:]]
            ratio = None
            for r in range(1, MAX_RATIO + 1):
                if rest[0] == max_seq // r and rest[0]:
                    ratio = r
                    break
            # elements per slot: the dims after the slot dim; a fixed buffer: all its dims after the batch
            width = 1
            for d in rest[1:]:
                width *= d
            per_element = t.bytes / max(1, t.storage_elements)
            out.append({"path": m.path, "name": t.name, "layer": _layer_of(m.path, layer_list), "dtype": t.dtype,
                        "element_bytes": per_element, "width": width,
                        "ratio": ratio, "slots": None if ratio else rest[0],
                        "what": ("cache: a slot every token" if ratio == 1 else
                                 f"cache: a slot every {ratio} tokens" if ratio else
                                 "fixed per sequence (a window or pending state)")})
    return out


def cache_entries(cache: Any, prefill: int, layer_path: Any) -> list[dict[str, Any]]:
    """The tensors each layer of a transformers cache holds after a prefill of `prefill` tokens (on meta)."""
    import torch

    out = []
    for i, layer in enumerate(getattr(cache, "layers", ())):
        for name, v in sorted(vars(layer).items()):
            if not isinstance(v, torch.Tensor) or v.dim() < 2 or name.startswith("_"):
                continue
            shape = [int(d) for d in v.shape]
            if shape[0] < 1:
                continue
            dims = shape[1:]
            grow = [j for j, d in enumerate(dims) if d == prefill]
            width = 1
            for j, d in enumerate(dims):
                if not grow or j != grow[-1]:
                    width *= d
            dtype = str(v.dtype).replace("torch.", "")
            out.append({"path": layer_path(i), "name": f"{type(layer).__name__}.{name}", "layer": i, "dtype": dtype,
                        "element_bytes": element_bytes(dtype), "width": width,
                        "ratio": 1 if grow else None, "slots": None if grow else 1,
                        "what": "cache: a slot every token" if grow else
                                f"fixed per sequence ({'a window of ' + str(getattr(layer, 'sliding_window', '')) if getattr(layer, 'sliding_window', None) else 'state'})"})
    return out


def entry_bytes(e: dict[str, Any], batch: int, context: int, element: float | None = None) -> float:
    """Bytes the entry holds for `batch` sequences at `context` tokens (element size overridden by `element`)."""
    size = e["element_bytes"] if element is None else element
    slots = context // e["ratio"] if e["ratio"] else e["slots"]
    return batch * e["width"] * slots * size


def per_token_bytes(e: dict[str, Any], element: float | None = None) -> float:
    """Bytes one more token adds, per sequence (0 for a fixed entry)."""
    size = e["element_bytes"] if element is None else element
    return e["width"] * size / e["ratio"] if e["ratio"] else 0.0

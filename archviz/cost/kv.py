"""KV cache: what the model's code keeps per sequence, per token and at a context length, per layer.

Reference models (DeepSeek's style) register their caches as buffers sized by the runtime limits `max_batch_size`
and `max_seq_len`: the cost build sets both to values no width of the config equals, so a buffer whose first dim is
the batch limit is per-sequence state, and a dim equal to `max_seq_len // r` is a cache that keeps one slot every r
tokens (r = 1: every token; a compressed cache: r = its compression ratio); a buffer whose other dims are fixed
(a sliding window, a compressor's pending group) keeps that much whatever the context.

transformers models keep what their cache layers (`DynamicCache(config=...)`, one layer object per decoder layer)
hold after prefills on meta of two lengths: every tensor a layer holds (into its dicts: DeepSeek-V4's compressed
caches), a dim that grew by d over the t1 − t0 tokens keeping a slot every (t1 − t0) / d tokens (full attention: 1;
a compressed cache: its rate), the rest fixed (a sliding window, a group still being compressed).

A reference model's plain tensor attributes sized by those limits (Llama 3's `self.cache_k = torch.zeros(...)`) are
caches as its buffers are. A slot dim of `fixed + max_seq_len // r` (DeepSeek-V4's `window_size + max_seq_len //
compress_ratio`, both values of its config) keeps a window of `fixed` slots and one more every r tokens.

An entry is JSON-able: bytes at (B, L) = B × width × slots(L) × element bytes, slots(L) = fixed + L // ratio, or
`slots` for a fixed one. `kv_dtype` replaces the element size with the asked dtype's.
"""

from __future__ import annotations

import math
import re
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
    """The KV cache dtype asked (kv_dtype): a short name (fp8, bf16, fp16, fp32, int8, fp4) or a torch dtype name;
    None if neither."""
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


def reference_entries(record: Any, max_batch: int, max_seq: int, layer_list: str | None,
                      config_ints: set[int] | frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Per-sequence buffers of a reference model built with max_batch_size=max_batch, max_seq_len=max_seq.
    `config_ints`: the config's int values, the evidence for a cache of `fixed + max_seq_len // r` slots."""
    out = []
    for m in record.modules:
        for t in m.tensors:
            if t.kind != "buffer" or len(t.shape) < 2 or t.shape[0] != max_batch:
                continue
            out.append(_sequence_entry(m.path, t.name, t.shape, t.dtype, t.bytes / max(1, t.storage_elements),
                                       max_seq, layer_list, config_ints))
    return out


def attribute_entries(model: Any, paths: dict[int, str], max_batch: int, max_seq: int, layer_list: str | None,
                      config_ints: set[int] | frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Per-sequence tensors a reference model's modules keep as plain attributes, neither parameters nor buffers
    (Llama 3's `self.cache_k = torch.zeros(max_batch_size, max_seq_len, ...)`); `paths`: id(module) -> path."""
    import torch

    out = []
    for i, path in paths.items():
        mod = model.get_submodule(path) if path else model
        if id(mod) != i:
            continue
        for name, v in vars(mod).items():
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter) and v.dim() >= 2 and \
                    v.shape[0] == max_batch:
                dtype = str(v.dtype).replace("torch.", "")
                out.append(_sequence_entry(path, name, tuple(v.shape), dtype, element_bytes(dtype), max_seq,
                                           layer_list, config_ints))
    return out


def _slot_dim(n: int, max_seq: int, config_ints: set[int] | frozenset[int]) -> tuple[int | None, int]:
    """(r, fixed) where a dim of n slots is `fixed + max_seq // r` (r None: fixed at n). A fixed part needs the
    config's evidence: it and r are values of the config (DeepSeek-V4: window_size + max_seq_len // ratio)."""
    for r in range(1, MAX_RATIO + 1):
        if n == max_seq // r and n:
            return r, 0
    for r in range(1, MAX_RATIO + 1):
        fixed = n - max_seq // r
        if 0 < fixed < max_seq // r and fixed in config_ints and (r == 1 or r in config_ints):
            return r, fixed
    return None, n


def _sequence_entry(path: str, name: str, shape: Any, dtype: str, per_element: float, max_seq: int,
                    layer_list: str | None, config_ints: set[int] | frozenset[int]) -> dict[str, Any]:
    rest = [int(d) for d in shape[1:]]
    # the slot dim: the first after the batch that max_seq sizes ([B, S, H, d] or [B, H, S, d]), else the first
    at = next((j for j, n in enumerate(rest) if _slot_dim(n, max_seq, config_ints)[0] is not None), 0)
    ratio, fixed = _slot_dim(rest[at], max_seq, config_ints)
    # elements per slot: the other dims after the batch; a fixed buffer: all its dims after the batch
    width = math.prod(rest[:at] + rest[at + 1:])
    what = ("cache: a slot every token" if ratio == 1 else f"cache: a slot every {ratio} tokens" if ratio else
            "fixed per sequence (a window or pending state)")
    return {"path": path, "name": name, "layer": _layer_of(path, layer_list), "dtype": dtype,
            "element_bytes": per_element, "width": width, "ratio": ratio, "slots": None if ratio else fixed,
            **({"fixed": fixed} if ratio and fixed else {}),
            "what": f"{what}, plus {fixed} fixed (a window)" if ratio and fixed else what}


def _leaves(layer: Any) -> Any:
    """(name, container, key, value) of every value a cache layer holds, into its dicts and lists
    (DeepSeek-V4's layers keep {"compressor": tensor, "indexer": tensor} dicts and counts)."""
    def walk(container: Any, key: Any, v: Any, name: str) -> Any:
        if isinstance(v, dict):
            for k, x in v.items():
                yield from walk(v, k, x, f"{name}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                yield from walk(v, i, x, f"{name}.{i}")
        else:
            yield name, container, key, v

    for name, v in list(vars(layer).items()):
        if not name.startswith("_"):
            yield from walk(vars(layer), name, v, name)


def _grown(a: Any, b: Any) -> tuple[int, int] | None:
    """(dim, growth) where tensor b (a later prefill) is longer than a in one dim; None if none grew."""
    if tuple(a.shape) == tuple(b.shape) or a.dim() != b.dim():
        return None
    diff = [(j, int(y) - int(x)) for j, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
    return diff[-1] if len(diff) == 1 and diff[0][1] > 0 else None


def cache_entries(short: Any, long: Any, t0: int, t1: int, layer_path: Any) -> list[dict[str, Any]]:
    """What each layer of a transformers cache holds, from two prefills on meta of t0 < t1 tokens (t1 − t0 a
    multiple of every compression rate): a tensor whose dim grew by d over the t1 − t0 tokens keeps a slot every
    (t1 − t0) / d tokens; one that did not grow is fixed (a sliding window, a group still being compressed)."""
    import torch

    out = []
    for i, (a_layer, b_layer) in enumerate(zip(getattr(short, "layers", ()), getattr(long, "layers", ()))):
        later = {name: v for name, _, _, v in _leaves(b_layer)}
        for name, _, _, v in _leaves(a_layer):
            if not isinstance(v, torch.Tensor) or v.dim() < 2 or not isinstance(later.get(name), torch.Tensor):
                continue
            shape = [int(d) for d in v.shape]
            grown = _grown(v, later[name])
            ratio = None
            width = math.prod(shape[1:])
            if grown is not None:
                j, d = grown
                ratio = (t1 - t0) // d if (t1 - t0) % d == 0 else (t1 - t0) / d
                width = math.prod(x for k, x in enumerate(shape[1:], 1) if k != j)
            dtype = str(v.dtype).replace("torch.", "")
            window = getattr(a_layer, "sliding_window", None)
            out.append({"path": layer_path(i), "name": f"{type(a_layer).__name__}.{name}", "layer": i,
                        "dtype": dtype, "element_bytes": element_bytes(dtype), "width": width,
                        "ratio": ratio, "slots": None if ratio else 1,
                        "what": ("cache: a slot every token" if ratio == 1 else
                                 f"cache: a slot every {ratio:g} tokens" if ratio else
                                 f"fixed per sequence (window {window})" if window and name in ("keys", "values")
                                 else "fixed per sequence (state)")})
    return out


def stretch(short: Any, long: Any, t0: int, t1: int, context: int) -> None:
    """Set `short` (filled by a t0-token prefill) to what it would hold after `context` tokens: every tensor dim and
    count that grew between the two prefills grows on at its rate, on meta."""
    import torch

    for a_layer, b_layer in zip(short.layers, long.layers):
        later = {name: v for name, _, _, v in _leaves(b_layer)}
        for name, container, key, v in _leaves(a_layer):
            w = later.get(name)
            if isinstance(v, torch.Tensor) and isinstance(w, torch.Tensor):
                grown = _grown(v, w)
                if grown is None:
                    continue
                j, d = grown
                shape = list(v.shape)
                shape[j] = int(shape[j]) + _more(t0, t1, d, context)
                container[key] = torch.empty(shape, dtype=v.dtype, device="meta")
            elif isinstance(v, int) and not isinstance(v, bool) and isinstance(w, int) and w > v:
                container[key] = v + _more(t0, t1, w - v, context)


def _more(t0: int, t1: int, d: int, context: int) -> int:
    """Slots a cache growing d every t1 − t0 tokens adds from t0 to `context` tokens."""
    r = (t1 - t0) / d
    if r == int(r):
        return context // int(r) - t0 // int(r)
    return round((context - t0) / r)


def entry_bytes(e: dict[str, Any], batch: int, context: int, element: float | None = None) -> float:
    """Bytes the entry holds for `batch` sequences at `context` tokens (element size overridden by `element`)."""
    size = e["element_bytes"] if element is None else element
    slots = e.get("fixed", 0) + context // e["ratio"] if e["ratio"] else e["slots"]
    return batch * e["width"] * slots * size


def per_token_bytes(e: dict[str, Any], element: float | None = None) -> float:
    """Bytes one more token adds, per sequence (0 for a fixed entry)."""
    size = e["element_bytes"] if element is None else element
    return e["width"] * size / e["ratio"] if e["ratio"] else 0.0


# A method that makes a model's caches after construction (`setup_caches`, `set_kv_cache`, `allocate_kv_cache`,
# `allocate_inference_cache`, `init_cache`, ...), called as the code's own generate would before it decodes.
_CACHE_SETUP = re.compile(r"^(setup|set_up|set|allocate|alloc|init|make|create|build|reset)_\w*caches?$")


def _setup_arguments(fn: Any, batch: int, seq: int, dtype: Any) -> dict[str, Any] | None:
    """Keyword arguments for a cache-setup method, by its parameters' names (the batch limit, the length limit, a
    dtype, a device; an optional length only where it names the sequence or a maximum); None where a required
    parameter is none of these."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    out: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        n = p.name.lower()
        if "batch" in n or n in ("bsz", "b", "bs"):
            out[p.name] = batch
        elif any(w in n for w in ("seq", "len", "ctx", "context", "positions", "tokens")) and (
                p.default is p.empty or "seq" in n or n.startswith("max_")):  # never an optional `rope_cache_length`
            out[p.name] = seq
        elif "dtype" in n and p.default is p.empty:  # the code's own default dtype where it has one
            out[p.name] = dtype
        elif "device" in n:
            out[p.name] = "meta"
        elif p.default is p.empty:
            return None
    return out if out else None


def set_up_caches(model: Any, batch: int, seq: int) -> list[str]:
    """Call the cache-setup methods of `model` (its own, else each module's whose class defines one) with the batch
    and length limits, on meta: the caches they make become the model's tensors as a generate loop leaves them.
    Returns what was called, for the notes."""
    import torch

    methods: dict[type, str | None] = {}  # per class: its cache-setup method's name (dir() once a class)

    def setup(mod: Any) -> tuple[str, Any] | None:
        cls = type(mod)
        if cls not in methods:
            methods[cls] = next((n for n in sorted(dir(cls))
                                 if _CACHE_SETUP.match(n) and callable(getattr(cls, n, None))), None)
        name = methods[cls]
        return (name, getattr(mod, name)) if name else None

    found = setup(model)
    targets = [(type(model).__name__, found)] if found else []
    if not targets:
        for mod in model.modules():
            hit = setup(mod) if mod is not model else None
            if hit is not None:
                targets.append((type(mod).__name__, hit))
    called: list[str] = []
    for owner, (name, fn) in targets:
        kwargs = _setup_arguments(fn, batch, seq, torch.get_default_dtype())
        if kwargs is None:
            continue
        try:
            with torch.device("meta"), torch.no_grad():
                fn(**kwargs)
        except Exception:  # noqa: BLE001 - the model's code; its caches stay as built
            continue
        called.append(f"{owner}.{name}({', '.join(f'{k}={v}' for k, v in kwargs.items())})")
    return list(dict.fromkeys(called))


# A forward's argument that takes the positions a step writes as a tensor (gpt-fast's and litgpt's `input_pos`).
_POSITION_TENSORS = ("input_pos", "input_positions")


def step_arguments(model: Any, batch: int) -> tuple[Any, str | None] | None:
    """How a reference model's decode step at context L is called: (L -> its keyword arguments, what they are, None
    for `start_pos = L`), or None where its forward takes neither `start_pos` nor a positions tensor. A positions
    tensor (`input_pos=[L]`) comes with the caches made again by the model's cache-setup method for L + 1 positions,
    as a generate loop sized for that context makes them: code that attends over the whole cache under a mask then
    attends over L + 1."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    if "start_pos" in params:
        return (lambda L: {"start_pos": L}), None
    name = next((n for n in _POSITION_TENSORS if n in params), None)
    if name is None or not set_up_caches(model, batch, 2):  # no cache-setup method: no cache to write
        return None

    def arguments(L: int) -> dict[str, Any]:
        import torch

        set_up_caches(model, batch, L + 1)
        return {name: torch.arange(L, L + 1, device="meta")}

    return arguments, f"{name} = [L], its caches made for L + 1 positions by the model's cache-setup method"

"""Walk a built model into records, counting every tensor by the accounting rules.

Accounting rules (see README "Counting"):
- parameters are logical learned weights (kind weight or bias). A packed sub-byte dtype counts the values it holds:
  `float4_e2m1fn_x2` holds 2 per element; an int8/uint8 weight whose module declares `in_features`/`out_features`
  twice its stored size holds fp4 pairs, 2 per byte.
- quantization scales pair with a quantized (fp8 / fp4) weight of the same module: any `float8_e8m0fnu` tensor, or a
  float tensor attached to the weight (`weight.scale`) or named after it (`scale`, `weight_scale_inv`, ...) whose
  shape divides the weight's into blocks. A name alone decides nothing: a `scale` beside an unquantized weight is a
  learned weight.
- integer tensors held as parameters (hash-routing tables) are kind `table`; buffers are kind `buffer`; neither is a
  parameter.
- a tensor reachable under several names counts once, where first seen in module order; later names are `alias`.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import sys
from collections.abc import Iterator
from typing import Any, Callable

from ..gcpause import collector_paused
from ..records import (
    ALIAS, BIAS, BUFFER, SCALE, TABLE, WEIGHT, ModelRecord, ModuleRecord, MoELayer, SourceInfo, SourceSpan, Summary,
    TensorRecord, Totals,
)
from ..sources import Built

Progress = Callable[[int, int], None]

_FP8 = {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}
_E8M0 = {"float8_e8m0fnu"}
_PACKED_X2 = {"float4_e2m1fn_x2"}
_INT = {"int8", "uint8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "bool"}
_SCALE_NAMES = ("scale", "weight_scale_inv", "weight_scale", "scale_inv", "scales", "weight_scales")

# ---------------------------------------------------------------------------------------------------------------------
# Source spans, found with ast once per file


@functools.lru_cache(maxsize=None)
def _file_index(path: str) -> tuple[dict[str, tuple[int, int]], dict[int, int]]:
    """(class qualname -> (first line, last line)), (first line of a def or its decorators -> last line)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}, {}
    classes: dict[str, tuple[int, int]] = {}
    defs: dict[int, int] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        # Classes and defs are statements: only statement lists are walked, never expressions (a tenth of the nodes).
        for child in body:
            if isinstance(child, ast.ClassDef):
                q = f"{prefix}{child.name}"
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                classes.setdefault(q, (start, child.end_lineno or child.lineno))
                visit(child.body, q + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                end = child.end_lineno or child.lineno
                defs[child.lineno] = end
                for d in child.decorator_list:
                    defs[d.lineno] = end
                visit(child.body, f"{prefix}{child.name}.<locals>.")
            else:
                for field in _STATEMENT_LISTS:
                    inner = getattr(child, field, None)
                    if inner:
                        visit(inner, prefix)
                for handler in getattr(child, "handlers", None) or ():  # try/except
                    visit(handler.body, prefix)
                for case in getattr(child, "cases", None) or ():  # match
                    visit(case.body, prefix)

    visit(tree.body, "")
    return classes, defs


_STATEMENT_LISTS = ("body", "orelse", "finalbody")


class _Spans:
    def __init__(self, display_roots: tuple[tuple[str, str], ...]):
        roots = [(os.path.abspath(r), p) for r, p in display_roots]
        for entry in sys.path:
            if entry and os.path.isdir(entry):
                roots.append((os.path.abspath(entry), ""))
        self.roots = sorted(roots, key=lambda rp: -len(rp[0]))
        self.files: dict[str, str] = {}  # display -> absolute
        self._cache: dict[type, tuple] = {}

    def display(self, path: str) -> str:
        path = os.path.abspath(path)
        for root, prefix in self.roots:
            if path.startswith(root + os.sep):
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                shown = f"{prefix}{rel}"
                break
        else:
            shown = os.path.basename(path)
        self.files.setdefault(shown, path)
        return shown

    def for_class(self, cls: type) -> tuple:
        hit = self._cache.get(cls)
        if hit is None:
            hit = self._cache[cls] = self._compute(cls)
        return hit

    def _method_span(self, cls: type, name: str) -> SourceSpan | None:
        for klass in cls.__mro__:
            if klass.__module__.startswith("torch.nn.modules.module") or klass is object:
                return None
            fn = klass.__dict__.get(name)
            if fn is None:
                continue
            fn = inspect.unwrap(getattr(fn, "__func__", fn))
            code = getattr(fn, "__code__", None)
            if code is None:
                return None
            _, defs = _file_index(code.co_filename)
            end = defs.get(code.co_firstlineno)
            if end is None:
                return None
            return SourceSpan(self.display(code.co_filename), code.co_firstlineno, end)
        return None

    def _class_file(self, cls: type) -> str | None:
        for v in cls.__dict__.values():
            fn = inspect.unwrap(getattr(v, "__func__", v)) if callable(v) or hasattr(v, "__func__") else None
            code = getattr(fn, "__code__", None)
            if code is not None:
                return code.co_filename
        try:
            return inspect.getsourcefile(cls)
        except (TypeError, OSError):
            return None

    def _compute(self, cls: type) -> tuple:
        file = self._class_file(cls)
        class_span = None
        if file:
            classes, _ = _file_index(file)
            se = classes.get(cls.__qualname__)
            if se:
                class_span = SourceSpan(self.display(file), se[0], se[1])
        doc = cls.__dict__.get("__doc__")
        if isinstance(doc, str) and doc.strip():
            doc = inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ").strip()
        else:
            doc = None
        return class_span, self._method_span(cls, "__init__"), self._method_span(cls, "forward"), doc


# ---------------------------------------------------------------------------------------------------------------------
# Widths named by the code that built a module: `self.wo_b = RowParallelLinear(self.n_groups * args.o_lora_rank,
# self.dim)` names in_features "n_groups × o_lora_rank" and out_features "dim".

_PREFIXES = re.compile(r"\b(?:self\.config|self\.args|self|args|config|params)\.")


@functools.lru_cache(maxsize=4096)
def _humanize(expr: str) -> str | None:
    text = " ".join(expr.split())
    if re.fullmatch(r"[\d_]+", text):
        return None
    text = _PREFIXES.sub("", text)
    text = text.replace(" * ", " × ").replace(" // ", " ÷ ").replace("**", "^")
    return text if len(text) <= 60 else None


@functools.lru_cache(maxsize=None)
def _ctor_widths(file: str, start: int, end: int) -> dict[str, tuple[str | None, str | None]]:
    """attribute -> (first argument, second argument) of every `self.<attr> = Call(a, b, ...)` in lines [start, end]
    of `file` (a class's __init__), as source text."""
    try:
        with open(file, encoding="utf-8") as f:
            lines = f.read().splitlines()[start - 1:end]
    except (OSError, UnicodeDecodeError):
        return {}
    import textwrap

    src = textwrap.dedent("\n".join(lines))
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return {}
    encoded = [line.encode("utf-8") for line in src.splitlines()]

    def segment(node: ast.expr) -> str | None:  # ast.get_source_segment, without re-splitting the source each call
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return encoded[first][node.col_offset:node.end_col_offset].decode("utf-8")
        parts = [encoded[first][node.col_offset:], *encoded[first + 1:last], encoded[last][:node.end_col_offset]]
        return b"\n".join(parts).decode("utf-8")

    def widths(call: ast.Call) -> tuple[str | None, str | None]:
        args = [segment(a) for a in call.args[:2]]
        kw = {k.arg: segment(k.value) for k in call.keywords if k.arg}
        return (kw.get("in_features", args[0] if args else None),
                kw.get("out_features", args[1] if len(args) > 1 else None))

    found: dict[str, tuple[int, tuple[str | None, str | None]]] = {}

    for depth, node in _statements(tree.body):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t = node.targets[0]
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
            continue
        value = node.value
        if isinstance(value, ast.IfExp):  # `self.q_b_proj = (nn.Linear(a, b) if self.q_lora_rank else None)`
            options = {widths(v) for v in (value.body, value.orelse) if isinstance(v, ast.Call)}
            if len(options) != 1:  # two different constructors: which one ran is not in the text
                continue
            first, second = options.pop()
        elif isinstance(value, ast.Call):
            first, second = widths(value)
        else:
            continue
        # The least nested assignment wins, then the first: `self.x = A(...)` beside an `if ...: self.x = B(...)`
        # names A's widths.
        if t.attr not in found or depth < found[t.attr][0]:
            found[t.attr] = (depth, (first, second))
    return {attr: w for attr, (_, w) in found.items()}


_IDENT = re.compile(r"[A-Za-z_]\w*")


def _in_config_terms(dims: tuple, parent_attrs: tuple, config: dict[str, int]) -> tuple:
    """Width names in the config's terms where the code's own differ: the DeepSeek-V4 indexer builds kv_proj as
    `Linear(hidden_size, 2 * self.head_dim)` with `self.head_dim = index_head_dim`, so "2 × head_dim" would read as
    the config's head_dim (512); it becomes "2 × index_head_dim" (the one field of that value whose name holds
    "head_dim", else the one field of that value). A name the config does not have stays. One that cannot be put in
    the config's terms becomes "" -- no name, and none guessed from the config either -- rather than a wrong one."""
    attrs = dict(parent_attrs)
    out = []
    for value, label in dims:
        for ident in dict.fromkeys(_IDENT.findall(label)):
            own = attrs.get(ident)
            if ident not in config or type(own) is not int or own == config[ident]:
                continue
            keys = [k for k, v in config.items() if v == own]
            named = [k for k in keys if ident in k]
            pick = named if len(named) == 1 else keys
            if len(pick) != 1:
                label = ""
                break
            label = re.sub(rf"\b{ident}\b", pick[0], label)
        out.append((value, label))
    return tuple(out)


def _statements(body: list[ast.stmt], depth: int = 0) -> Iterator[tuple[int, ast.stmt]]:
    """(nesting depth in the syntax tree, statement) for every statement in `body` and the statement lists nested in
    it, in source order."""
    for node in body:
        yield depth, node
        for field in _STATEMENT_LISTS:
            inner = getattr(node, field, None)
            if inner:
                yield from _statements(inner, depth + 1)
        for handler in getattr(node, "handlers", None) or ():  # try: except ...: its body is two levels down
            yield from _statements(handler.body, depth + 2)
        for case in getattr(node, "cases", None) or ():
            yield from _statements(case.body, depth + 2)


def _named_dims(mod: Any, name: str, parent_init: SourceSpan | None, files: dict[str, str]) -> tuple:
    inf, outf = _attr(mod, "in_features"), _attr(mod, "out_features")
    if not (isinstance(inf, int) and isinstance(outf, int)) or parent_init is None or not name:
        return ()
    return _named_dims_of(name, inf, outf, parent_init, files.get(parent_init.file))


@functools.lru_cache(maxsize=65536)
def _named_dims_of(name: str, inf: int, outf: int, parent_init: SourceSpan, absolute: str | None) -> tuple:
    if not absolute:
        return ()
    exprs = _ctor_widths(absolute, parent_init.start, parent_init.end).get(name)
    if not exprs:
        return ()
    out = []
    for value, expr in ((inf, exprs[0]), (outf, exprs[1])):
        label = _humanize(expr) if expr else None
        if label and all(v != value for v, _ in out):
            out.append((value, label))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------------------
# Tensor classification


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size()


def _is_packed_int_fp4(module: Any, t: Any) -> bool:
    """An int8/uint8 weight holding fp4 pairs: the module declares a logical size twice the stored one."""
    inf, outf = getattr(module, "in_features", None), getattr(module, "out_features", None)
    if isinstance(inf, int) and isinstance(outf, int) and t.dim() == 2:
        if t.shape[0] == outf and t.shape[1] * 2 == inf:
            return True
    return bool(getattr(t, "fp4", False) or getattr(t, "packed_fp4", False))


def _block_compatible(scale_shape: tuple, weight_shape: tuple) -> bool:
    if len(scale_shape) != len(weight_shape) or not scale_shape:
        return False
    return all(0 < s <= w for s, w in zip(scale_shape, weight_shape))


def classify_module(module: Any, path: str, seen: dict[int, str]) -> tuple[TensorRecord, ...]:
    """Records for one module's own parameters and buffers. `seen` maps id(tensor) -> first full name."""
    params = [(n, p) for n, p in module._parameters.items() if p is not None]
    buffers = [(n, b) for n, b in module._buffers.items() if b is not None]
    if not params and not buffers:
        return ()
    non_persistent = module._non_persistent_buffers_set

    # Quantized weights of this module: local name -> (logical shape, packed?)
    quantized: dict[str, tuple[tuple[int, ...], str | None]] = {}
    dtypes = {}
    for n, p in params:
        dn = dtypes[n] = _dtype_name(p.dtype)
        if dn in _FP8:
            quantized[n] = (tuple(p.shape), None)
        elif dn in _PACKED_X2:
            shape = tuple(p.shape)
            quantized[n] = (shape[:-1] + (shape[-1] * 2,), "fp4 ×2 per float4_e2m1fn_x2")
        elif dn in ("int8", "uint8") and _is_packed_int_fp4(module, p):
            shape = tuple(p.shape)
            quantized[n] = (shape[:-1] + (shape[-1] * 2,), f"fp4 ×2 per {dn}")
    scale_of: dict[int, str] = {}
    for wn in quantized:
        w = module._parameters[wn]
        attached = getattr(w, "scale", None)
        if attached is not None:
            scale_of[id(attached)] = wn

    out = []
    prefix = f"{path}." if path else ""
    for n, t in params:
        dn = dtypes[n]
        key = id(t)
        full = prefix + n
        numel = t.numel()
        nbytes = numel * t.element_size()
        first = seen.get(key)
        if first is not None:
            out.append(TensorRecord(n, ALIAS, tuple(t.shape), dn, 0, numel, 0, alias_of=first))
            continue
        seen[key] = full
        if n in quantized:
            logical, packing = quantized[n]
            elements = numel * 2 if packing else numel
            out.append(TensorRecord(n, WEIGHT, tuple(t.shape), dn, elements, numel, nbytes, packing=packing,
                                    logical_shape=logical if packing else None))
            continue
        scaled = scale_of.get(key)
        if scaled is None and quantized:
            if dn in _E8M0:
                scaled = _pair_by_shape(tuple(t.shape), quantized) or next(iter(quantized))
            elif n in _SCALE_NAMES or any(n == f"{w}_{s}" or n == f"{w}.{s}" for w in quantized for s in _SCALE_NAMES):
                scaled = _pair_by_shape(tuple(t.shape), quantized)
        if scaled is not None:
            out.append(TensorRecord(n, SCALE, tuple(t.shape), dn, numel, numel, nbytes, scales=scaled))
        elif dn in _E8M0:
            out.append(TensorRecord(n, SCALE, tuple(t.shape), dn, numel, numel, nbytes,
                                    note="e8m0 exponent scale with no quantized weight beside it"))
        elif dn in _INT:
            out.append(TensorRecord(n, TABLE, tuple(t.shape), dn, numel, numel, nbytes))
        elif n == "bias" or n.endswith("_bias"):
            out.append(TensorRecord(n, BIAS, tuple(t.shape), dn, numel, numel, nbytes))
        else:
            out.append(TensorRecord(n, WEIGHT, tuple(t.shape), dn, numel, numel, nbytes))
    for n, t in buffers:
        key = id(t)
        dn = _dtype_name(t.dtype)
        numel = t.numel()
        persistent = n not in non_persistent
        first = seen.get(key)
        if first is not None:
            out.append(TensorRecord(n, ALIAS, tuple(t.shape), dn, 0, numel, 0, persistent=persistent,
                                    alias_of=first))
            continue
        seen[key] = prefix + n
        if dn in _E8M0 and quantized:
            out.append(TensorRecord(n, SCALE, tuple(t.shape), dn, numel, numel, numel * t.element_size(),
                                    persistent=persistent, scales=_pair_by_shape(tuple(t.shape), quantized)))
            continue
        out.append(TensorRecord(n, BUFFER, tuple(t.shape), dn, numel, numel, numel * t.element_size(),
                                persistent=persistent))
    return tuple(out)


def _pair_by_shape(shape: tuple, quantized: dict[str, tuple]) -> str | None:
    for wn, (logical, _) in quantized.items():
        if _block_compatible(shape, logical):
            return wn
    return None


def own_totals(tensors: tuple[TensorRecord, ...]) -> Totals:
    p = s = tb = b = pb = nbytes = 0
    for t in tensors:
        k = t.kind
        if k == WEIGHT or k == BIAS:
            p += t.elements
        elif k == SCALE:
            s += t.elements
        elif k == TABLE:
            tb += t.elements
        elif k == BUFFER:
            b += t.elements
            if t.persistent:
                pb += t.elements
        nbytes += t.bytes
    return Totals(p, s, tb, b, pb, nbytes)


_SKIP_ATTRS = {"training", "dump_patches", "call_super_init"}


def _attributes(module: Any) -> tuple[tuple[str, Any], ...]:
    out = []
    for k, v in module.__dict__.items():
        if k[0] == "_" or k in _SKIP_ATTRS:
            continue
        # issubclass on the type: isinstance on a transformers config (held by many modules) runs its
        # __getattribute__ for __class__.
        t = type(v)
        if v is None or issubclass(t, (int, float)):  # bool is an int
            out.append((k, v))
        elif issubclass(t, str):
            if len(v) <= 200:
                out.append((k, v))
        elif issubclass(t, (tuple, list)) and len(v) <= 16 and all(
                issubclass(type(x), (int, float, str)) for x in v):
            out.append((k, list(v)))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------------------------
# MoE: routed experts and top-k

_TOPK_ATTRS = ("topk", "top_k", "num_experts_per_tok", "n_activated_experts", "experts_per_token", "moe_topk")
_TOPK_CONFIG = ("num_experts_per_tok", "n_activated_experts", "moe_topk", "top_k", "num_experts_per_token",
                "experts_per_token", "moe_top_k")
_NEXPERT_CONFIG = ("n_routed_experts", "num_local_experts", "num_experts", "n_experts", "moe_num_experts")


def _config_value(config: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, int] | None:
    for k in keys:
        v = config.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return k, v
    return None


def _attr(mod: Any, name: str) -> Any:
    """`getattr(mod, name, None)` without nn.Module.__getattr__'s slow miss path for plain attributes."""
    v = mod.__dict__.get(name)
    if v is None and hasattr(type(mod), name):  # a class attribute or property
        v = getattr(mod, name, None)
    return v


def _find_topk(model: Any, parent_path: str, config: dict[str, Any],
               by_path: dict[str, Any] | None = None) -> tuple[int | None, str]:
    if by_path is not None:
        parent = by_path.get(parent_path)
    else:
        try:
            parent = model.get_submodule(parent_path) if parent_path else model
        except AttributeError:
            parent = None
    if parent is not None:
        for mod_name, mod in [("", parent)] + list(parent.named_children()):
            for a in _TOPK_ATTRS:
                v = _attr(mod, a)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    where = f"{parent_path}.{mod_name}" if mod_name else parent_path
                    return v, f"{where}.{a}"
    hit = _config_value(config, _TOPK_CONFIG)
    if hit:
        return hit[1], f"config {hit[0]}"
    return None, "top-k not found"


def find_moe(model: Any, modules: dict[str, ModuleRecord], config: dict[str, Any],
             by_path: dict[str, Any] | None = None) -> tuple[tuple[MoELayer, ...], list[str]]:
    """Routed-expert collections: a ModuleList named like experts (not shared ones), or a fused experts module whose
    tensors are stacked over the expert count from the config."""
    import torch

    layers: list[MoELayer] = []
    notes: list[str] = []
    n_cfg = _config_value(config, _NEXPERT_CONFIG)
    topk_sources: set[str] = set()
    for path, rec in modules.items():
        name = rec.name.lower()
        if "expert" not in name or "shared" in name:
            continue
        parent = rec.parent or ""
        if parent in modules and ("expert" in modules[parent].name.lower()):
            continue  # inside an expert
        if by_path is not None:
            mod = by_path.get(path)
            if mod is None:
                continue
        else:
            try:
                mod = model.get_submodule(path)
            except AttributeError:
                continue
        if isinstance(mod, torch.nn.ModuleList):
            local = len(rec.children)
            total_slots = len(mod._modules)
            if local < 2 and total_slots < 2:
                continue
            experts = total_slots
            params = rec.totals.parameters
            per_expert = params // local if local else 0
        else:
            if not n_cfg:
                continue
            e = n_cfg[1]
            stacked = [t for t in rec.tensors if t.kind == WEIGHT and t.shape and t.shape[0] == e]
            if not stacked:
                continue
            local = experts = e
            params = rec.totals.parameters
            per_expert = params // e
        k, src = _find_topk(model, parent, config, by_path)
        topk_sources.add(re.sub(r"\.\d+(?=\.|$)", ".*", src))
        layers.append(MoELayer(path=path, experts=experts, local_experts=local, top_k=k, parameters=params,
                               per_expert=per_expert))
    if layers:
        notes.append(f"routed experts: {len(layers)} collections; top-k from {', '.join(sorted(topk_sources))}")
        notes.append("active per token = all parameters − routed experts + top-k routed experts per MoE layer; "
                     "shared experts, embeddings and the head count in full")
    return tuple(layers), notes


# ---------------------------------------------------------------------------------------------------------------------
# The walk


def _preorder(model: Any) -> list[tuple[str, Any]]:
    """(path, module) in pre-order, a module registered under several paths listed at each (like
    `named_modules(remove_duplicate=False)`, without its recursive generators: 4x faster on 60,000 modules)."""
    out: list[tuple[str, Any]] = []
    stack: list[tuple[str, Any]] = [("", model)]
    while stack:
        path, mod = stack.pop()
        out.append((path, mod))
        items = [(f"{path}.{n}" if path else n, c) for n, c in mod._modules.items() if c is not None]
        stack.extend(reversed(items))
    return out


def walk(built: Built, progress: Progress | None = None) -> ModelRecord:
    """Records of every module of `built.model` (see the module docstring for the accounting rules)."""
    # Hundreds of thousands of small records on top of a heap holding the model's meta tensors: the cyclic GC would
    # rescan that heap again and again (a third of the walk's time). Records hold no cycles; pause it.
    with collector_paused():
        return _walk(built, progress)


def _walk(built: Built, progress: Progress | None) -> ModelRecord:
    model = built.model
    spans = _Spans(built.display_roots)
    seen: dict[int, str] = {}
    entries = _preorder(model)
    n = len(entries)
    step = max(1, n // 200)
    own: dict[str, Totals] = {}
    partial: list[tuple] = []
    children_of: dict[str, list[str]] = {}
    init_of: dict[str, SourceSpan | None] = {}
    for i, (path, mod) in enumerate(entries):
        tensors = classify_module(mod, path, seen)
        cls = type(mod)
        class_span, init_span, forward_span, doc = spans.for_class(cls)
        init_of[path] = init_span
        own[path] = own_totals(tensors)
        if path:
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            children_of.setdefault(parent, []).append(path)
        dims = ()
        if path and ("in_features" in mod.__dict__ or hasattr(cls, "in_features")):  # no nn.Module.__getattr__ miss
            parent_path = path.rsplit(".", 1)[0] if "." in path else ""
            dims = _named_dims(mod, path.rsplit(".", 1)[-1], init_of.get(parent_path), spans.files)
        partial.append((path, cls, tensors, class_span, init_span, forward_span, doc, _attributes(mod), dims))
        if progress is not None and i % step == 0:
            progress(i, n)
    config_ints = {k: v for k, v in built.config.items() if type(v) is int}
    if config_ints:
        attrs_of = {e[0]: e[7] for e in partial}
        int_attrs: dict[str, tuple] = {}  # the parent's int attributes: the only ones a width name can stand for
        renamed: dict[tuple, tuple] = {}  # every layer asks the same question
        for j, e in enumerate(partial):
            if e[8]:
                parent = e[0].rpartition(".")[0]
                ints = int_attrs.get(parent)
                if ints is None:
                    ints = int_attrs[parent] = tuple((k, v) for k, v in attrs_of.get(parent, ()) if type(v) is int)
                key = (e[8], ints)
                hit = renamed.get(key)
                if hit is None:
                    hit = renamed[key] = _in_config_terms(key[0], key[1], config_ints)
                partial[j] = (*e[:8], hit)
    # Totals bottom-up: children come after their parent in pre-order, so a reverse pass sees them first.
    totals: dict[str, Totals] = {}
    for path, *_ in reversed(partial):
        t = own[path]
        for c in children_of.get(path, ()):
            t = t + totals[c]
        totals[path] = t
    records = tuple(
        ModuleRecord(path=path, class_name=cls.__qualname__, class_module=cls.__module__,
                     children=tuple(children_of.get(path, ())), tensors=tensors, totals=totals[path], own=own[path],
                     class_span=cs, init_span=ins, forward_span=fs, doc=doc, attributes=attrs, dims=dims)
        for path, cls, tensors, cs, ins, fs, doc, attrs, dims in partial
    )
    if progress is not None:
        progress(n, n)
    index = {r.path: r for r in records}
    by_path = dict(entries)
    moe, moe_notes = find_moe(model, index, built.config, by_path)
    summary = summarize(records, moe, moe_notes, unique_modules=len({id(m) for _, m in entries}))
    source = SourceInfo(
        spec=built.spec, kind=built.kind, name=built.name, model_class=f"{type(model).__module__}."
                                                                        f"{type(model).__qualname__}",
        config=tuple(built.config.items()), overrides=tuple(built.overrides.items()),
        stubbed_imports=tuple(built.stubbed_imports), notes=tuple(built.notes), world_size=built.world_size,
        rank=built.rank, files=tuple(sorted(spans.files.items())), versions=tuple(sorted(built.versions.items())),
    )
    extras = (("transformers_loading", built.loading(entries)),) if built.loading is not None else ()
    return ModelRecord(source=source, modules=records, summary=summary, extras=extras)


def summarize(records: tuple[ModuleRecord, ...], moe: tuple[MoELayer, ...], moe_notes: list[str],
              unique_modules: int | None = None) -> Summary:
    """Model totals. `modules` counts module objects: one registered under two paths (MTP's shared embed) is one
    module, though it has a record at each path."""
    root = records[0].totals
    bytes_by_dtype: dict[str, int] = {}
    params_by_dtype: dict[str, int] = {}
    for m in records:
        for t in m.tensors:
            if t.kind in (WEIGHT, BIAS, SCALE, TABLE):
                bytes_by_dtype[t.dtype] = bytes_by_dtype.get(t.dtype, 0) + t.bytes
            if t.kind in (WEIGHT, BIAS):
                params_by_dtype[t.dtype] = params_by_dtype.get(t.dtype, 0) + t.elements
    active = None
    assumptions: list[str] = list(moe_notes)
    if moe:
        if all(m.top_k for m in moe):
            active = root.parameters - sum(m.parameters for m in moe) + sum(
                min(m.top_k or 0, m.local_experts) * m.per_expert for m in moe)
        else:
            assumptions.append("active parameters unknown: no top-k found for some routed experts")
    stored = sum(bytes_by_dtype.values())
    return Summary(
        parameters=root.parameters, active_parameters=active, scale_elements=root.scale_elements,
        table_elements=root.table_elements, buffer_elements=root.buffer_elements,
        persistent_buffer_elements=root.persistent_buffer_elements, bytes=stored,
        bytes_by_dtype=tuple(sorted(bytes_by_dtype.items())), parameters_by_dtype=tuple(sorted(params_by_dtype.items())),
        modules=unique_modules if unique_modules is not None else len(records), moe=moe, active_assumptions=tuple(assumptions),
    )

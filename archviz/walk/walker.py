"""The walk: every module of a built model in pre-order into a `ModuleRecord` (path, class, attributes, tensors by
the accounting rules of `tensors`, totals, source spans), and the model's `Summary`."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..gcpause import collector_paused
from ..records import (
    BIAS,
    SCALE,
    TABLE,
    WEIGHT,
    ModelRecord,
    ModuleRecord,
    MoELayer,
    SourceInfo,
    SourceSpan,
    Summary,
    Totals,
)
from ..sources import Built
from .moe import find_moe
from .provenance import file_facts
from .spans import Spans
from .tensors import classify_module, own_totals
from .widths import ctor_named_dims, in_config_terms, param_named_dims

Progress = Callable[[int, int], None]


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
# The walk


def preorder(model: Any) -> list[tuple[str, Any]]:
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
    spans = Spans(built.display_roots)
    seen: dict[int, str] = {}
    entries = preorder(model)
    n = len(entries)
    step = max(1, n // 200)
    own: dict[str, Totals] = {}
    partial: list[tuple] = []
    children_of: dict[str, list[str]] = {}
    init_of: dict[str, SourceSpan | None] = {}
    # Equal records made once (tensors, totals): repeated blocks share them, and the records writer finds them by id
    made: dict[tuple, Any] = {}
    own_of: dict[int, Totals] = {}  # id(the shared tensors tuple) -> its totals
    config_ints = {k: v for k, v in built.config.items() if type(v) is int}
    for i, (path, mod) in enumerate(entries):
        tensors = classify_module(mod, path, seen, made)
        cls = type(mod)
        class_span, init_span, forward_span, doc = spans.for_class(cls)
        init_of[path] = init_span
        t = own_of.get(id(tensors))
        if t is None:
            t = own_of[id(tensors)] = own_totals(tensors)
        own[path] = t
        if path:
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            children_of.setdefault(parent, []).append(path)
        dims = ()
        if path and ("in_features" in mod.__dict__ or hasattr(cls, "in_features")):  # no nn.Module.__getattr__ miss
            parent_path = path.rsplit(".", 1)[0] if "." in path else ""
            dims = ctor_named_dims(mod, path.rsplit(".", 1)[-1], init_of.get(parent_path), spans.files)
        if not dims:  # sizes of its own parameters, named by the expressions its __init__ makes them with
            dims = param_named_dims(mod, init_span, spans.files, config_ints)
        partial.append((path, cls, tensors, class_span, init_span, forward_span, doc, _attributes(mod), dims))
        if progress is not None and i % step == 0:
            progress(i, n)
    if config_ints:
        _dims_in_config_terms(partial, config_ints)
    totals = _totals_bottom_up(partial, own, children_of)
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
    emb_path, emb_params = _input_embedding(model, entries, index)
    if emb_path is not None:
        summary = dataclasses.replace(summary, input_embedding_path=emb_path, input_embedding_parameters=emb_params)
    source = _source_info(built, spans)
    extras = (("transformers_loading", built.loading(entries)),) if built.loading is not None else ()
    return ModelRecord(source=source, modules=records, summary=summary, extras=extras)


def _dims_in_config_terms(partial: list[tuple], config_ints: dict[str, int]) -> None:
    """Each record's constructor widths (its last field) renamed in the config's terms, where its parent's int
    attributes and the config's ints say what a width stands for; in place."""
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
                hit = renamed[key] = in_config_terms(key[0], key[1], config_ints)
            partial[j] = (*e[:8], hit)


def _totals_bottom_up(partial: list[tuple], own: dict[str, Totals],
                      children_of: dict[str, list[str]]) -> dict[str, Totals]:
    """Every module's totals, its own plus its children's: children come after their parent in pre-order, so a
    reverse pass sees them first. Equal sums are made once."""
    totals: dict[str, Totals] = {}
    summed: dict[tuple, Totals] = {}  # (own, children's totals) by id -> their sum, made once
    for path, *_ in reversed(partial):
        t = own[path]
        children = children_of.get(path)
        if children:
            parts = [t, *map(totals.__getitem__, children)]
            key = tuple(map(id, parts))  # the parts are kept by `own` and `totals`, so their ids stay theirs
            hit = summed.get(key)
            if hit is None:
                for c in parts[1:]:
                    t = t + c
                hit = summed[key] = t
            t = hit
        totals[path] = t
    return totals


def _source_info(built: Built, spans: Spans) -> SourceInfo:
    """Where the model came from: its source, build facts, and the files its spans read."""
    model = built.model
    return SourceInfo(
        spec=built.spec, kind=built.kind, name=built.name, model_class=f"{type(model).__module__}."
                                                                        f"{type(model).__qualname__}",
        config=tuple(built.config.items()), overrides=tuple(built.overrides.items()),
        stubbed_imports=tuple(built.stubbed_imports), notes=tuple(built.notes), world_size=built.world_size,
        rank=built.rank, files=tuple(sorted(spans.files.items())), versions=tuple(sorted(built.versions.items())),
        file_facts=file_facts(spans.files),
    )


def _input_embedding(model: Any, entries: list, index: dict[str, ModuleRecord]) -> tuple[str | None, int]:
    """(path, parameters) of the input embedding: transformers' `get_input_embeddings()`, else the first module in
    pre-order that is an `nn.Embedding` or whose class is named ...Embedding and holds a 2-D weight (DeepSeek's
    ParallelEmbedding). Parameters are 0 when its weight is the output head's too (tied)."""
    import torch

    emb = None
    get = getattr(model, "get_input_embeddings", None)
    if callable(get):
        try:
            emb = get()
        except Exception:  # noqa: BLE001 - models that do not implement it raise NotImplementedError
            emb = None
    if not isinstance(emb, torch.nn.Module):
        emb = next((m for _, m in entries if isinstance(m, torch.nn.Embedding) or (
            type(m).__name__.endswith("Embedding") and getattr(getattr(m, "weight", None), "ndim", 0) == 2)), None)
    if emb is None:
        return None, 0
    path = next((p for p, m in entries if m is emb), None)
    if path is None or path not in index:
        return None, 0
    head = None
    get_out = getattr(model, "get_output_embeddings", None)
    if callable(get_out):
        try:
            head = get_out()
        except Exception:  # noqa: BLE001
            head = None
    weight = getattr(emb, "weight", None)
    if weight is not None and getattr(head, "weight", None) is weight:
        return path, 0
    return path, index[path].totals.parameters


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

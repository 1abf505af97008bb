"""The record types that flow from the walker to every renderer.

Records are small, frozen and JSON-friendly: they hold no live modules or tensors, so a renderer (HTML, terminal,
JSON) is a pure function of them and never needs torch. Later stages (shapes, grouping, checkpoint verdicts) enrich
records with `dataclasses.replace`, never by mutation.

The JSON form is versioned by `SCHEMA`; `docs/records-schema.md` describes every field.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from ..gcpause import collector_paused
from .compactfile import BY_ID, column_values, from_columns, rows_once
from .recordcheck import check as check_value
from .recordcheck import check_head

SCHEMA = "archviz.records/1"

# Tensor kinds. Only WEIGHT and BIAS are "parameters" (logical, learned weights).
WEIGHT = "weight"
BIAS = "bias"
SCALE = "scale"  # quantization block scales paired with an fp8/fp4 weight
TABLE = "table"  # integer tables held as parameters (e.g. hash-routing tid2eid)
BUFFER = "buffer"  # registered buffers (persistent or not)
ALIAS = "alias"  # a second name for a tensor counted elsewhere (tied weights)

KINDS = (WEIGHT, BIAS, SCALE, TABLE, BUFFER, ALIAS)
PARAMETER_KINDS = (WEIGHT, BIAS)


@dataclass(frozen=True, slots=True)
class TensorRecord:
    """One tensor owned (registered) by a module."""

    name: str  # local attribute name, e.g. "weight"
    kind: str  # one of KINDS
    shape: tuple[int, ...]  # the stored shape
    dtype: str  # torch dtype name without "torch.", e.g. "float8_e4m3fn"
    elements: int  # logical element count (an fp4 pair packed in one int8 counts 2)
    storage_elements: int  # stored element count (numel)
    bytes: int  # storage bytes
    persistent: bool | None = None  # buffers: saved in the state dict?
    packing: str | None = None  # e.g. "fp4 ×2 per int8"
    alias_of: str | None = None  # ALIAS: full path of the tensor that is counted
    scales: str | None = None  # SCALE: local name of the weight this scale belongs to
    logical_shape: tuple[int, ...] | None = None  # packed weights: the shape of the values held
    note: str | None = None

    @property
    def is_parameter(self) -> bool:
        return self.kind in PARAMETER_KINDS


@dataclass(frozen=True, slots=True)
class SourceSpan:
    """Lines [start, end] (1-based, inclusive) of a file, named by a display path (e.g. `model.py`)."""

    file: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class CallSite:
    """Where a parent's forward calls a child module."""

    file: str
    line: int
    code: str


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded call of a module during the meta forward pass: shapes of inputs and outputs (a dim is an int or
    a symbol string: "B", "T", ...)."""

    inputs: tuple[tuple[int | str, ...], ...]
    outputs: tuple[tuple[int | str, ...], ...]
    input_dtypes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FlowStep:
    """One step of a module's own forward, in the order it ran: a child module's call ("call": its path relative to
    the module, e.g. "attn" or "layers.3") or a torch op the forward itself ran ("op": the aten name, e.g. "add").

    `inputs` are the values it consumed that the forward made or received: k >= 0 is step k's output, -1 - i the
    module's input i (as in `Call.inputs`); a residual `x + attn(x)` is an add whose inputs are the attn step and
    -1. Consecutive runs of the same op (each consuming the one before) are one step with `count`."""

    kind: str  # "call" | "op"
    name: str
    shapes: tuple[tuple[int | str, ...], ...]  # output shapes, dims named as in calls
    inputs: tuple[int, ...] = ()
    count: int = 1
    function: int = -1  # the innermost Python function it ran in (Flow.functions[k]); -1: the forward's own code


@dataclass(frozen=True, slots=True)
class FlowFunction:
    """A call of a Python function between a forward and its ops (`apply_rotary_pos_emb`, F.silu): its qualified
    name, file, def line, the caller's line that called it, and the call it ran inside (-1: the forward)."""

    name: str
    file: str
    line: int
    site: int
    parent: int = -1


@dataclass(frozen=True, slots=True)
class Flow:
    """A module's forward as the meta pass ran it (its first call): the steps, and which of them it returned."""

    steps: tuple[FlowStep, ...]
    outputs: tuple[int, ...] = ()  # step k, or the module's input i as -1 - i
    truncated: bool = False  # more steps ran than are kept (archviz.shapes.flow.MAX_STEPS)
    inputs: tuple[str, ...] = ()  # the forward's argument each input came from ("hidden_states", "past[0]"), or ()
    functions: tuple[FlowFunction, ...] = ()  # the function calls its steps ran in (FlowStep.function)


@dataclass(frozen=True, slots=True)
class Totals:
    """Element counts of a module's subtree (tensors shared with another module counted once, where first seen)."""

    parameters: int = 0
    scale_elements: int = 0
    table_elements: int = 0
    buffer_elements: int = 0
    persistent_buffer_elements: int = 0
    bytes: int = 0

    def __add__(self, other: "Totals") -> "Totals":
        return Totals(self.parameters + other.parameters, self.scale_elements + other.scale_elements,
                      self.table_elements + other.table_elements, self.buffer_elements + other.buffer_elements,
                      self.persistent_buffer_elements + other.persistent_buffer_elements, self.bytes + other.bytes)


@dataclass(frozen=True, slots=True)
class ModuleRecord:
    """One module of the model tree."""

    path: str  # "" for the root, else dotted, e.g. "layers.3.attn.wo_b"
    class_name: str  # e.g. "RowParallelLinear"
    class_module: str  # import path of the class's module, e.g. "model" or "transformers.models.llama.modeling_llama"
    children: tuple[str, ...]  # paths of the direct children, in registration order
    tensors: tuple[TensorRecord, ...]  # the module's own tensors
    totals: Totals  # whole subtree
    own: Totals  # own tensors only
    class_span: SourceSpan | None = None
    init_span: SourceSpan | None = None
    forward_span: SourceSpan | None = None
    doc: str | None = None  # first paragraph of the class docstring
    attributes: tuple[tuple[str, Any], ...] = ()  # scalar attributes (ints, floats, bools, strs) set in __init__
    # Filled by the shape pass (issue 3): calls, call sites in the parent's forward, and whether forward ran it.
    calls: tuple[Call, ...] = ()
    call_sites: tuple[CallSite, ...] = ()
    called: bool | None = None
    assumptions: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()  # stubbed kernels this module's forward called
    dims: tuple[tuple[int, str], ...] = ()  # widths named by the expression that built the module, e.g.
    #                                          (8192, "n_groups × o_lora_rank") from `RowParallelLinear(self.n_groups
    #                                          * args.o_lora_rank, self.dim)` in the parent's __init__; a name
    #                                          is "" where the code's terms differ from the config's (unnamed)
    flow: Flow | None = None  # modules with children: their forward's steps (shape pass; None without one)

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1] if self.path else ""

    @property
    def parent(self) -> str | None:
        return None if not self.path else self.path.rsplit(".", 1)[0] if "." in self.path else ""


@dataclass(frozen=True, slots=True)
class MoELayer:
    """A routed-expert collection found in the model."""

    path: str  # the experts container, e.g. "layers.3.ffn.experts"
    experts: int  # routed experts (global count)
    local_experts: int  # experts instantiated on this rank
    top_k: int | None
    parameters: int  # all routed-expert parameters on this rank
    per_expert: int  # parameters of one routed expert


@dataclass(frozen=True, slots=True)
class Summary:
    parameters: int
    active_parameters: int | None
    scale_elements: int
    table_elements: int
    buffer_elements: int
    persistent_buffer_elements: int
    bytes: int
    bytes_by_dtype: tuple[tuple[str, int], ...]
    parameters_by_dtype: tuple[tuple[str, int], ...]
    modules: int
    moe: tuple[MoELayer, ...] = ()
    active_assumptions: tuple[str, ...] = ()
    # The input embedding (token ids -> vectors): its path and parameters, 0 when it is tied to the output head
    # (which computes with it on every token). OpenAI (gpt-oss) and DeepSeek (V2) publish active counts without it.
    input_embedding_path: str | None = None
    input_embedding_parameters: int = 0

    @property
    def active_without_input_embedding(self) -> int | None:
        """Active parameters per token less the input embedding's, which a token reads one row of."""
        if self.active_parameters is None:
            return None
        return self.active_parameters - self.input_embedding_parameters


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """Where the model came from and how it was built."""

    spec: str  # the SOURCE as given
    kind: str  # "hf" | "reference" | "factory"
    name: str  # display name of the model
    model_class: str
    config: tuple[tuple[str, Any], ...] = ()  # flat JSON-able config fields
    overrides: tuple[tuple[str, Any], ...] = ()  # overrides key=value
    stubbed_imports: tuple[str, ...] = ()  # e.g. "kernel.act_quant", "tilelang"
    notes: tuple[str, ...] = ()  # what the build assumed or neutralised
    world_size: int = 1
    rank: int = 0
    files: tuple[tuple[str, str], ...] = ()  # display path -> absolute path of every source file cited
    versions: tuple[tuple[str, str], ...] = ()  # package -> version (torch, transformers, ...)
    # display path -> {"sha256", "git": {"commit", "path", "web"}?}: what a later stage may trust of each file
    file_facts: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ModelRecord:
    """The whole model: what every renderer consumes."""

    source: SourceInfo
    modules: tuple[ModuleRecord, ...]  # pre-order, root first
    summary: Summary
    schema: str = SCHEMA
    extras: tuple[tuple[str, Any], ...] = ()  # later stages (grouping, checkpoint) attach JSON-able data here

    def module(self, path: str) -> ModuleRecord:
        if hasattr(self.modules, "row_of"):  # a compact file's modules (archviz.records.compactfile): no scan
            return self.index()[path]
        for m in self.modules:
            if m.path == path:
                return m
        raise KeyError(path)

    def index(self) -> Mapping[str, ModuleRecord]:
        """path -> module; for a compact file's modules, a mapping that makes each module when it is looked up."""
        if hasattr(self.modules, "row_of"):
            return self.modules.index()  # type: ignore[attr-defined]
        return {m.path: m for m in self.modules}

    def column(self, field: str) -> list[Any]:
        """One field of every module, in module order, without making a compact file's modules (not `children`,
        which a compact file holds as names)."""
        if field == "children" or field not in ModuleRecord.__dataclass_fields__:
            raise KeyError(field)
        if field == "path":
            return list(self.modules.paths) if hasattr(self.modules, "row_of") else [m.path for m in self.modules]
        if hasattr(self.modules, "row_of"):
            return self.modules.column(field)  # type: ignore[attr-defined]
        get = operator.attrgetter(field)
        return list(map(get, self.modules))

    def extra(self, key: str, default: Any = None) -> Any:
        for k, v in self.extras:
            if k == key:
                return v
        return default

    def with_extra(self, key: str, value: Any) -> "ModelRecord":
        extras = tuple((k, v) for k, v in self.extras if k != key) + ((key, value),)
        return dataclasses.replace(self, extras=extras)

    def iter_tensors(self) -> Iterator[tuple[str, TensorRecord]]:
        for m in self.modules:
            for t in m.tensors:
                yield (f"{m.path}.{t.name}" if m.path else t.name), t

    def aliases(self) -> tuple["Alias", ...]:
        """Every second name of a tensor counted elsewhere (tied weights, shared buffers), in module order, with
        the kind and element count of the tensor it names: what the totals leave out, so that a reader can see it."""
        found = []
        holds: dict[int, bool] = {}  # id(tensors) -> holds an alias: a compact file's modules share their tensors
        for path, ts in zip(self.column("path"), self.column("tensors")):
            if ts:
                has = holds.get(id(ts))
                if has is None:
                    has = holds[id(ts)] = any(t.kind == ALIAS and t.alias_of for t in ts)
                if has:
                    found += [(f"{path}.{t.name}" if path else t.name, t) for t in ts if t.kind == ALIAS and t.alias_of]
        if not found:
            return ()
        index = self.index()
        out = []
        for path, t in found:
            owner, _, name = t.alias_of.rpartition(".")
            target = next((x for x in index[owner].tensors if x.name == name), None) if owner in index else None
            kind = target.kind if target is not None else BUFFER if t.persistent is not None else WEIGHT
            out.append(Alias(path, t.alias_of, kind, target.elements if target is not None else t.storage_elements))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Alias:
    """A second name of a counted tensor (``ModelRecord.aliases``): derived from the records, never stored."""

    path: str  # the second name, e.g. "lm_head.weight"
    of: str  # the name it is counted under, e.g. "model.embed_tokens.weight"
    kind: str  # the counted tensor's kind: WEIGHT/BIAS for tied parameters, BUFFER for a shared buffer, ...
    elements: int  # the counted tensor's logical elements, which the totals do not add again

    @property
    def is_parameter(self) -> bool:
        return self.kind in PARAMETER_KINDS


# ---------------------------------------------------------------------------------------------------------------------
# JSON export / import


_MAPPING_FIELDS = frozenset(("config", "overrides", "files", "versions", "file_facts", "bytes_by_dtype",
                             "parameters_by_dtype", "attributes", "extras"))
_FIELDS: dict[type, tuple[str, ...]] = {}


def _encode(obj: Any) -> Any:
    """Records -> JSON-able data. Field lists are cached per class (records are slotted dataclasses), and tuples of
    ints (shapes) pass through untouched: a 60,000-module model encodes in about a second."""
    cls = type(obj)
    names = _FIELDS.get(cls)
    if names is None and dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(obj))
    if names is not None:
        out: dict[str, Any] = {}
        for name in names:
            v = getattr(obj, name)
            if name in _MAPPING_FIELDS:
                out[name] = {k: _encode(x) for k, x in v}
            elif v is None or isinstance(v, (str, int, float, bool)):
                out[name] = v
            else:
                out[name] = _encode(v)
        return out
    if isinstance(obj, (list, tuple)):
        if all(type(x) is int for x in obj):
            return list(obj)
        return [_encode(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _encode(v) for k, v in obj.items()}
    return obj


_TENSOR_OPTIONAL = ("persistent", "packing", "alias_of", "scales", "logical_shape", "note")


def _tensor_json(t: TensorRecord) -> dict[str, Any]:
    d = {"name": t.name, "kind": t.kind, "shape": list(t.shape), "dtype": t.dtype, "elements": t.elements,
         "storage_elements": t.storage_elements, "bytes": t.bytes}
    for k in _TENSOR_OPTIONAL:  # null fields are left out
        v = getattr(t, k)
        if v is not None:
            d[k] = list(v) if k == "logical_shape" else v
    return d


def _totals_json(t: Totals) -> dict[str, int]:
    return {"parameters": t.parameters, "scale_elements": t.scale_elements, "table_elements": t.table_elements,
            "buffer_elements": t.buffer_elements, "persistent_buffer_elements": t.persistent_buffer_elements,
            "bytes": t.bytes}


def _span_json(s: SourceSpan | None) -> dict[str, Any] | None:
    return None if s is None else {"file": s.file, "start": s.start, "end": s.end}


def _flow_json(f: Flow) -> dict[str, Any]:
    steps = []
    for st in f.steps:
        d: dict[str, Any] = {st.kind: st.name, "shapes": [list(x) for x in st.shapes]}
        if st.inputs:
            d["in"] = list(st.inputs)
        if st.count != 1:
            d["n"] = st.count
        steps.append({**d, "fn": st.function} if st.function >= 0 else d)
    out: dict[str, Any] = {"steps": steps, "out": list(f.outputs)}
    if f.truncated:
        out["truncated"] = True
    if f.inputs:
        out["inputs"] = list(f.inputs)
    out.update({"functions": [[x.name, x.file, x.line, x.site, x.parent] for x in f.functions]} if f.functions else {})
    return out


def _decode_flow(d: dict | None) -> Flow | None:
    if d is None:
        return None
    steps = []
    for x in d["steps"]:
        kind = "call" if "call" in x else "op"
        steps.append(FlowStep(kind, str(x[kind]), _dims(x.get("shapes", ())), tuple(int(i) for i in x.get("in", ())),
                              int(x.get("n", 1)), int(x.get("fn", -1))))
    return Flow(tuple(steps), tuple(int(i) for i in d.get("out", ())), bool(d.get("truncated", False)),
                tuple(str(n) for n in d.get("inputs", ())),
                tuple(FlowFunction(str(n), str(f), int(a), int(b), int(p)) for n, f, a, b, p in d.get("functions", ())))


def _module_json(m: ModuleRecord) -> dict[str, Any]:
    """One module, written field by field (the generic encoder is 3x slower on 60,000 modules); empty lists of the
    shape pass (calls, call_sites, assumptions, kernels, dims) are left out."""
    d: dict[str, Any] = {
        "path": m.path, "class_name": m.class_name, "class_module": m.class_module, "children": list(m.children),
        "tensors": [_tensor_json(t) for t in m.tensors], "totals": _totals_json(m.totals), "own": _totals_json(m.own),
        "class_span": _span_json(m.class_span), "init_span": _span_json(m.init_span),
        "forward_span": _span_json(m.forward_span), "doc": m.doc,
        "attributes": {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.attributes},
        "called": m.called,
    }
    if m.calls:
        d["calls"] = [_encode(c) for c in m.calls]
    if m.call_sites:
        d["call_sites"] = [{"file": c.file, "line": c.line, "code": c.code} for c in m.call_sites]
    if m.assumptions:
        d["assumptions"] = list(m.assumptions)
    if m.kernels:
        d["kernels"] = list(m.kernels)
    if m.dims:
        d["dims"] = [[v, n] for v, n in m.dims]
    if m.flow is not None:
        d["flow"] = _flow_json(m.flow)
    return d


def to_json_dict(record: ModelRecord) -> dict[str, Any]:
    with collector_paused():  # many small dicts, no cycles
        d = _encode(dataclasses.replace(record, modules=()))
        d["modules"] = [_module_json(m) for m in record.modules]
    d = {"schema": d.pop("schema"), **d}
    return d


def dumps(record: ModelRecord, *, indent: int | None = None) -> str:
    """The records as JSON text: compact by default (json's C encoder; an indent makes it several times slower)."""
    if indent is None:
        return json.dumps(to_json_dict(record), ensure_ascii=False, separators=(",", ":"))
    return json.dumps(to_json_dict(record), indent=indent, ensure_ascii=False)


def _decode_tensor(d: dict) -> TensorRecord:
    d = dict(d)
    d["shape"] = tuple(d["shape"])
    if d.get("logical_shape") is not None:
        d["logical_shape"] = tuple(d["logical_shape"])
    return TensorRecord(**d)


def _span(d: dict | None) -> SourceSpan | None:
    return SourceSpan(**d) if d else None


def _dims(xs: list) -> tuple:
    return tuple(tuple(s) for s in xs)


def _decode_module(d: dict) -> ModuleRecord:
    return ModuleRecord(
        path=d["path"],
        class_name=d["class_name"],
        class_module=d["class_module"],
        children=tuple(d["children"]),
        tensors=tuple(_decode_tensor(t) for t in d["tensors"]),
        totals=Totals(**d["totals"]),
        own=Totals(**d["own"]),
        class_span=_span(d.get("class_span")),
        init_span=_span(d.get("init_span")),
        forward_span=_span(d.get("forward_span")),
        doc=d.get("doc"),
        attributes=tuple(d.get("attributes", {}).items()),
        calls=tuple(
            Call(_dims(c["inputs"]), _dims(c["outputs"]), tuple(c.get("input_dtypes", ())),
                 tuple(c.get("output_dtypes", ())))
            for c in d.get("calls", ())
        ),
        call_sites=tuple(CallSite(**c) for c in d.get("call_sites", ())),
        called=d.get("called"),
        assumptions=tuple(d.get("assumptions", ())),
        kernels=tuple(d.get("kernels", ())),
        dims=tuple((int(v), str(n)) for v, n in d.get("dims", ())),
        flow=_decode_flow(d.get("flow")),
    )


def from_json_dict(d: dict[str, Any]) -> ModelRecord:
    if d.get("schema") != SCHEMA:
        raise ValueError(f"unsupported records schema {d.get('schema')!r}; this archviz reads {SCHEMA} and {SCHEMA_V3}")
    s = d["source"]
    source = SourceInfo(
        spec=s["spec"], kind=s["kind"], name=s["name"], model_class=s["model_class"],
        config=tuple(s.get("config", {}).items()), overrides=tuple(s.get("overrides", {}).items()),
        stubbed_imports=tuple(s.get("stubbed_imports", ())), notes=tuple(s.get("notes", ())),
        world_size=s.get("world_size", 1), rank=s.get("rank", 0),
        files=tuple(s.get("files", {}).items()), versions=tuple(s.get("versions", {}).items()),
        file_facts=tuple(s.get("file_facts", {}).items()),
    )
    sm = d["summary"]
    summary = Summary(
        parameters=sm["parameters"], active_parameters=sm["active_parameters"],
        scale_elements=sm["scale_elements"], table_elements=sm["table_elements"],
        buffer_elements=sm["buffer_elements"], persistent_buffer_elements=sm["persistent_buffer_elements"],
        bytes=sm["bytes"], bytes_by_dtype=tuple(sm["bytes_by_dtype"].items()),
        parameters_by_dtype=tuple(sm["parameters_by_dtype"].items()), modules=sm["modules"],
        moe=tuple(MoELayer(**m) for m in sm.get("moe", ())),
        active_assumptions=tuple(sm.get("active_assumptions", ())),
        input_embedding_path=sm.get("input_embedding_path"),
        input_embedding_parameters=sm.get("input_embedding_parameters", 0),
    )
    check_head(source, summary)
    modules = tuple(_decode_module(m) for m in d["modules"])
    at: dict[str, int] = {}
    for i, m in enumerate(modules):  # (a compact file checks each distinct value once instead)
        if type(m.path) is not str:
            raise ValueError(f"module {i}: path {m.path!r} is not a string")
        if at.setdefault(m.path, i) != i:
            raise ValueError(f"module {m.path!r} is recorded twice")
        for f in FIELDS:
            check_value(f, getattr(m, f))
    for i, m in enumerate(modules):  # pre-order: a module's children come after it
        for c in m.children:
            if at.get(c, -1) <= i:
                raise ValueError(f"{m.path or 'the root'} lists a child {c!r} that is not recorded after it")
    return ModelRecord(source=source, modules=modules, summary=summary, extras=tuple(d.get("extras", {}).items()))


def loads(text: str) -> ModelRecord:
    """A records file of either version: archviz.records/1, or the compact /3 (below)."""
    d = json.loads(text)
    if isinstance(d, dict) and d.get("schema") == SCHEMA_V3:
        return from_compact_dict(d)
    try:
        record = from_json_dict(d)
    except (TypeError, KeyError, IndexError, AttributeError) as e:
        raise ValueError(f"not a valid {SCHEMA} file ({type(e).__name__}: {e})") from None
    if not record.modules:  # as the compact file's reader: every reader of records starts at the root module
        raise ValueError(f"not a valid {SCHEMA} file: `modules` is empty, where the model's root module at least is")
    return record


# ---------------------------------------------------------------------------------------------------------------------
# The compact records file, archviz.records/3 (docs/records-schema.md)
#
# A model's modules repeat: 61 layers of one kind, 256 experts of one shape, the same call sites and spans in every
# layer. Version 3 keeps `source`, `summary` and `extras` as version 1 writes them, and stores each distinct field
# value once ("fields", "values"); a module is its parent, its name and a row of indices into each field's values
# (the distinct rows once, and three lists: parent, name, row). Reading
# decodes each distinct value once and shares it between the modules that hold it (records are immutable), and makes
# a module only when it is read (archviz.records.compactfile). `archviz.records.loads` reads both versions.

SCHEMA_V3 = "archviz.records/3"

# ModuleRecord's fields after `path`, in its order (rows are built positionally)
FIELDS = ("class_name", "class_module", "children", "tensors", "totals", "own", "class_span", "init_span",
          "forward_span", "doc", "attributes", "calls", "call_sites", "called", "assumptions", "kernels", "dims",
          "flow")
_CHILDREN = FIELDS.index("children")
_DEFAULTS = tuple(ModuleRecord.__dataclass_fields__[f].default for f in FIELDS)  # (MISSING where there is none)


_ENCODE: dict[str, Callable[[Any], Any]] = {
    "tensors": lambda v: [_tensor_json(t) for t in v],
    "totals": _totals_json, "own": _totals_json,
    "class_span": _span_json, "init_span": _span_json, "forward_span": _span_json,
    "attributes": lambda v: {k: (list(x) if isinstance(x, tuple) else x) for k, x in v},
    "calls": lambda v: [_encode(c) for c in v],
    "call_sites": lambda v: [{"file": c.file, "line": c.line, "code": c.code} for c in v],
    "assumptions": list, "kernels": list, "children": list,
    "dims": lambda v: [[d, n] for d, n in v],
    "flow": _flow_json,
}

_DECODE: dict[str, Callable[[Any], Any]] = {
    "tensors": lambda v: tuple(_decode_tensor(t) for t in v),
    "totals": lambda v: Totals(**v), "own": lambda v: Totals(**v),
    "class_span": _span, "init_span": _span, "forward_span": _span,
    "attributes": lambda v: tuple(v.items()),
    "calls": lambda v: tuple(Call(_dims(c["inputs"]), _dims(c["outputs"]), tuple(c.get("input_dtypes", ())),
                                  tuple(c.get("output_dtypes", ()))) for c in v),
    "call_sites": lambda v: tuple(CallSite(**c) for c in v),
    "assumptions": tuple, "kernels": tuple, "children": tuple,
    "dims": lambda v: tuple((int(d), str(n)) for d, n in v),
    "flow": _decode_flow,
}


def to_compact_dict(record: ModelRecord) -> dict[str, Any] | None:
    """Version 3 as a dict, or None when the modules do not form a tree of dotted names (then write version 1)."""
    parents, names, rels, index, modules = [], [], [], {}, record.modules
    with collector_paused():
        for i, m in enumerate(modules):
            path = m.path
            if i == 0:
                if path != "":
                    return None
                parent, name = -1, ""
            else:
                head, _, name = path.rpartition(".")
                parent = index.get(head)
                if parent is None or not name:
                    return None
            index[path] = i
            parents.append(parent)
            names.append(name)
            children = m.children
            if children and path:
                prefix = path + "."
                if not all(c.startswith(prefix) for c in children):
                    return None
                n = len(prefix)
                children = tuple([c[n:] for c in children])
            if children and any("." in c for c in children):
                return None
            rels.append(children)
        values, indices = zip(*(column_values(rels if f == "children" else list(map(operator.attrgetter(f), modules)),
                                              BY_ID.get(f), _ENCODE.get(f)) for f in FIELDS))
        head = to_json_dict(ModelRecord(source=record.source, modules=(), summary=record.summary,
                                        extras=record.extras))
    head.pop("modules", None)
    head.pop("schema", None)
    rows, row = rows_once(indices)
    return {"schema": SCHEMA_V3, **head, "fields": list(FIELDS), "values": list(values), "rows": rows,
            "modules": {"parent": parents, "name": names, "row": row}}


def dumps_compact(record: ModelRecord) -> str:
    """The records as version 3 text (version 1 where the module paths do not form a tree)."""
    d = to_compact_dict(record)
    if d is None:
        return dumps(record)
    return json.dumps(d, ensure_ascii=False, separators=(",", ":"))


def from_compact_dict(d: dict[str, Any]) -> ModelRecord:
    """A version 3 dict as a record whose modules are made when read (`archviz.records.compactfile`); malformed data
    raises ValueError (TypeError, KeyError, IndexError inside), all of it found here rather than when a module is
    read."""
    version = d.get("schema", "").rsplit("/", 1)[-1]
    try:
        fields = d["fields"]
        if list(fields) != list(FIELDS[:len(fields)]) or len(fields) < _CHILDREN + 1:
            raise ValueError(f"fields {fields!r} are not this archviz's")
        values = d["values"]
        if not isinstance(values, list) or len(values) != len(fields):
            raise ValueError(f"values hold {len(values)} fields' values, not {len(fields)}")
        tables = []
        for f, vs in zip(FIELDS, values):
            dec = _DECODE.get(f)
            table = [dec(v) if dec is not None and v is not None else v for v in vs]
            for v in table:  # each distinct value once
                check_value(f, v)
            tables.append(table)
        m = d["modules"]
        if not isinstance(m, dict):
            raise ValueError("`modules` is not an object of three lists")
        modules = from_columns(m["parent"], m["name"], m["row"], d["rows"], tables, ModuleRecord, FIELDS, _DEFAULTS)
        # (a file written before the later fields (flow) were added: those keep their defaults)
        v1 = {k: v for k, v in d.items() if k not in ("fields", "values", "rows", "modules")}
        v1["schema"] = "archviz.records/1"
        v1["modules"] = []
        rec = from_json_dict(v1)
    except (TypeError, KeyError, IndexError, AttributeError) as e:
        raise ValueError(f"not a valid archviz.records/{version} file ({type(e).__name__}: {e})") from None
    except ValueError as e:
        raise ValueError(f"not a valid archviz.records/{version} file: {e}") from None
    return ModelRecord(source=rec.source, modules=modules, summary=rec.summary, extras=rec.extras)


__all__ = [
    "SCHEMA", "KINDS", "WEIGHT", "BIAS", "SCALE", "TABLE", "BUFFER", "ALIAS", "PARAMETER_KINDS",
    "TensorRecord", "SourceSpan", "CallSite", "Call", "FlowStep", "FlowFunction", "Flow", "Totals", "ModuleRecord", "MoELayer", "Summary",
    "SourceInfo", "ModelRecord", "Alias", "to_json_dict", "dumps", "loads", "from_json_dict", "SCHEMA_V3", "FIELDS",
    "dumps_compact", "to_compact_dict", "from_compact_dict",
]

"""JSON views of records for JSON output (pure functions, no torch)."""

from __future__ import annotations

from typing import Any

from .. import format as fmt
from ..cost.provenance import built_dtype_said, config_said
from .dims import dim_renames, named_dims
from ..records import ModelRecord, ModuleRecord, to_json_dict


def tied_text(record: ModelRecord) -> tuple[str, str] | None:
    """(count, what) of the parameters reachable under a second name (tied weights), which the totals count once;
    None when there are none. Shared by the terminal summary and the site's totals."""
    tied = [a for a in record.aliases() if a.is_parameter]
    if not tied:
        return None
    what = (f"{tied[0].path} = {tied[0].of}, counted once" if len(tied) == 1
            else f"{len(tied):,} second names of counted weights, e.g. {tied[0].path} = {tied[0].of}")
    return fmt.count(sum(a.elements for a in tied)), what


def summary_json(record: ModelRecord) -> dict[str, Any]:
    s = record.summary
    src = record.source
    out: dict[str, Any] = {
        "model": src.name,
        "source": src.spec,
        "model_class": src.model_class,
        "parameters": s.parameters,
        "active_parameters": s.active_parameters,
        "active_parameters_without_input_embedding": s.active_without_input_embedding,
        "input_embedding": {"path": s.input_embedding_path, "parameters": s.input_embedding_parameters}
        if s.input_embedding_path is not None else None,
        "scale_elements": s.scale_elements,
        "table_elements": s.table_elements,
        "buffer_elements": s.buffer_elements,
        "persistent_buffer_elements": s.persistent_buffer_elements,
        "bytes": s.bytes,
        "dtype_said": built_dtype_said(src.spec, dict(src.config)),  # where the dtype of the bytes came from
        "config_said": config_said(src.spec),  # "transformers' default config for TYPE" for hf:TYPE
        "bytes_by_dtype": dict(s.bytes_by_dtype),
        "parameters_by_dtype": dict(s.parameters_by_dtype),
        "modules": s.modules,
        "stubbed_imports": list(src.stubbed_imports),
        "notes": list(src.notes),
        "active_assumptions": list(s.active_assumptions),
        "moe": [to_json_dict_moe(m) for m in s.moe],
        # tables read by index, counted in active_parameters by the rows a token reads (found in the meta pass)
        "lookup_tables": list((record.extra("shapes") or {}).get("gathered") or ()),
        "world_size": src.world_size,
        "rank": src.rank,
    }
    aliases = record.aliases()
    out["tied_parameters"] = sum(a.elements for a in aliases if a.is_parameter)  # counted once, under `of`
    out["aliases"] = [{"path": a.path, "of": a.of, "kind": a.kind, "elements": a.elements} for a in aliases]
    if src.world_size > 1:
        out["parameters_all_ranks"] = s.parameters * src.world_size
    return out


def to_json_dict_moe(m: Any) -> dict[str, Any]:
    return {"path": m.path, "experts": m.experts, "local_experts": m.local_experts, "top_k": m.top_k,
            "parameters": m.parameters, "per_expert": m.per_expert}


def module_json(record: ModelRecord, path: str, *, children: bool = True) -> dict[str, Any]:
    m: ModuleRecord = record.module(path)
    full = to_json_dict_module(m)
    out: dict[str, Any] = {
        "path": m.path,
        "class": m.class_name,
        "class_module": m.class_module,
        "parameters": m.totals.parameters,
        "own_parameters": m.own.parameters,
        "totals": full["totals"],
        "tensors": full["tensors"],
        "inputs": [list(s) for s in (m.calls[0].inputs if m.calls else ())],
        "outputs": [list(s) for s in (m.calls[0].outputs if m.calls else ())],
        "calls": full["calls"],
        "call_sites": full["call_sites"],
        "called": m.called,
        "assumptions": list(m.assumptions),
        "source": {k: full[k] for k in ("class_span", "init_span", "forward_span")},
        "doc": m.doc,
        "dim_names": {str(v): n for v, n in named_dims(m, dict(record.source.config),
                                                       dim_renames(record)).items()},
        "config_said": config_said(record.source.spec),  # "transformers' default config for TYPE" for hf:TYPE
    }
    grouping = record.extra("grouping")
    if grouping:
        node = grouping.get("by_path", {}).get(path)
        if node:
            out["multiplicity"] = node["multiplicity"]
            out["total"] = node["total"]
            out["group"] = node.get("group")
    if children:
        index = record.index()
        out["children"] = [{"path": c, "class": index[c].class_name, "parameters": index[c].totals.parameters}
                           for c in m.children]
    return out


def to_json_dict_module(m: ModuleRecord) -> dict[str, Any]:
    from ..records.types import _encode

    return _encode(m)


__all__ = ["summary_json", "module_json", "to_json_dict"]

"""One gallery row: a model's figures, a pure function of its records (no torch). Every figure is read from what
`archviz summary`'s JSON (archviz.render.views.summary_json) and `archviz cost`'s JSON (archviz.cost.report and
archviz.cost.curve) compute, never counted a second way:

    parameters, active (both conventions)     summary_json
    KV bytes per token, decode FLOPs a token  cost_report(record) at the context the cost extra was measured at
    KV bytes at 32K and 1M                    curve_points (the site's cost section), where the model reaches them
    weight bytes                              cost_report(record).memory.weights (summary bytes without cost)
    layers and their kinds                    the grouping's layer kinds
    attention kinds                           the KV cache entries the code keeps, per layer, with the config's
                                              kv_lora_rank (MLA) named
"""

from __future__ import annotations

from typing import Any

from ... import format as fmt
from ...cost.curve import curve_points, max_positions
from ...cost.report import cost_report
from ..cost import flops as flops_text
from ..cost import nbytes as bytes_text
from ..views import summary_json

K32, M1 = 32 << 10, 1 << 20


def layer_recipe(record: Any) -> tuple[int | None, str]:
    """(layers, "61: 3 dense + 58 MoE") from the grouping's layer kinds; (None, "—") without a layer list."""
    kinds = ((record.extra("grouping") or {}).get("layers") or {}).get("kinds") or []
    counted = [(k["name"], len(k.get("layers") or ())) for k in kinds]
    total = sum(n for _, n in counted)
    if not total:
        return None, "—"
    if len(counted) == 1:
        return total, f"{total} layers"
    short = [(name[:-len(" layer")] if name.endswith(" layer") else name, n) for name, n in counted]
    return total, f"{total}: " + " + ".join(f"{n} {name}" for name, n in short)


def _entry_kind(entries: list[dict[str, Any]], config: dict[str, Any]) -> str:
    """What one layer's cache entries say its attention is."""
    ratios = sorted({e["ratio"] for e in entries if e.get("ratio")})
    if any(r > 1 for r in ratios):
        return "compressed ratio " + ", ".join(str(r) for r in ratios if r > 1)
    if ratios:
        rank = config.get("kv_lora_rank")
        return f"MLA latent {rank}" if isinstance(rank, int) and rank > 0 else "full"
    whats = " ".join(e.get("what", "") for e in entries)
    if "window" in whats:
        window = whats.split("window", 1)[1].strip(" ()").split(")")[0].split()[0]
        return f"sliding window {window}"
    return "linear / state space"


def attention_kinds(record: Any) -> list[tuple[str, int]]:
    """(kind, layers) in the order the layers first show them, from the KV entries the code's cache keeps."""
    c = record.extra("cost") or {}
    by_layer: dict[Any, list[dict[str, Any]]] = {}
    for e in (c.get("kv") or {}).get("entries") or ():
        by_layer.setdefault(e.get("layer"), []).append(e)
    config = dict(record.source.config)
    text = config.get("text_config")
    if isinstance(text, dict):
        config = {**text, **config}
    kinds: dict[str, int] = {}
    layers = [n for n in by_layer if isinstance(n, int)]
    total, _ = layer_recipe(record)
    for n in sorted(layers):
        k = _entry_kind(by_layer[n], config)
        kinds[k] = kinds.get(k, 0) + 1
    if total and layers and len(layers) < total:
        kinds["no KV cache"] = total - len(layers)
    return list(kinds.items())


def _cell(value: float | None, text: str, note: str | None = None) -> dict[str, Any]:
    """A table cell: the shown text, the value it sorts by (None: blank, sorted last), and a note."""
    return {"value": value, "text": text if value is not None else "—", "note": note}


def _active(active: int | None, parameters: int) -> dict[str, Any]:
    """Active parameters as the summary gives them; a model without routed experts (the summary's None) uses all."""
    if active is None:
        return _cell(parameters, fmt.count(parameters), "dense: all")
    return _cell(active, fmt.count(active))


_ARCH_KEYS = {"hidden": ("hidden_size", "d_model", "n_embd", "dim", "model_dim"),
              "heads": ("num_attention_heads", "n_heads", "n_head", "num_heads"),
              "kv_heads": ("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"),
              "head_dim": ("head_dim", "attention_head_size", "kv_channels"),
              "vocab": ("vocab_size", "padded_vocab_size")}


def _config_int(config: dict[str, Any], keys: tuple[str, ...]) -> tuple[int | None, str | None]:
    """The first of `keys` the config (or its text_config) sets to a positive integer, and the key."""
    for c in (config, config.get("text_config") if isinstance(config.get("text_config"), dict) else {}):
        for k in keys:
            v = c.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v, k
    return None, None


def architecture(record: Any) -> dict[str, dict[str, Any]]:
    """The compare page's architecture cells: hidden size, heads, KV heads, head dim, vocab and context from the
    config (the key each came from as its note), routed experts and top-k from the experts the walk found."""
    config = dict(record.source.config)
    out: dict[str, dict[str, Any]] = {}
    for name, keys in _ARCH_KEYS.items():
        v, k = _config_int(config, keys)
        out[name] = _cell(v, fmt.count(v) if v is not None else "—", k)
    nope, _ = _config_int(config, ("qk_nope_head_dim",))
    rope, _ = _config_int(config, ("qk_rope_head_dim",))
    if nope and rope:  # latent attention: a query/key head is its no-rotary and rotary parts together
        out["head_dim"] = _cell(nope + rope, fmt.count(nope + rope), "qk_nope_head_dim + qk_rope_head_dim")
    elif out["head_dim"]["value"] is None and out["hidden"]["value"] and out["heads"]["value"]:
        hd = out["hidden"]["value"] // out["heads"]["value"]
        out["head_dim"] = _cell(hd, fmt.count(hd), "hidden ÷ heads")
    if out["kv_heads"]["value"] is None and out["heads"]["value"]:
        out["kv_heads"] = _cell(out["heads"]["value"], fmt.count(out["heads"]["value"]), "as heads (no KV-head key)")
    moe = record.summary.moe
    if moe:
        out["experts"] = _cell(moe[0].experts, fmt.count(moe[0].experts), f"{len(moe)} MoE layers")
        k = moe[0].top_k
        out["top_k"] = _cell(k, fmt.count(k) if k is not None else "—")
    else:
        out["experts"] = _cell(None, "—", "dense")
        out["top_k"] = _cell(None, "—", "dense")
    longest = max_positions(config)
    out["context"] = _cell(longest, fmt.count(longest) if longest else "—")
    return out


def model_row(record: Any, *, key: str, slug: str | None, dtype_note: str, failures: list[dict[str, str]],
              parent: str | None = None) -> dict[str, Any]:
    """The row of one model, every figure as a cell; `failures`: the stages that did not complete."""
    s = summary_json(record)
    config = dict(record.source.config)
    longest = max_positions(config)
    layers, recipe = layer_recipe(record)
    row: dict[str, Any] = {
        "key": key, "slug": slug, "name": record.source.name, "spec": record.source.spec,
        "type": str(config.get("model_type") or record.source.kind),
        "class": record.source.model_class.rsplit(".", 1)[-1], "class_path": record.source.model_class,
        "dtype": dtype_note, "parent": parent, "failures": failures,
        "max_positions": longest, "recipe": recipe,
        "parameters": _cell(s["parameters"], fmt.count(s["parameters"]), fmt.human(s["parameters"])),
        "active": _active(s["active_parameters"], s["parameters"]),
        "active_wo": _active(s["active_parameters_without_input_embedding"], s["parameters"]),
        "layers": _cell(layers, recipe),
        "weights": _cell(s["bytes"], bytes_text(s["bytes"])),
        **architecture(record),
    }
    kinds = attention_kinds(record) if record.extra("cost") else []
    row["attention"] = ", ".join(f"{k} ×{n}" if len(kinds) > 1 else k for k, n in kinds) or "—"
    row["checkpoint"] = ((record.extra("checkpoint") or {}).get("verdict")) or None
    for name in ("kv_token", "kv_32k", "kv_1m", "decode_32k"):
        row[name] = _cell(None, "—")
    if not record.extra("cost"):
        return row
    r = cost_report(record)
    row["weights"] = _cell(r.memory.weights, bytes_text(r.memory.weights))
    if r.kv.source:
        row["kv_token"] = _cell(r.kv.per_token, bytes_text(r.kv.per_token),
                                f"+ {bytes_text(r.kv.fixed)} fixed per sequence" if r.kv.fixed else None)
        reached = [L for L in (K32, M1) if longest is None or longest >= L]
        points = {p.context: p for p in curve_points(record.extra("cost"), reached)}
        at_limit = {p.context: p for p in curve_points(record.extra("cost"), [longest] if longest else [])}
        for L, name in ((K32, "kv_32k"), (M1, "kv_1m")):
            p = points.get(L)
            if L in reached and p is not None and p.kv_bytes is not None:
                row[name] = _cell(p.kv_bytes, bytes_text(p.kv_bytes))
            elif L not in reached:
                row[name] = _at_limit(at_limit.get(longest), "kv_bytes", bytes_text, longest)
    if r.decode is not None and r.context == K32:
        if longest is None or longest >= K32:
            row["decode_32k"] = _cell(r.decode.per_token, flops_text(r.decode.per_token))
        else:
            at = {p.context: p for p in curve_points(record.extra("cost"), [longest])}.get(longest)
            row["decode_32k"] = _at_limit(at, "decode_flops", flops_text, longest)
    return row


def _at_limit(p: Any, field: str, text: Any, longest: int) -> dict[str, Any]:
    """A column the model cannot reach: the figure at its own limit where measured, said in the cell (it sorts as
    a blank: a figure at another context), else a blank that says why."""
    v = getattr(p, field, None) if p is not None else None
    if v is None:
        return _cell(None, "—", f"max positions {longest:,}")
    return {"value": None, "text": text(v), "note": f"at {longest:,}, its max positions"}


def blanks(row: dict[str, Any]) -> list[tuple[str, str]]:
    """The index cells of a row left blank, each (column, why)."""
    out = []
    for key, head, _ in COLUMNS:
        c = row[key]
        if c["value"] is None and c["text"] == "—":
            why = c.get("note") or ("no cost figures (its cost stage failed)" if row["failures"] else "not measured")
            out.append((head, why))
    return out


# The index's columns: (row key, heading, numeric); the compare page's figures are the numeric ones.
COLUMNS = (("parameters", "parameters", True), ("active", "active / token", True),
           ("active_wo", "active without input embedding", True), ("layers", "layers", True),
           ("kv_token", "KV / token", True), ("kv_32k", "KV at 32K", True), ("kv_1m", "KV at 1M", True),
           ("decode_32k", "decode FLOPs / token at 32K", True), ("weights", "weight bytes", True))

# The compare page's architecture rows, before the index's figures: (row key, heading).
ARCHITECTURE = (("hidden", "hidden size"), ("layers", "layers"), ("heads", "attention heads"),
                ("kv_heads", "KV heads"), ("head_dim", "head dim"), ("experts", "routed experts"),
                ("top_k", "experts per token (top-k)"), ("active", "active / token"), ("context", "context (max positions)"),
                ("vocab", "vocabulary"), ("kv_token", "KV / token"), ("decode_32k", "decode FLOPs / token at 32K"))

__all__ = ["ARCHITECTURE", "architecture", "blanks", "model_row", "layer_recipe", "attention_kinds", "COLUMNS", "K32", "M1"]

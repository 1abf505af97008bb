"""Views of a comparison (the ``checkpoint`` extra): rows for tables and GitHub annotations (the tables themselves:
archviz.render.checkpoint).

Pure functions of the JSON-able result; nothing here prints (the CLI does).

Every string from the result may come from the checkpoint (tensor names, a manifest's source and revision) or a
rules file (labels): each reaches a table cell as a ``rich.text.Text`` (never parsed as markup) of
:func:`archviz.files.sanitize.printable` text, and a GitHub line through :func:`~archviz.files.sanitize.github_data` /
:func:`~archviz.files.sanitize.github_property`, so no control character or workflow command gets through.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from archviz.files.sanitize import github_data, github_property, printable

from .compact import compress_names

__all__ = ["problem_modules", "checkpoint_only_groups", "note_groups", "summary_rows", "stored_rows", "github_lines"]


#: Module verdicts that do not fail the check: a tensor only one side has, where a rule or the format explains it.
_FINE = ("match", "checkpoint-only", "model-only")


def _n(v: Any) -> str:
    if v is None:
        return "—"
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def problem_modules(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The deepest modules whose verdict is not ``match`` (none of their descendants is also listed), with
    identical rows over layer/expert indices collapsed: ``encoder.layer.{0-5}.intermediate.dense``."""
    modules: Mapping[str, Mapping[str, Any]] = result.get("modules") or {}
    bad = [p for p, v in modules.items() if v.get("verdict") not in _FINE]
    bad_set = set(bad)
    has_bad_child: set[str] = set()
    for p in bad:
        q = p
        while q:
            q = q.rsplit(".", 1)[0] if "." in q else ""
            if q in bad_set:
                if q in has_bad_child:
                    break
                has_bad_child.add(q)
    leaves = [p for p in bad if p not in has_bad_child]
    groups: dict[tuple, list[str]] = {}
    for p in leaves:
        v = modules[p]
        key = (v.get("verdict"), v.get("model"), v.get("checkpoint"), v.get("checkpoint_only", 0),
               tuple(v.get("notes", ())))
        groups.setdefault(key, []).append(p)
    rows = []
    for (verdict, model, ck, ck_only, notes), paths in groups.items():
        for name in compress_names(paths):
            rows.append({"module": name or "(root)", "verdict": verdict, "model": model, "checkpoint": ck,
                         "checkpoint_only": ck_only, "difference": (model or 0) - (ck or 0), "notes": list(notes)})
    return rows


def verdict_line(result: Mapping[str, Any], limit: int = 6) -> str:
    """The check in one line: `checkpoint hf://org/name: match (N tensors)`, or the verdict and the modules that
    differ, each with its verdict (`layers.3: missing`)."""
    s = result.get("summary") if isinstance(result.get("summary"), Mapping) else {}
    t = s.get("tensors") if isinstance(s.get("tensors"), Mapping) else {}
    head = f"checkpoint {result.get('source')}: {result.get('verdict')}"
    if result.get("verdict") == "match":
        return f"{head} ({_tensors(t.get('match', 0))})"
    modules: Mapping[str, Mapping[str, Any]] = result.get("modules") or {}
    verdict = {p: v.get("verdict") for p, v in modules.items() if isinstance(v, Mapping)}
    bad = [p for p, v in verdict.items() if v not in _FINE]
    # the topmost module of each verdict: `model.layers.1: missing`, not each of its tensors
    rows = [{"module": p or "(root)", "verdict": verdict[p]} for p in bad
            if verdict.get(p.rsplit(".", 1)[0] if "." in p else "", None) != verdict[p] or not p]
    rows = [r for r in rows if r["module"] != "(root)"] or rows
    said = ", ".join(f"{r['module']}: {r['verdict']}" for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"{head}: {said}{more}" if rows else head


def checkpoint_only_groups(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Checkpoint-only tensors by kind: how many, their elements, a few example names."""
    out: dict[str, dict[str, Any]] = {}
    for c in result.get("checkpoint_only") or ():
        g = out.setdefault(c["kind"], {"kind": c["kind"], "tensors": 0, "elements": 0, "explained": c["explained"],
                                       "names": []})
        n = int(c.get("count") or 1)
        g["tensors"] += n
        g["elements"] += int(c["elements"]) * n
        g["names"].append((c["name"], f"{c['dtype']} [{', '.join(str(x) for x in c['shape'])}]"))
    for g in out.values():
        by_name = dict(g["names"])
        names = compress_names(n for n, _ in g["names"])
        g["examples"] = [f"{n} ({by_name[n]})" if n in by_name else n for n in names[:3]] + (
            [f"… {len(names) - 3} more"] if len(names) > 3 else [])
        del g["names"]
    return sorted(out.values(), key=lambda g: (g["explained"], -g["elements"]))


def note_groups(result: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Distinct notes of matching tensors (dtype differences, dequantization, fusing) with how many tensors."""
    counts: dict[str, int] = {}
    for e in result.get("tensors") or ():
        if e.get("verdict") == "match" and e.get("note"):
            counts[e["note"]] = counts.get(e["note"], 0) + int(e.get("count") or 1)
    return sorted(counts.items(), key=lambda kv: -kv[1])


def model_only_text(result: Mapping[str, Any], limit: int = 3) -> str:
    """The model-only tensors (the checkpoint's format has no place for them) in a few names, and why."""
    es = [e for e in result.get("tensors") or () if isinstance(e, Mapping) and e.get("verdict") == "model-only"]
    names = compress_names(str(e.get("model")) for e in es)
    whys = sorted({str(e.get("note")) for e in es if e.get("note")})
    return (", ".join(names[:limit]) + (f", … {len(names) - limit} more" if len(names) > limit else "")
            + (" — " + "; ".join(whys) if whys else ""))


def _tensors(n: Any) -> str:
    return f"{_n(n)} tensor{'' if n == 1 else 's'}"


def summary_rows(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    def mapping(v: Any) -> Mapping[str, Any]:  # records written by hand or by another version may differ
        return v if isinstance(v, Mapping) else {}

    s = mapping(result.get("summary"))
    t = mapping(s.get("tensors"))
    kinds = mapping(s.get("checkpoint_only_kinds"))
    rows = [
        ("verdict", str(result.get("verdict"))),
        ("checkpoint", str(result.get("source")) + (f" @ {result['revision'][:12]}" if result.get("revision") else "")),
        ("rules", _n(mapping(mapping(result.get("rules")).get("ruleset")).get("name"))),
        ("model parameters", _n(s.get("model_parameters"))),
        ("checkpoint parameters", _n(s.get("checkpoint_parameters"))),
        ("matched", f"{_n(s.get('matched'))} ({_tensors(t.get('match', 0))})"),
        ("mismatched", f"{_n(s.get('mismatched'))} ({_tensors(t.get('mismatch', 0))})"),
        ("missing from checkpoint", f"{_n(s.get('missing'))} ({_tensors(t.get('missing', 0))})"),
        *((("model-only", f"{_n(s.get('model_only'))} ({_tensors(t['model-only'])}: {model_only_text(result)})"),)
          if t.get("model-only") else ()),
        ("checkpoint-only", f"{_n(s.get('checkpoint_only'))} elements ({_tensors(t.get('checkpoint-only', 0))}"
                            + (": " + ", ".join(f"{v:,} {k}" for k, v in kinds.items()) if kinds else "") + ")"),
        *((k, f"{_n(b)} bytes" + (f" · {bits:.2f} bits a weight" if bits is not None else ""))
          for k, b, bits in stored_rows(result)),
        ("scales paired", _n(mapping(s.get("scales")).get("paired", 0))),
        ("notes", _n(s.get("notes_count"))),
    ]
    return rows


def stored_rows(result: Mapping[str, Any]) -> list[tuple[str, int, float | None]]:
    """What the checkpoint stores for the model's weights (``summary.stored``): ("stored", all bytes, None), then
    one ("  TYPE", bytes, bits a logical weight) per stored type, most bytes first; [] where the check kept no bytes
    (a records file is untrusted: a row that does not read is left out)."""
    s = result.get("summary")
    stored = s.get("stored") if isinstance(s, Mapping) else None
    types = stored.get("types") if isinstance(stored, Mapping) else None
    if not isinstance(types, list):
        return []
    rows: list[tuple[str, int, float | None]] = []
    for t in types:
        if isinstance(t, Mapping) and isinstance(t.get("type"), str) and type(t.get("bytes")) is int \
                and type(t.get("elements")) is int:
            rows.append((f"  {t['type']}", t["bytes"], 8 * t["bytes"] / t["elements"] if t["elements"]
                         else None))
    return [("stored", sum(b for _, b, _ in rows), None), *rows] if rows else []


_escape_data = github_data
_escape_prop = github_property


def github_lines(result: Mapping[str, Any], file: str | None = None, limit: int = 50) -> list[str]:
    """GitHub workflow commands: one ``::error`` per problem module (both counts) and per unexplained
    checkpoint-only group, then a ``::notice`` with the summary."""
    lines = []
    fprop = f"file={_escape_prop(file)}," if file else ""
    rows = problem_modules(result)
    for r in rows[:limit]:
        msg = f"{r['module']}: {r['verdict']}: model {_n(r['model'])} parameters, checkpoint {_n(r['checkpoint'])}"
        if r["checkpoint_only"]:
            msg += f" (+{_n(r['checkpoint_only'])} checkpoint-only)"
        if r["notes"]:
            msg += " — " + "; ".join(r["notes"][:3])
        lines.append(f"::error {fprop}title={_escape_prop('archviz check: ' + str(r['verdict']))}::{_escape_data(msg)}")
    if len(rows) > limit:
        lines.append(f"::error {fprop}title=archviz check::{len(rows) - limit} more modules differ")
    for g in checkpoint_only_groups(result):
        if not g["explained"]:
            msg = (f"{g['tensors']:,} checkpoint tensors ({g['elements']:,} elements) map to no model tensor: "
                   + ", ".join(g["examples"]))
            title = _escape_prop("archviz check: unmapped checkpoint tensors")
            lines.append(f"::error {fprop}title={title}::{_escape_data(msg)}")
    s = result.get("summary") or {}
    msg = (f"{result.get('verdict')}: model {_n(s.get('model_parameters'))} parameters, checkpoint "
           f"{_n(s.get('checkpoint_parameters'))}; matched {_n(s.get('matched'))}, mismatched {_n(s.get('mismatched'))}"
           f", missing {_n(s.get('missing'))}, checkpoint-only {_n(s.get('checkpoint_only'))} elements"
           + (f", model-only {_n(s.get('model_only'))} ({model_only_text(result)})" if s.get("model_only") else ""))
    lines.append(f"::notice {fprop}title=archviz check::{_escape_data(msg)}")
    return lines

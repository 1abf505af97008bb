"""What `archviz.summary`, `inspect`, `cost`, `check` and `diff` return: small typed results that show themselves.

Each is a rich renderable (`rich.print(result)`; `__rich__` gives the CLI's tables), prints as the same text
(`print(result)`), serialises to what the CLI's JSON output prints (`to_json()`: the data, `json()`: the text), and
renders in a Jupyter notebook (`_repr_html_`, archviz.render.notebook: the grouped tree folded, the tables as text).
Built from the functions the CLI commands print with. Pure: no torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from rich.console import Group

from ..errors import PYTHON_WORDS, spelled, spelled_data
from ..records import ModelRecord
from ..records.words import in_words
from . import notebook


class _Shown:
    """The four ways a result shows itself, from `view()` (the CLI's renderable) and `_data()` (the CLI's JSON
    data); the options its notes name (archviz.errors.option) spelled as a Python caller gives them."""

    def view(self) -> Any:
        raise NotImplementedError

    def _data(self) -> Any:
        raise NotImplementedError

    def to_json(self) -> Any:
        """The data the CLI's JSON option prints, as JSON-able values."""
        return spelled_data(self._data(), PYTHON_WORDS)

    def _blocks(self) -> list[str]:
        return [notebook.text_block(self.view())]

    def __rich__(self) -> Any:
        return _Spelled(self.view())

    def __str__(self) -> str:
        return spelled(notebook.plain(self.view()), PYTHON_WORDS)

    def json(self, words: Mapping[str, str] = PYTHON_WORDS) -> str:
        """The JSON text the CLI's JSON option prints, the options its notes name spelled in `words` (the CLI passes
        its flags)."""
        from .jsondump import dumps_indented

        return spelled(dumps_indented(self._data(), 1), words)

    def _repr_html_(self) -> str:
        return spelled(notebook.page(*self._blocks()), PYTHON_WORDS)


class _Spelled:
    """A renderable as rich shows it, the options its text names spelled as a Python caller gives them."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.segment import Segment

        for seg in console.render(self.renderable, options):
            yield seg if seg.control else Segment(spelled(seg.text, PYTHON_WORDS), seg.style)


@dataclass(frozen=True, repr=False)
class SummaryResult(_Shown):
    """`archviz summary`: totals (parameters, active per token, scales, tables, buffers, bytes per dtype); in a
    notebook with the grouped tree below, folded."""

    raw: ModelRecord  # options named by token: its text and JSON spell them

    @property
    def record(self) -> ModelRecord:
        """The records, in a Python caller's words (archviz.records.words)."""
        return in_words(self.raw)

    def view(self) -> Any:
        from .terminal import summary_table

        wrapped = wrapper_line(self.raw)
        return Group(summary_table(self.raw), wrapped) if wrapped is not None else summary_table(self.raw)

    def _data(self) -> Any:
        from .views import summary_json

        wrapper = self.raw.extra("wrapper")
        return {**summary_json(self.raw), **({"wrapper": wrapper} if wrapper else {})}

    def _blocks(self) -> list[str]:
        return [notebook.text_block(self.view()), notebook.tree_html(self.raw, "", open_levels=1)]

    def __repr__(self) -> str:
        return f"<SummaryResult {self.raw.source.name}: {self.raw.summary.parameters:,} parameters>"


def wrapper_line(record: ModelRecord) -> Any:
    """For a model handed in wrapped (`extra("wrapper")`, archviz.sources.live): which wrappers, and the parameters
    as the base model's plus the wrapper's own; None otherwise."""
    from .text import SafeText

    w = record.extra("wrapper")
    if not w:
        return None
    own = w.get("own_parameters", 0)
    return SafeText(f"wrapped by {' around '.join(w.get('wrappers') or ['an adapter'])}: the parameters are the base "
                    f"model's {w.get('base_parameters', 0):,} plus the wrapper's own {own:,}")


@dataclass(frozen=True, repr=False)
class InspectResult(_Shown):
    """`archviz inspect`: a module's card (a `path` given) and the grouped tree below it, `depth` levels."""

    raw: ModelRecord  # grouped; options named by token: its text and JSON spell them
    path: str = ""
    depth: int = 3

    @property
    def record(self) -> ModelRecord:
        """The records, in a Python caller's words (archviz.records.words)."""
        return in_words(self.raw)

    def view(self) -> Any:
        from .grouped import grouped_tree
        from .terminal import module_card, run_notes

        parts = [module_card(self.raw, self.path)] if self.path else []
        parts.append(grouped_tree(self.raw, self.path, self.depth))
        notes = run_notes(self.raw) if not self.path else None
        return Group(*parts, *([notes] if notes is not None else []))

    def _data(self) -> Any:
        from .views import module_json

        return module_json(self.raw, self.path)

    def _blocks(self) -> list[str]:
        from .terminal import module_card

        card = [notebook.text_block(module_card(self.raw, self.path))] if self.path else []
        return [*card, notebook.tree_html(self.raw, self.path, open_levels=self.depth)]

    def __repr__(self) -> str:
        return f"<InspectResult {self.raw.source.name} {self.path or '(model)'}>"


@dataclass(frozen=True, repr=False)
class CostResult(_Shown):
    """`archviz cost`: prefill and decode FLOPs, KV cache, memory; two models side by side with B / A."""

    raw_records: tuple[ModelRecord, ...]  # options named by token: its text and JSON spell them
    raw_reports: tuple[Any, ...]  # archviz.cost.report.CostReport, one per record, as raw

    @property
    def records(self) -> tuple[ModelRecord, ...]:
        """The records, in a Python caller's words (archviz.records.words)."""
        return tuple(map(in_words, self.raw_records))

    @property
    def reports(self) -> tuple[Any, ...]:
        """The cost reports, in a Python caller's words."""
        return spelled_data(self.raw_reports, PYTHON_WORDS)

    @property
    def report(self) -> Any:
        return self.reports[0]

    def view(self) -> Any:
        from .cost import compare_table, cost_tables

        return cost_tables(self.raw_reports[0]) if len(self.raw_reports) == 1 else compare_table(*self.raw_reports)

    def _data(self) -> Any:
        return cost_json(list(self.raw_records), list(self.raw_reports))

    def __repr__(self) -> str:
        return f"<CostResult {', '.join(r.name for r in self.raw_reports)}>"


def cost_json(records: list[ModelRecord], reports: list[Any], bounds: list[list[Any]] | None = None) -> Any:
    """What `archviz cost`'s JSON prints: one model's report and per-node FLOPs (and hardware bounds, given), or two
    side by side with their ratios."""
    from ..cost.bounds import bound_json
    from ..cost.per_node import nodes_json
    from ..cost.report import report_json

    sides = [{**report_json(r), "nodes": nodes_json(rec), **({"hardware": [bound_json(h) for h in hb]}
                                                               if bounds else {})}
             for r, rec, hb in zip(reports, records, bounds or [[] for _ in records])]
    return sides[0] if len(sides) == 1 else {"a": sides[0], "b": sides[1], "ratio": ratios(reports[0], reports[1])}


def ratios(a: Any, b: Any) -> dict[str, float | None]:
    """B / A of two cost reports' headline figures."""
    def r(x: float | None, y: float | None) -> float | None:
        return None if x is None or y is None or not x else y / x

    return {"prefill_flops": r(a.prefill.flops, b.prefill.flops),
            "decode_flops": r(a.decode.flops if a.decode else None, b.decode.flops if b.decode else None),
            "kv_per_token": r(a.kv.per_token, b.kv.per_token), "kv_at_context": r(a.kv.at_context, b.kv.at_context),
            "weights": r(a.memory.weights, b.memory.weights), "serving": r(a.memory.serving, b.memory.serving)}


@dataclass(frozen=True, repr=False)
class CheckResult(_Shown):
    """`archviz check`: the model against a checkpoint's headers, a verdict per tensor and module."""

    raw: ModelRecord  # with the checkpoint extra; options named by token: its text and JSON spell them
    raw_result: dict[str, Any]  # the check's verdicts, as raw
    limit: int = 40  # rows per table

    @property
    def record(self) -> ModelRecord:
        """The records, in a Python caller's words (archviz.records.words)."""
        return in_words(self.raw)

    @property
    def result(self) -> dict[str, Any]:
        """The check's verdicts, in a Python caller's words."""
        return spelled_data(self.raw_result, PYTHON_WORDS)

    @property
    def verdict(self) -> str:
        return self.raw_result["verdict"]

    def view(self) -> Any:
        return check_view(self.raw_result, self.limit)

    def _data(self) -> Any:
        return self.raw_result

    def __repr__(self) -> str:
        return f"<CheckResult {self.raw.source.name}: {self.verdict}>"


def check_view(result: dict[str, Any], limit: int = 40) -> Group:
    """The tables `archviz check` prints: the summary, the modules with problems, the checkpoint's own groups, notes."""
    from ..checkpoint.report import checkpoint_only_groups, note_groups, problem_modules
    from .checkpoint import checkpoint_only_table, notes_table, problems_table, summary_table

    parts = [summary_table(result)]
    rows = problem_modules(result)
    if rows:
        parts.append(problems_table(rows, limit))
    groups = checkpoint_only_groups(result)
    if groups:
        parts.append(checkpoint_only_table(groups))
    notes = note_groups(result)
    if notes:
        parts.append(notes_table(notes, min(limit, 12)))
    return Group(*parts)


@dataclass(frozen=True, repr=False)
class DiffResult(_Shown):
    """`archviz diff`: what changed from model A to model B, folded as the explorer groups."""

    diff: Any  # archviz.diff.ModelDiff
    limit: int = 40  # rows of the changes table

    @property
    def identical(self) -> bool:
        return self.diff.identical

    def view(self) -> Any:
        from .diff import diff_view

        return diff_view(self.diff, self.limit)

    def _data(self) -> Any:
        from ..diff.export import to_json

        return to_json(self.diff)

    def __repr__(self) -> str:
        return f"<DiffResult {'identical' if self.identical else 'different'}>"


__all__ = ["SummaryResult", "InspectResult", "CostResult", "CheckResult", "DiffResult", "cost_json", "check_view",
           "ratios", "wrapper_line"]

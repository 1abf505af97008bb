"""What `archviz.diff.diff` returns: small frozen records, pure data (no torch), JSON-able by `export.to_json`."""

from __future__ import annotations

from dataclasses import dataclass

# What a diff can compare, each of which `ignore` can leave out. The order is the order reports list them in.
ASPECTS = (
    "structure",     # modules added or removed (subtrees, with their parameter totals)
    "renames",       # a module matched under another path (by a rename rule or by its structure)
    "class",         # class name and the module it is defined in
    "tensors",       # own tensors: name, kind, shape, dtype, logical elements, packing, persistence, aliasing
    "attributes",    # scalar attributes set in __init__
    "shapes",        # input/output shapes and dtypes of the forward calls, and whether forward ran the module
    "call-sites",    # the code of each call site in the parent's forward
    "lines",         # where the code is: files and lines of the class/__init__/forward spans and call sites,
    #                  file:line in notes
    "multiplicity",  # how many the grouping folds the module into (× 2 groups × 5 layers)
    "kernels",       # stubbed kernels the forward called
    "dims",          # the names of widths (8192 = n_groups × o_lora_rank)
    "doc",           # the class docstring's first paragraph
    "notes",         # assumptions the meta pass made on the module
    "totals",        # the model's totals: parameters, active, scales, tables, buffers, bytes per dtype, modules
)

# How a pair of modules was matched.
BY_PATH = "path"  # the same path in both
BY_RULE = "rule"  # a rename rule maps one path onto the other
BY_STRUCTURE = "structure"  # the same subtree (classes, tensors, children) under another name
WITHIN = "within"  # the same relative path under a pair matched by rule or structure


@dataclass(frozen=True, slots=True)
class Change:
    """One difference of one matched module: `what` changed from `before` to `after` (text; None: absent)."""

    aspect: str  # one of ASPECTS
    what: str  # e.g. "class", "tensor weight", "call site 1", "outputs"
    before: str | None
    after: str | None
    parameters: int = 0  # the parameter delta this change makes (B - A), own tensors only


@dataclass(frozen=True, slots=True)
class Pair:
    """Two modules matched: `a` in model A, `b` in model B."""

    a: str
    b: str
    how: str  # BY_PATH | BY_RULE | BY_STRUCTURE | WITHIN
    rule: str = ""  # the ruleset whose renames matched them (BY_RULE)


@dataclass(frozen=True, slots=True)
class NodeDiff:
    """A matched module that differs in what was compared."""

    a: str
    b: str
    how: str
    changes: tuple[Change, ...]
    parameters: int  # own-tensor parameter delta (B - A)


@dataclass(frozen=True, slots=True)
class Subtree:
    """A module of one model that matches nothing in the other, with its whole subtree."""

    side: str  # "added" (in B only) or "removed" (in A only)
    path: str
    class_name: str
    parameters: int
    scale_elements: int
    buffer_elements: int
    bytes: int
    modules: int  # modules in the subtree, itself included


@dataclass(frozen=True, slots=True)
class Delta:
    """One model total in A and in B (None where a model has no such figure)."""

    name: str  # "parameters", "active parameters", "bytes bfloat16", ...
    a: int | None
    b: int | None

    @property
    def delta(self) -> int | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def differs(self) -> bool:
        """Both models have the figure, and it differs (a figure only one side has, such as the FLOPs of a records
        file from `archviz cost -o`, is shown, not counted: the diff says it was not compared)."""
        return self.a is not None and self.b is not None and self.a != self.b


@dataclass(frozen=True, slots=True)
class Folded:
    """Differences that read once for many modules, as the explorer groups them: the same change in every layer of
    a kind, or the same subtree added to each of them, with the parameter delta multiplied out."""

    kind: str  # "changed" | "renamed" | "added" | "removed"
    a: tuple[str, ...]  # path patterns in A (layers.{0-42}.attn); () for "added"
    b: tuple[str, ...]  # path patterns in B; () for "removed"
    count: int  # modules folded
    multiplicity: str  # "× 43 layers", "× 2 groups × 5 layers"; "" for one module
    class_name: str  # A's class (B's for "added")
    changes: tuple[Change, ...]  # one module's changes ("changed", "renamed")
    parameters_each: int  # parameter delta of one module (its subtree for "added" / "removed")
    parameters: int  # the delta of all of them: parameters_each × count
    how: str = ""  # for "renamed": BY_RULE or BY_STRUCTURE
    rule: str = ""


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One config key whose value differs (None: the key is absent on that side); values as JSON text."""

    key: str
    a: str | None
    b: str | None


@dataclass(frozen=True, slots=True)
class Stack:
    """A list of blocks at the model's top (`model.layers`, `mtp`): how many items each side holds (0: absent), and
    the main list's layer kinds ("1 dense + 2 MoE")."""

    path: str
    a: int
    b: int
    kinds_a: str = ""
    kinds_b: str = ""


@dataclass(frozen=True, slots=True)
class Summary:
    """What a diff says first (archviz.diff.summary): config keys changed, layers per stack, the headline totals, and
    how many modules moved in the source only."""

    config: tuple[ConfigChange, ...]
    stacks: tuple[Stack, ...]
    totals: tuple[Delta, ...]  # the headline totals that both sides have (differing or not)
    lines_only: int  # modules whose only change is where their code sits (files and line numbers)


@dataclass(frozen=True, slots=True)
class ModelDiff:
    """The difference between two models' records."""

    a: str  # the two sources as given
    b: str
    a_name: str
    b_name: str
    compared: tuple[str, ...]  # ASPECTS compared
    ignored: tuple[str, ...]  # ASPECTS left out (ignore)
    matched: int  # module pairs
    modules_a: int
    modules_b: int
    renamed: tuple[Pair, ...]  # the top pairs matched under another path (their descendants follow them)
    nodes: tuple[NodeDiff, ...]  # matched modules that differ, in A's order
    added: tuple[Subtree, ...]  # top modules of B matching nothing in A
    removed: tuple[Subtree, ...]  # top modules of A matching nothing in B
    totals: tuple[Delta, ...]
    folded: tuple[Folded, ...]  # the above, grouped
    notes: tuple[str, ...] = ()  # what could not be compared, and why
    summary: Summary | None = None  # what reads first

    @property
    def identical(self) -> bool:
        """Whether the two models agree in everything compared."""
        return not (self.nodes or self.added or self.removed or self.renamed
                    or ("totals" in self.compared and any(d.differs for d in self.totals)))


__all__ = ["ASPECTS", "BY_PATH", "BY_RULE", "BY_STRUCTURE", "WITHIN", "Change", "Pair", "NodeDiff", "Subtree",
           "Delta", "Folded", "ModelDiff", "ConfigChange", "Stack", "Summary"]

"""The modules of a compact records file (`archviz.records/2`), expanded only where a command reads them.

A model's 60,000 modules are a few dozen distinct field values told apart by path: `inspect layer 3` reads a few
hundred of them, `summary` a handful. `CompactModules` is the tuple of `ModuleRecord`s that `ModelRecord.modules`
holds, but it keeps the file's rows (every field an index into the decoded distinct values) and makes a record the
first time it is asked for. What every module has to be scanned for (class names, tensors, attributes, kernels, the
tree) is read from the rows as columns of shared values (`column`, `child_rows`), without making a record.

The whole file is checked when it is read (`from_rows`): every row's parent, name and cell count, and every index in
range of its field's values, so expanding a module later cannot fail. Equality, hashing and iteration are those of
the tuple it stands for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .records import ModuleRecord

_item = list.__getitem__


class CompactModules(Sequence):
    """Pre-order modules of a records/2 file: rows of value indices, a `ModuleRecord` made on first access."""

    __slots__ = ("_rows", "_tables", "_paths", "_below", "_made", "_rowof", "_columns", "_kids", "_make_record",
                 "_fields", "_defaults", "_children")

    def __init__(self, rows: list[list[int]], tables: list[list[Any]], paths: list[str], below: list[list[int]],
                 make: Callable[..., ModuleRecord], fields: tuple[str, ...], defaults: tuple[Any, ...]):
        self._rows = rows  # [parent, name, i_0, i_1, ...] per module, checked by from_rows
        self._tables = tables  # per field (`fields` order, maybe cut short), its decoded distinct values
        self._paths = paths
        self._below = below  # each row's child rows, in row order
        self._made: list[ModuleRecord | None] = [None] * len(rows)
        self._rowof: dict[str, int] | None = None
        self._columns: dict[str, list[Any]] = {}
        self._kids: list[list[int]] | None = None
        self._make_record = make  # ModuleRecord (path, then `fields` in order; this module imports no records)
        self._fields = fields
        self._defaults = defaults  # each field's default, for a file written before it existed
        self._children = fields.index("children")

    # -- the tuple it stands for ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self._rows))))
        m = self._made[i]
        if m is None:
            if i < 0:
                i += len(self._rows)
            m = self._made[i] = self._make(i)
        return m

    def _make(self, i: int) -> ModuleRecord:
        row = self._rows[i]
        vals = list(map(_item, self._tables, row[2:]))
        path = self._paths[i]
        k = self._children
        children = vals[k]
        if children:
            prefix = f"{path}." if path else ""
            vals[k] = tuple([prefix + c for c in children])
        return self._make_record(path, *vals)

    def __iter__(self) -> Iterator[ModuleRecord]:
        made = self._made
        for i in range(len(made)):
            yield made[i] or self[i]

    def __reversed__(self) -> Iterator[ModuleRecord]:
        for i in range(len(self._made) - 1, -1, -1):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, CompactModules) and other._rows is self._rows and other._tables is self._tables:
            return True
        if isinstance(other, (tuple, CompactModules)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Any) -> tuple:
        return tuple(self) + tuple(other)

    def __radd__(self, other: Any) -> tuple:
        return tuple(other) + tuple(self)

    def __repr__(self) -> str:
        return f"CompactModules({len(self._rows)} modules, {sum(m is not None for m in self._made)} expanded)"

    def __reduce__(self) -> tuple:
        return (CompactModules, (self._rows, self._tables, self._paths, self._below, self._make_record, self._fields,
                                 self._defaults))

    # -- what a scan of every module reads, without making records ------------------------------------------------

    @property
    def paths(self) -> list[str]:
        return self._paths

    def index(self) -> LazyIndex:
        """path -> module, each made when it is looked up (`ModelRecord.index()`)."""
        return LazyIndex(self)

    def expanded(self) -> int:
        """How many modules have been made into records so far (tests check that a command reads only some)."""
        return sum(m is not None for m in self._made)

    def row_of(self, path: str) -> int | None:
        if self._rowof is None:
            self._rowof = {p: i for i, p in enumerate(self._paths)}
        return self._rowof.get(path)

    def column(self, field: str) -> list[Any]:
        """Field `field` of every module, in order (the values are shared between modules that hold equal ones; the
        list is kept for the next caller: read it, do not change it). `children` gives names relative to the module
        (see `child_rows` for the rows they are)."""
        col = self._columns.get(field)
        if col is None:
            k = self._fields.index(field)
            if k < len(self._tables):
                table = self._tables[k]
                col = [table[r[k + 2]] for r in self._rows]
            else:  # a file written before the field existed: its default
                col = [self._defaults[k]] * len(self._rows)
            self._columns[field] = col
        return col

    def child_rows(self) -> list[list[int]]:
        """Each module's children as rows, in the order of its `children`."""
        if self._kids is None:
            kids = self._below
            names = self.column("children")
            for i, ks in enumerate(kids):  # pre-order lists children in their order; a file that does not is
                nm = names[i]  # read by name
                if (ks or nm) and (len(ks) != len(nm) or any(self._rows[k][1] != n for k, n in zip(ks, nm))):
                    kids[i] = [self._by_name(i, n) for n in nm]
            self._kids = kids
        return self._kids

    def _by_name(self, i: int, name: str) -> int:
        path = self._paths[i]
        row = self.row_of(f"{path}.{name}" if path else name)
        if row is None or row <= i:
            raise ValueError(f"module row {i}: {path or '(root)'} lists a child {name!r} that is no row below it")
        return row


class LazyIndex(Mapping):
    """`ModelRecord.index()` of compact modules: path -> ModuleRecord, each made when looked up."""

    __slots__ = ("_modules",)

    def __init__(self, modules: CompactModules):
        self._modules = modules

    def __getitem__(self, path: str) -> ModuleRecord:
        i = self._modules.row_of(path) if type(path) is str else None
        if i is None:
            raise KeyError(path)
        return self._modules[i]

    def __contains__(self, path: object) -> bool:
        return type(path) is str and self._modules.row_of(path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules.paths)

    def __len__(self) -> int:
        return len(self._modules)


def from_rows(rows: Any, tables: list[list[Any]], make: Callable[..., ModuleRecord], fields: tuple[str, ...],
              defaults: tuple[Any, ...]) -> CompactModules:
    """The module rows of a records/2 file (`tables`: the decoded values of the first len(tables) of `fields`),
    checked whole: ValueError naming the first bad row or cell."""
    if not isinstance(rows, list) or not rows:
        raise ValueError("records/2 `modules` is not a non-empty list of rows")
    n = len(tables) + 2
    if any(type(r) is not list for r in rows) or set(map(len, rows)) != {n}:
        bad = next(i for i, r in enumerate(rows) if type(r) is not list or len(r) != n)
        raise ValueError(f"module row {bad}: not a list of {n} cells")
    columns = list(zip(*rows))
    for k, (col, table) in enumerate(zip(columns[2:], tables)):
        if set(map(type, col)) != {int} or min(col) < 0 or max(col) >= len(table):
            bad = next(i for i, x in enumerate(col) if type(x) is not int or not 0 <= x < len(table))
            raise ValueError(f"module row {bad}: {fields[k]} index {col[bad]!r} is not one of its "
                             f"{len(table)} values")
    for v in tables[fields.index("children")]:
        if not (isinstance(v, tuple) and all(type(c) is str and c for c in v)):
            raise ValueError(f"records/2 children value {v!r} is not a list of names")
    paths: list[str] = [""]
    below: list[list[int]] = [[] for _ in rows]
    append = paths.append
    for i, parent, name in zip(range(1, len(rows)), columns[0][1:], columns[1][1:]):
        if type(parent) is not int or not 0 <= parent < i or type(name) is not str or not name:
            raise ValueError(f"module row {i}: parent {parent!r} is not an earlier row, or its name {name!r} is empty")
        head = paths[parent]
        append(f"{head}.{name}" if head else name)
        below[parent].append(i)
    modules = CompactModules(rows, tables, paths, below, make, fields, defaults)
    modules.child_rows()  # every child named is a row below its module
    return modules


__all__ = ["CompactModules", "LazyIndex", "from_rows"]

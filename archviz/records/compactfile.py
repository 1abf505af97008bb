"""The compact records file (`archviz.records/3`): its modules, made only where a command reads them, and, for the
writer, each field's distinct values.

A model's 60,000 modules are a few dozen distinct field values told apart by path: `inspect layer 3` reads a few
hundred of them, `summary` none. `CompactModules` is the tuple of `ModuleRecord`s that `ModelRecord.modules` holds,
but it keeps what the file holds (each module's parent, name and row: every field an index into the decoded distinct
values, the distinct rows once) and makes a record the first time it is asked for. What every module has to be
scanned for (class names, tensors, attributes, kernels, the tree) is read as columns of shared values (`column`,
`child_rows`, `row_ids`), without making a record.

The whole file is checked when it is read (`from_columns`): every module's parent, name and row, every
index in range of its field's values, every child named a module below, so making a module later cannot fail.
Equality, hashing and iteration are those of the tuple it stands for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

Record = Any  # a ModuleRecord (records.types), made by the caller's `make`: this module imports no records, not even
# for its annotations, so the two modules form no circle

_item = list.__getitem__


class CompactModules(Sequence):
    """Pre-order modules of a compact file: each a parent, a name and a row of value indices (the distinct rows held
    once), a `ModuleRecord` made on first access."""

    __slots__ = ("_parents", "_names", "_row", "_rows", "_tables", "_paths", "_below", "_made", "_rowof", "_columns",
                 "_kids", "_make_record", "_fields", "_defaults", "_children")

    def __init__(self, parents: list[int], names: list[str], row: list[int], rows: list[list[int]],
                 tables: list[list[Any]], paths: list[str], below: list[list[int]], make: Callable[..., Record],
                 fields: tuple[str, ...], defaults: tuple[Any, ...]):
        self._parents = parents  # per module, checked by from_columns: its parent's position (-1: the root)
        self._names = names  # its name in its parent
        self._row = row  # the index of its row in `rows`
        self._rows = rows  # distinct rows: per field (`fields` order, maybe cut short), an index into its values
        self._tables = tables  # per field, its decoded distinct values
        self._paths = paths
        self._below = below  # each module's child positions, in position order
        self._made: list[Record | None] = [None] * len(parents)
        self._rowof: dict[str, int] | None = None
        self._columns: dict[str, list[Any]] = {}
        self._kids: list[list[int]] | None = None
        self._make_record = make  # ModuleRecord (path, then `fields` in order; this module imports no records)
        self._fields = fields
        self._defaults = defaults  # each field's default, for a file written before it existed
        self._children = fields.index("children")

    # -- the tuple it stands for ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._parents)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self._parents))))
        m = self._made[i]
        if m is None:
            if i < 0:
                i += len(self._parents)
            m = self._made[i] = self._make(i)
        return m

    def _make(self, i: int) -> Record:
        vals = list(map(_item, self._tables, self._rows[self._row[i]]))
        path = self._paths[i]
        k = self._children
        children = vals[k]
        if children:
            prefix = f"{path}." if path else ""
            vals[k] = tuple([prefix + c for c in children])
        return self._make_record(path, *vals)

    def __iter__(self) -> Iterator[Record]:
        made = self._made
        for i in range(len(made)):
            yield made[i] or self[i]

    def __reversed__(self) -> Iterator[Record]:
        for i in range(len(self._made) - 1, -1, -1):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if self is other:
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
        return f"CompactModules({len(self)} modules, {self.expanded()} made)"

    def __reduce__(self) -> tuple:
        return (CompactModules, (self._parents, self._names, self._row, self._rows, self._tables, self._paths,
                                 self._below, self._make_record, self._fields, self._defaults))

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

    def tree(self) -> tuple[list[int], list[str]]:
        """Each module's parent position (-1: the root) and its name in its parent."""
        return self._parents, self._names

    def row_of(self, path: str) -> int | None:
        """The position of the module at `path` (None: no such module)."""
        if self._rowof is None:
            self._rowof = {p: i for i, p in enumerate(self._paths)}
        return self._rowof.get(path)

    def row_ids(self) -> list[int]:
        """Each module's distinct row: modules with the same one hold equal values in every field but the path (and
        children, which are named relative to the module, are the same names)."""
        return self._row

    def column(self, field: str) -> list[Any]:
        """Field `field` of every module, in order (the values are shared between modules that hold equal ones; the
        list is kept for the next caller: read it, do not change it). `children` gives names relative to the module
        (see `child_rows` for the positions they are)."""
        col = self._columns.get(field)
        if col is None:
            k = self._fields.index(field)
            if k < len(self._tables):
                table = self._tables[k]
                per_row = [table[r[k]] for r in self._rows]
                col = [per_row[j] for j in self._row]
            else:  # a file written before the field existed: its default
                col = [self._defaults[k]] * len(self._parents)
            self._columns[field] = col
        return col

    def child_rows(self) -> list[list[int]]:
        """Each module's children as positions, in the order of its `children`."""
        if self._kids is None:
            kids = self._below
            names = self.column("children")
            own = self._names
            for i, ks in enumerate(kids):  # pre-order lists children in their order; a file that does not is
                nm = names[i]  # read by name
                if (ks or nm) and (len(ks) != len(nm) or any(own[k] != n for k, n in zip(ks, nm))):
                    kids[i] = [self._by_name(i, n) for n in nm]
            self._kids = kids
        return self._kids

    def _by_name(self, i: int, name: str) -> int:
        path = self._paths[i]
        at = self.row_of(f"{path}.{name}" if path else name)
        if at is None or at <= i:
            raise ValueError(f"module {i} ({path or 'the root'}) lists a child {name!r} that is no module below it")
        return at


class LazyIndex(Mapping):
    """`ModelRecord.index()` of compact modules: path -> ModuleRecord, each made when looked up."""

    __slots__ = ("_modules",)

    def __init__(self, modules: CompactModules):
        self._modules = modules

    def __getitem__(self, path: str) -> Record:
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


def _check_rows(rows: list, tables: list[list[Any]], fields: tuple[str, ...]) -> None:
    n = len(tables)
    for j, r in enumerate(rows):
        if type(r) is not list or len(r) != n:
            raise ValueError(f"row {j}: not a list of {n} value indices")
        for k, (x, table) in enumerate(zip(r, tables)):
            if type(x) is not int or not 0 <= x < len(table):
                raise ValueError(f"row {j}: {fields[k]} index {x!r} is not one of its {len(table)} values")
    for v in tables[fields.index("children")]:
        if not (isinstance(v, tuple) and all(type(c) is str and c for c in v)):
            raise ValueError(f"children value {v!r} is not a list of names")


def from_columns(parents: Any, names: Any, row: Any, rows: Any, tables: list[list[Any]],
                 make: Callable[..., Record], fields: tuple[str, ...], defaults: tuple[Any, ...]
                 ) -> CompactModules:
    """The modules of a version 3 file: `parents`, `names` and `row` per module in pre-order, `rows` the distinct rows
    of value indices into `tables` (the decoded values of the first len(tables) of `fields`). Checked whole:
    ValueError naming the first bad module or row."""
    if not (type(parents) is list and type(names) is list and type(row) is list and type(rows) is list):
        raise ValueError("`modules` is not three lists (parent, name, row)")
    if not parents or not len(parents) == len(names) == len(row):
        raise ValueError(f"`modules` lists {len(parents)} parents, {len(names)} names and {len(row)} rows: not one "
                         "of each per module")
    _check_rows(rows, tables, fields)
    if set(map(type, row)) != {int} or min(row) < 0 or max(row) >= len(rows):
        bad = next(i for i, x in enumerate(row) if type(x) is not int or not 0 <= x < len(rows))
        raise ValueError(f"module {bad}: row {row[bad]!r} is not one of the {len(rows)} rows")
    paths: list[str] = [""]
    below: list[list[int]] = [[] for _ in parents]
    append = paths.append
    for i, parent, name in zip(range(1, len(parents)), parents[1:], names[1:]):
        if type(parent) is not int or not 0 <= parent < i or type(name) is not str or not name:
            raise ValueError(f"module {i}: parent {parent!r} is not an earlier module, or its name {name!r} is empty")
        head = paths[parent]
        append(f"{head}.{name}" if head else name)
        below[parent].append(i)
    modules = CompactModules(parents, names, row, rows, tables, paths, below, make, fields, defaults)
    modules.child_rows()  # every child named is a module below its own
    return modules


def rows_once(indices: tuple[list[int], ...]) -> tuple[list[list[int]], list[int]]:
    """Each field's index per module (`indices[k][i]`) as version 3 holds them: the distinct rows once, in module
    order, and each module's row."""
    distinct: dict[tuple, int] = {}
    row = [distinct.setdefault(key, len(distinct)) for key in zip(*indices)]
    return [list(key) for key in distinct], row


# -- writing: each field's distinct values ----------------------------------------------------------------------------

def _key(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:  # attributes holding lists
        return ("\0repr", type(v).__name__, repr(v))


# Fields told apart first by the objects they are or hold (the walk and the pass share equal records between modules;
# a frozen dataclass hashes in Python, on every call), equal values of other objects merged after by `_key`; the
# other fields' values (strings, tuples of them) are their own keys, hashed in C.
BY_ID: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(("totals", "own", "class_span", "init_span", "forward_span", "flow"), id),
    **dict.fromkeys(("tensors", "calls", "call_sites"), lambda v: tuple(map(id, v)))}


def column_values(column: list[Any], by_id: Callable[[Any], Any] | None, enc: Callable[[Any], Any] | None) -> tuple:
    """(a field's distinct values in the order first seen, encoded; each module's index into them), as one `_key(v)`
    lookup per module gives (the modules own the objects meanwhile: an id stays its object's)."""
    keys = column if by_id is None else list(map(by_id, column))
    try:
        first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))  # each key's first module
    except TypeError:  # attributes holding lists
        keys = list(map(_key, column))
        first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
    values: list[Any] = []
    merged: dict[Any, int] = {}
    at: dict[Any, int] = {}
    for i in sorted(first.values()):  # the distinct keys, in module order
        v = column[i]
        j = merged.setdefault(_key(v) if by_id is not None else keys[i], len(values))
        if j == len(values):
            values.append(enc(v) if enc is not None and v is not None else v)
        at[keys[i]] = j
    return values, list(map(at.__getitem__, keys))


__all__ = ["BY_ID", "CompactModules", "LazyIndex", "column_values", "from_columns", "rows_once"]

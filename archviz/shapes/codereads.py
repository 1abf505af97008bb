"""What a block's forward code reads that no watch of its modules sees, so that the block memo stays sound
(archviz/shapes/memo.py). Reads through the block's modules -- `self.x`, `getattr(self, name)`, `vars(self)`,
`self.__dict__`, a class default, a buffer's values -- are watched as the forward runs (archviz/shapes/attrreads.py);
state outside them is not: a module-level or closure value. That state is read from the code itself (its source, or
its bytecode where no source is found): the forwards of the block's classes, the methods they call on `self` and
the model's functions they call (of the class's module, or of files not installed), transitively. Three kinds of
read part the blocks:
- `indexed`: a module-level list or tuple the code subscripts (`WINDOWS[self.layer_id]`): C code reads the index, so
  the memo takes each layer number the forward read as decided by its value (as for a list the block holds);
- `state`: a module-level object of the model's own class whose attributes the code reads or sets (`shared.kv =
  self.kv_cache`, a slot one layer hands the next): the memo keys a block by what such objects hold when it is
  called, and a block answered from another sets in them what the other's run set;
- `opaque`: a read whose key no watch can see and which may differ per layer or per call -- `id(...)` or `hash(...)`
  (a dict keyed by `id(self)`), `globals()`, other state the code writes (`global`/`nonlocal`, an item stored into
  or a mutating method called on a module-level container, a module's attribute set). A block whose code does this
  is run every time, never answered from another (the pass notes which and why).
Functions of torch, of archviz and of installed packages other than the class's own module are not read: their
state is not the model's."""

from __future__ import annotations

import ast
import builtins
import collections.abc
import dataclasses
import dis
import functools
import inspect
import os
import sys
import textwrap
import types
from typing import Any, Iterable

_MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault", "add",
                       "discard", "remove", "appendleft", "popleft", "extendleft", "__setitem__", "__delitem__"})
_KEYS = {"id": "id()", "hash": "hash()", "globals": "globals()"}  # builtins whose answer differs per object
_MUTABLE = (collections.abc.MutableMapping, collections.abc.MutableSequence, collections.abc.MutableSet,
            bytearray)
_MISSING = object()
_NOT_MODELS = ("torch", "archviz", "builtins", "functools", "typing", "abc")


@dataclasses.dataclass(frozen=True)
class CodeReads:
    """What the code of a block's classes reads outside its modules (see the module's docstring)."""
    opaque: str | None = None  # why the block is run every time ("id() in Block._extra, model.py:52"), or None
    indexed: tuple[Any, ...] = ()  # module-level and closure lists/tuples the code subscripts
    # module-level objects of the model's own classes whose attributes the code reads or sets (a slot one layer
    # hands the next: `shared.kv = self.kv_cache`): keyed by what they hold, and what a run set replayed
    state: tuple[Any, ...] = ()


@dataclasses.dataclass
class _Found:
    opaque: str | None = None
    indexed: list[Any] = dataclasses.field(default_factory=list)
    state: list[Any] = dataclasses.field(default_factory=list)
    methods: set[str] = dataclasses.field(default_factory=set)  # names called on `self`
    functions: list[Any] = dataclasses.field(default_factory=list)  # outer functions called


_BY_CLASS: dict[type, CodeReads] = {}
_BY_FUNCTION: dict[Any, _Found] = {}


def code_reads(classes: Iterable[type]) -> CodeReads:
    """The reads of the code of `classes` (a block's modules' classes), combined."""
    return _combined(_BY_CLASS[cls] if cls in _BY_CLASS else _BY_CLASS.setdefault(cls, _class_reads(cls))
                     for cls in dict.fromkeys(classes))


def _combined(parts: Iterable[Any]) -> CodeReads:
    opaque, indexed, state = None, {}, {}
    for found in parts:
        opaque = opaque or found.opaque
        indexed.update((id(v), v) for v in found.indexed)
        state.update((id(v), v) for v in found.state)
    return CodeReads(opaque, tuple(indexed.values()), tuple(state.values()))


def _package(module_name: str | None) -> str:
    return (module_name or "").partition(".")[0]


def _models(fn: Any, module: str) -> bool:
    """Whether `fn` is the model's code: a Python function of the class's own module, or of a file that is not an
    installed package (a model file and the files beside it); a library's helpers keep no per-layer state."""
    if not isinstance(fn, types.FunctionType):
        return False
    name = getattr(fn, "__module__", None) or ""
    top = _package(name)
    if top in _NOT_MODELS or top in sys.stdlib_module_names:
        return False
    return name == module or not any(d in fn.__code__.co_filename for d in ("site-packages", "dist-packages"))


def _class_reads(cls: type) -> CodeReads:
    """Start at the forwards (and `__call__`s) the class defines, follow the methods called on `self` and the
    model's functions called by name (`_models`)."""
    queue = [fn for c in cls.__mro__ for name in ("forward", "__call__") if (fn := _function(c.__dict__.get(name)))]
    seen: set[Any] = set()
    parts = []
    while queue:
        fn = queue.pop()
        if fn in seen or not _models(fn, cls.__module__):
            continue
        seen.add(fn)
        found = _BY_FUNCTION.get(fn)
        if found is None:
            found = _BY_FUNCTION[fn] = _function_reads(fn)
        parts.append(found)
        queue.extend(found.functions)
        queue.extend(f for name in found.methods for c in cls.__mro__ if (f := _function(c.__dict__.get(name))))
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is not None:
            queue.append(_function(wrapped))
    return _combined(parts)


def _init_of(cls: type) -> Any:
    """A function of `cls`'s own (where its code lives), or None."""
    return next((f for f in vars(cls).values() if isinstance(f, types.FunctionType)), None)


def _function(obj: Any) -> Any:
    """The Python function behind a class member (a staticmethod, classmethod or property's getter), or None."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    elif isinstance(obj, property):
        obj = obj.fget
    return obj if isinstance(obj, types.FunctionType) else None


def _outer(fn: types.FunctionType, name: str) -> Any:
    """The value `name` has for `fn` where it is not one of its locals: closure, module, builtins."""
    code = fn.__code__
    if name in code.co_freevars and fn.__closure__:
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:
            return _MISSING
    if name in fn.__globals__:
        return fn.__globals__[name]
    return getattr(builtins, name, _MISSING)


def _where(fn: types.FunctionType, line: int) -> str:
    return f"{fn.__qualname__}, {os.path.basename(fn.__code__.co_filename)}:{line}"


def _function_reads(fn: types.FunctionType) -> _Found:
    try:  # the function's own code (`getsource(fn)` would give the function a decorator wraps)
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn.__code__)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return _bytecode_reads(fn)
    node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))),
                None)
    if node is None:
        return _bytecode_reads(fn)
    return _Reader(fn, node).found


def _body(node: ast.AST) -> list[ast.AST]:
    """The nodes a call of the function runs: its body, not its decorators, annotations or defaults."""
    body = node.body if isinstance(node.body, list) else [node.body]
    return [n for b in body for n in ast.walk(b)]


class _Reader:
    """One function's source read for state outside its modules (see the module's docstring)."""

    def __init__(self, fn: types.FunctionType, node: ast.AST):
        self.fn, self.found = fn, _Found()
        self.first = fn.__code__.co_firstlineno - 1  # the source read starts at the function's first line
        nodes = _body(node)
        self.locals = {n.arg for n in ast.walk(node.args) if isinstance(n, ast.arg)}
        self.locals.update(n.arg for n in nodes if isinstance(n, ast.arg))
        self.locals.update(n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
        self.locals.update(n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                   ast.ClassDef)))
        self.locals.update((a.asname or a.name).partition(".")[0] for n in nodes
                           if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names)
        for n in nodes:
            self._visit(n)

    def _opaque(self, what: str, node: ast.AST) -> None:
        if self.found.opaque is None:
            line = self.first + getattr(node, "lineno", 1)
            self.found.opaque = f"{what} in {_where(self.fn, line)}"

    def _value(self, expr: ast.AST) -> Any:
        """What an expression of outer names and attributes holds (`CONFIG.windows`), read without running code;
        _MISSING where it is not such an expression or cannot be read."""
        if isinstance(expr, ast.Name):
            return _MISSING if expr.id in self.locals else _outer(self.fn, expr.id)
        if isinstance(expr, ast.Attribute):
            base = self._value(expr.value)
            return _MISSING if base is _MISSING else inspect.getattr_static(base, expr.attr, _MISSING)
        return _MISSING

    def _state(self, expr: ast.AST, modules: bool) -> bool:
        """Whether `expr` is module-level or closure state the code could change: a mutable container or a plain
        object (with `modules`, a module too: `torch.add(...)` changes nothing, `pkg.FLAG = 1` does)."""
        value = self._value(expr)
        if value is _MISSING:
            return False
        if isinstance(value, types.ModuleType):
            return modules
        if isinstance(value, _MUTABLE):
            return True
        return not isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, functools.partial)) and \
            hasattr(value, "__dict__")

    def _slot(self, expr: ast.AST) -> bool:
        """Whether `expr` names a module-level object of a class of the model's own code (not a container)."""
        if not isinstance(expr, ast.Name):
            return False
        value = self._value(expr)
        cls = type(value)
        if value is _MISSING or isinstance(value, (type, types.ModuleType, types.FunctionType, *_MUTABLE)) or \
                not isinstance(getattr(value, "__dict__", None), dict):
            return False
        return cls.__module__ == self.fn.__module__ or _models(_init_of(cls), self.fn.__module__)

    def _visit(self, n: ast.AST) -> None:
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            self._opaque(f"`{'global' if isinstance(n, ast.Global) else 'nonlocal'} {', '.join(n.names)}`", n)
        elif isinstance(n, ast.Call):
            self._call(n)
        elif isinstance(n, ast.Attribute) and self._slot(n.value):
            self.found.state.append(self._value(n.value))  # `shared.kv = ...`, `shared.kv[:n]`: keyed, replayed
        elif isinstance(n, (ast.Subscript, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
            if self._state(n.value, True):  # `STATE[k] = v`, `pkg.FLAG = 1`, `del TABLE[k]`
                self._opaque(f"`{ast.unparse(n)}` written", n)
        elif isinstance(n, ast.Subscript):
            value = self._value(n.value)
            if isinstance(value, (list, tuple)):
                self.found.indexed.append(value)

    def _call(self, n: ast.Call) -> None:
        func = n.func
        if isinstance(func, ast.Name) and func.id not in self.locals:
            value = _outer(self.fn, func.id)
            if func.id in _KEYS and value is getattr(builtins, func.id):
                self._opaque(_KEYS[func.id], n)
            elif isinstance(value, types.FunctionType):
                self.found.functions.append(value)
        elif isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "self":
                self.found.methods.add(func.attr)
            elif func.attr in _MUTATORS and self._state(func.value, False):
                self._opaque(f"`{ast.unparse(func)}(...)`", n)
            else:
                value = self._value(func)
                if isinstance(value, (types.FunctionType, staticmethod)):
                    self.found.functions.append(_function(value) or value)


def _bytecode_reads(fn: types.FunctionType) -> _Found:
    """The same reads from the bytecode, where no source is found: any write of module-level or closure state, and
    any mutable container it loads, make the block opaque (what the code does with it is not read here)."""
    found = _Found()
    free = set(fn.__code__.co_freevars)
    for code in _codes(fn.__code__):
        for ins in dis.get_instructions(code):
            where = _where(fn, ins.positions.lineno if ins.positions and ins.positions.lineno else
                           fn.__code__.co_firstlineno)
            if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") or (ins.opname == "STORE_DEREF" and ins.argval in free):
                found.opaque = found.opaque or f"`{ins.argval}` written in {where}"
            elif ins.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME"):
                value = _outer(fn, ins.argval)
                if ins.argval in _KEYS and value is getattr(builtins, ins.argval):
                    found.opaque = found.opaque or f"{_KEYS[ins.argval]} in {where}"
                elif isinstance(value, tuple):
                    found.indexed.append(value)
                elif isinstance(value, _MUTABLE):  # a list included: what the code does with it is not seen
                    found.opaque = found.opaque or f"`{ins.argval}` read in {where}"
                elif isinstance(value, types.FunctionType):
                    found.functions.append(value)
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                found.methods.add(ins.argval)
    return found


def _codes(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


__all__ = ["CodeReads", "code_reads"]

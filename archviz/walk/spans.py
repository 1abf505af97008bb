"""Source spans, found with ast once per file: a class's and its `forward`'s lines, and each `self.x = ...` line
of `__init__` that built a child."""

from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
from collections.abc import Iterator

from ..records import (
    SourceSpan,
)


@functools.lru_cache(maxsize=None)
def _file_index(path: str) -> tuple[dict[str, tuple[int, int]], dict[int, int]]:
    """(class qualname -> (first line, last line)), (first line of a def or its decorators -> last line)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}, {}
    classes: dict[str, tuple[int, int]] = {}
    defs: dict[int, int] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        # Classes and defs are statements: only statement lists are walked, never expressions (a tenth of the nodes).
        for child in body:
            if isinstance(child, ast.ClassDef):
                q = f"{prefix}{child.name}"
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                classes.setdefault(q, (start, child.end_lineno or child.lineno))
                visit(child.body, q + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                end = child.end_lineno or child.lineno
                defs[child.lineno] = end
                for d in child.decorator_list:
                    defs[d.lineno] = end
                visit(child.body, f"{prefix}{child.name}.<locals>.")
            else:
                for field in _STATEMENT_LISTS:
                    inner = getattr(child, field, None)
                    if inner:
                        visit(inner, prefix)
                for handler in getattr(child, "handlers", None) or ():  # try/except
                    visit(handler.body, prefix)
                for case in getattr(child, "cases", None) or ():  # match
                    visit(case.body, prefix)

    visit(tree.body, "")
    return classes, defs


_STATEMENT_LISTS = ("body", "orelse", "finalbody")


class Spans:
    def __init__(self, display_roots: tuple[tuple[str, str], ...]):
        roots = [(os.path.abspath(r), p) for r, p in display_roots]
        for entry in sys.path:
            if entry and os.path.isdir(entry):
                roots.append((os.path.abspath(entry), ""))
        self.roots = sorted(roots, key=lambda rp: -len(rp[0]))
        self.files: dict[str, str] = {}  # display -> absolute
        self._cache: dict[type, tuple] = {}

    def display(self, path: str) -> str:
        path = os.path.abspath(path)
        for root, prefix in self.roots:
            if path.startswith(root + os.sep):
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                shown = f"{prefix}{rel}"
                break
        else:
            shown = os.path.basename(path)
        self.files.setdefault(shown, path)
        return shown

    def for_class(self, cls: type) -> tuple:
        hit = self._cache.get(cls)
        if hit is None:
            hit = self._cache[cls] = self._compute(cls)
        return hit

    def _method_span(self, cls: type, name: str) -> SourceSpan | None:
        for klass in cls.__mro__:
            if klass.__module__.startswith("torch.nn.modules.module") or klass is object:
                return None
            fn = klass.__dict__.get(name)
            if fn is None:
                continue
            fn = inspect.unwrap(getattr(fn, "__func__", fn))
            code = getattr(fn, "__code__", None)
            if code is None:
                return None
            _, defs = _file_index(code.co_filename)
            end = defs.get(code.co_firstlineno)
            if end is None:
                return None
            return SourceSpan(self.display(code.co_filename), code.co_firstlineno, end)
        return None

    def _class_file(self, cls: type) -> str | None:
        for v in cls.__dict__.values():
            fn = inspect.unwrap(getattr(v, "__func__", v)) if callable(v) or hasattr(v, "__func__") else None
            code = getattr(fn, "__code__", None)
            if code is not None:
                return code.co_filename
        try:
            return inspect.getsourcefile(cls)
        except (TypeError, OSError):
            return None

    def _compute(self, cls: type) -> tuple:
        file = self._class_file(cls)
        class_span = None
        if file:
            classes, _ = _file_index(file)
            se = classes.get(cls.__qualname__)
            if se:
                class_span = SourceSpan(self.display(file), se[0], se[1])
        doc = cls.__dict__.get("__doc__")
        if isinstance(doc, str) and doc.strip():
            doc = inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ").strip()
        else:
            doc = None
        return class_span, self._method_span(cls, "__init__"), self._method_span(cls, "forward"), doc


def statements(body: list[ast.stmt], depth: int = 0) -> Iterator[tuple[int, ast.stmt]]:
    """(nesting depth in the syntax tree, statement) for every statement in `body` and the statement lists nested in
    it, in source order."""
    for node in body:
        yield depth, node
        for field in _STATEMENT_LISTS:
            inner = getattr(node, field, None)
            if inner:
                yield from statements(inner, depth + 1)
        for handler in getattr(node, "handlers", None) or ():  # try: except ...: its body is two levels down
            yield from statements(handler.body, depth + 2)
        for case in getattr(node, "cases", None) or ():
            yield from statements(case.body, depth + 2)

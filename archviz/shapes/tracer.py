"""The tracer: hooks on every module record each call's input/output shapes and dtypes, the call site in the
parent's forward (the exact source text), and the kernels a stub answered."""

from __future__ import annotations

import dataclasses
import functools
import linecache
import os
import sys
from typing import Any, Callable

import torch

from ..errors import ShapeError, option
from . import kernel_packages, kernels, mlstm_kernels  # noqa: F401 - they register their rules
from .flow import MAX_TENSORS, FlowFrame
from .policy import Policy

TORCH_DIR = os.path.dirname(torch.__file__)


ARCHVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the archviz package


# torch.nn.Module's call machinery: frames whose `self` is the module being called, never a parent calling a child
_CALL_MACHINERY = frozenset(("_call_impl", "_wrapped_call_impl", "inner", "_fn", "__call__"))


MAX_CALLS = 8  # distinct call signatures kept per module


_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def _tensors(obj: Any, out: list, depth: int = 0) -> None:
    if len(out) > 64 or depth > 4:
        return
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            _tensors(x, out, depth + 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, out, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _tensors(getattr(obj, f.name, None), out, depth + 1)


_POSITIONAL: dict[type, tuple[tuple[str, ...], str | None]] = {}


def _positional(cls: type) -> tuple[tuple[str, ...], str | None]:
    """The names of `cls.forward`'s positional parameters after self, and its *args name (None: none)."""
    got = _POSITIONAL.get(cls)
    if got is None:
        import inspect

        names: list[str] = []
        star = None
        try:
            params = list(inspect.signature(cls.forward).parameters.values())[1:]
        except (TypeError, ValueError, AttributeError):
            params = []
        for p in params:
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                star = p.name
        got = _POSITIONAL[cls] = (tuple(names), star)
    return got


def input_names(module: Any, args: Any, kwargs: Any) -> tuple[str, ...]:
    """The argument each of a call's input tensors came from, in the order `_tensors(args)`, `_tensors(kwargs)` list
    them: the parameter's name, with [j] where one argument holds several tensors."""
    positional, star = _positional(type(module))
    out: list = []
    names: list[str] = []

    def take(value: Any, name: str) -> None:
        before = len(out)
        _tensors(value, out, 1)
        n = len(out) - before
        names.extend([name] if n == 1 else [f"{name}[{j}]" for j in range(n)])

    for a, value in enumerate(args if isinstance(args, tuple) else ()):
        take(value, positional[a] if a < len(positional) else f"{star or 'args'}[{a - len(positional)}]")
    for key, value in (kwargs.items() if isinstance(kwargs, dict) else ()):
        take(value, str(key))
    return tuple(names)


class Tracer:
    """`like`: another tracer of the same model, whose module paths this one takes instead of walking the model
    again. `sites=False` records no call sites, assumptions or kernels of memoised blocks and notes which block a
    memoised one copies instead of copying its calls (`copied`), and `only` (paths) records calls of those modules
    alone: the second pass, which only gathers evidence for the dims' names, needs no more."""

    def __init__(self, model: torch.nn.Module, display: Callable[[str], str], *, like: "Tracer | None" = None,
                 sites: bool = True, only: set[str] | frozenset[str] | None = None, flow: bool = False):
        self.model = model
        self.display = display
        self.record_sites = sites
        self.only = only
        # {target: source} of the blocks answered from the memo, where the memo is to say so rather than copy the
        # source's calls to every target (the second pass); None: copied.
        self.copied: dict[str, str] | None = None if sites else {}
        if like is not None:
            self.paths: dict[int, str] = like.paths
            self.objects_by_id: dict[int, Any] = like.objects_by_id
        else:
            from ..walk.walker import preorder

            self.paths = {}
            self.objects_by_id = {}
            for path, mod in preorder(model):  # the first path of a module registered under several, as named_modules
                if id(mod) not in self.paths:
                    self.paths[id(mod)] = path
                    self.objects_by_id[id(mod)] = mod
        self.stack: list[str] = []
        # With `flow`: the forward of every module that has children, as it ran first (archviz.shapes.flow)
        self.flows: dict[str, tuple] = {}
        self.frames: list[FlowFrame | None] = []
        self.frame: FlowFrame | None = None  # the running module's, where it has children and is on its first call
        self.parents: set[int] | None = {i for i, mod in self.objects_by_id.items()
                                         if any(c is not None for c in mod._modules.values())} if flow else None
        self.calls: dict[str, list[tuple]] = {}
        self.sites: dict[str, dict[tuple, None]] = {}
        self.assumptions: dict[str, dict[str, None]] = {}
        self.kernels: dict[str, dict[str, None]] = {}
        self.policy = Policy(self)
        self._positions: dict[Any, list] = {}
        self.handles: list[Any] = []
        self.fired = 0
        # Called after every stubbed kernel call: (module path, kernel, args, kwargs, result). The probe logs them.
        self.on_kernel: Callable[[str, str, tuple, dict, Any], None] | None = None
        # Called when a repeated block is answered from the memo: (path that ran, path answered). archviz.cost copies
        # the FLOPs of the one that ran, as BlockMemo copies its calls.
        self.on_memo: Callable[[str, str], None] | None = None
        # What an observer knows a tensor holds beyond its shape (archviz.cost: a mask's layout), or None: the block
        # memo answers a block from another only where their tensor inputs hold the same.
        self.tensor_tag: Callable[[Any], Any] | None = None

    # -- assumptions and kernels are noted on the module running now, with the user's file:line
    def _where(self) -> str:
        f = self.user_frame(3)
        return f"{self.display(f.f_code.co_filename)}:{f.f_lineno}" if f is not None else "?"

    @staticmethod
    def user_frame(depth: int = 2) -> Any:
        """The innermost frame of the model's code (neither torch's nor archviz's) calling in; None if none."""
        f = sys._getframe(depth)
        while f is not None:
            if not f.f_code.co_filename.startswith((TORCH_DIR, ARCHVIZ_DIR, "<frozen")):
                return f
            f = f.f_back
        return None

    def assume(self, text: str) -> None:
        path = self.stack[-1] if self.stack else ""
        self.assumptions.setdefault(path, {})[f"{text} ({self._where()})"] = None

    def kernel(self, qualname: str, impl: str) -> None:
        path = self.stack[-1] if self.stack else ""
        self.kernels.setdefault(path, {})[qualname if impl == qualname else f"{qualname} → {impl}"] = None

    # -- call sites
    def _call_site(self, parent: Any) -> tuple | None:
        f = sys._getframe(3)
        fallback = None
        while f is not None:
            code = f.f_code
            fn = code.co_filename
            if fn.startswith(ARCHVIZ_DIR) or (fn.startswith(TORCH_DIR) and (
                    parent is None or code.co_name in _CALL_MACHINERY or "self" not in code.co_varnames)):
                f = f.f_back
                continue
            # A parent whose forward is torch's own (TransformerEncoderLayer, Sequential) calls its children there
            if parent is not None and f.f_locals.get("self") is parent:
                return self._site(f)
            if fallback is None and not fn.startswith(TORCH_DIR):
                fallback = f
            f = f.f_back
        return self._site(fallback) if fallback is not None else None

    def _site(self, frame: Any) -> tuple:
        code = frame.f_code
        pos = self._positions.get(code)
        if pos is None:
            pos = self._positions[code] = list(code.co_positions())
        i = frame.f_lasti // 2
        line, end_line, col, end_col = pos[i] if i < len(pos) else (frame.f_lineno, frame.f_lineno, None, None)
        line = line or frame.f_lineno
        text = _source_text(code.co_filename, line, end_line or line, col, end_col)
        return (self.display(code.co_filename), line, text)

    # -- hooks
    # Global module hooks (one registration, not two handles for each of 60,000 modules): the pre-hook tracks
    # which module runs and where its parent called it; the post-hook, which sees args and kwargs, records shapes.
    def pre_hook(self, module: Any, args: Any) -> None:
        path = self.paths.get(id(module))
        if path is None:
            return
        parent = self.objects[-1] if self.objects else None
        if path and self.record_sites:
            site = self._call_site(parent)
            if site is not None:
                self.sites.setdefault(path, {})[site] = None
        self.stack.append(path)
        self.objects.append(module)
        if self.parents is not None:
            frame = FlowFrame(path, module, self.display) if id(module) in self.parents and path not in self.flows else None
            self.frames.append(frame)
            self.frame = frame

    def post_hook(self, module: Any, args: Any, kwargs: Any, output: Any) -> None:
        path = self.paths.get(id(module))
        if path is None or not self.stack:
            return
        self.stack.pop()
        self.objects.pop()
        self.fired += 1
        if self.only is not None and path not in self.only and self.parents is None:  # no flow to keep
            return
        tensors: list = []
        _tensors(args, tensors)
        _tensors(kwargs, tensors)
        ins = [(tuple(t.shape), _DTYPE_NAMES.get(t.dtype) or _dtype_name(t.dtype)) for t in tensors]
        outs: list = []
        _tensors(output, outs)
        if self.parents is not None and self.frames:
            frame = self.frames.pop()
            if frame is not None:
                self.flows.setdefault(path, (*frame.finish(tensors, outs), input_names(module, args, kwargs)))
                # (a memo answer has copied its own)
            self.frame = self.frames[-1] if self.frames else None
            if self.frame is not None:
                self.frame.call(path, tensors[:MAX_TENSORS], outs[:MAX_TENSORS])
            if self.only is not None and path not in self.only:  # a flow kept, no call to record
                return
        entry = (tuple(ins), tuple((tuple(t.shape), _DTYPE_NAMES.get(t.dtype) or _dtype_name(t.dtype)) for t in outs))
        lst = self.calls.setdefault(path, [])
        if entry not in lst and len(lst) < MAX_CALLS:
            lst.append(entry)
        if self.progress is not None and self.fired % 256 == 0:
            self.progress(min(self.fired, self.total), self.total)

    def install(self) -> None:
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self.objects: list = []
        self.progress = None
        self.total = len(self.paths)
        self.handles.append(register_module_forward_pre_hook(self.pre_hook))
        self.handles.append(register_module_forward_hook(self.post_hook, with_kwargs=True))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def stub_call(self, qualname: str, args: tuple, kwargs: dict) -> Any:
        hit = kernels.lookup(qualname, meta=True)
        path = self.stack[-1] if self.stack else "(model)"
        if hit is None:
            raise ShapeError(f"{qualname} (called by {path or 'the model'}) has no shape rule",
                             hint=f"declare one: @archviz.kernels.shape_rule({qualname!r}) in a file passed with "
                                  f"{option('kernel-rules')} FILE (see archviz/shapes/kernels.py)")
        fn, impl = hit
        self.kernel(kernels.own_name(qualname), impl)  # the model's own kernel: `pkg._fwd_kernel → triton.jit`
        result = fn(*args, **kwargs)
        if self.on_kernel is not None:
            self.on_kernel(self.stack[-1] if self.stack else "", qualname, args, kwargs, result)
        return result


@functools.lru_cache(maxsize=4096)  # every layer calls its sub-modules from the same lines
def _source_text(file: str, line: int, end_line: int, col: int | None, end_col: int | None) -> str:
    lines = [linecache.getline(file, n) for n in range(line, end_line + 1)]
    if not lines or not lines[0]:
        return ""
    if col is None or end_col is None:
        return lines[0].strip()
    if line == end_line:
        b = lines[0].encode("utf-8")
        return b[col:end_col].decode("utf-8", "replace").strip()
    first = lines[0].encode("utf-8")[col:].decode("utf-8", "replace")
    last = lines[-1].encode("utf-8")[:end_col].decode("utf-8", "replace")
    parts = _without_comments([first.rstrip("\r\n"), *(x.rstrip("\r\n") for x in lines[1:-1]), last])
    text = " ".join(x.strip() for x in parts if x.strip()).replace("( ", "(").replace(" )", ")")
    # The span is a call: the comma a multi-line argument list ends with means nothing on one line.
    return text[:-2] + ")" if text.endswith(",)") else text


def _without_comments(lines: list[str]) -> list[str]:
    """The lines of a multi-line expression with their `# ...` comments cut (a comment inside the call would read
    as if it commented out the arguments after it once the lines are joined); as they are if they do not
    tokenize."""
    import io
    import tokenize

    try:
        cuts = {t.start[0] - 1: t.start[1] for t in tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline)
                if t.type == tokenize.COMMENT}
    except (tokenize.TokenError, SyntaxError):
        return lines
    return [x[:cuts[i]] if i in cuts else x for i, x in enumerate(lines)]

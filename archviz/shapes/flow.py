"""Each module's forward as it ran: its child calls and its own torch ops in order, with which earlier value each
consumed (tensor identity at dispatch), for the dataflow pictures (`ModuleRecord.flow`).

A `FlowFrame` is open while a module that has children runs its first call; the dispatch mode hands it the ops
that module's own forward runs (not those of its children, which run under their own frame or none), and the tracer
hands it each child call as the child returns. A value is known by the identity of the tensor: the frame holds the
tensors it has seen (meta tensors, no storage) until the module returns, so an id is never reused meanwhile.
Tensors it did not make are resolved when the module returns: one of its inputs (args, then kwargs, as the call's
inputs are listed), or else an attribute (a weight, a buffer), which is no edge.

Each step also records the Python function it ran in (`FlowFunction`): the calls between the module's forward and
the op -- the model's own helpers (`apply_rotary_emb`), a library's (transformers' `apply_rotary_pos_emb`,
`eager_attention_forward`, torch.nn.functional's) -- outermost first, so a picture can fold a run of ops inside one
call into one box named after it. Frames of torch's own machinery and of archviz are not functions of the model.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import torch

MAX_STEPS = 4096  # steps kept per module (a loop over 256 experts runs ~2,500); more are cut (truncated)
MAX_TENSORS = 16  # tensors looked at per op or call (a list of 256 expert outputs is still one step)

# Ops that only re-label a value (no new data, no new shape worth a box): the value passes through them.
_THROUGH = frozenset(("detach", "alias", "lift_fresh", "lift_fresh_copy", "_to_copy", "clone", "contiguous",
                      "_local_scalar_dense", "expand", "_unsafe_view"))  # the last two: matmul's decomposition
# Ops that only lay a value out anew: the value passes through them where the shape stays the same.
_LAYOUT = frozenset(("view", "reshape", "_reshape_alias", "as_strided", "squeeze", "unsqueeze", "flatten"))

_NAMES: dict[Any, str] = {}

_TORCH_DIR = os.path.dirname(torch.__file__)
_FUNCTIONAL = os.path.join(_TORCH_DIR, "nn", "functional.py")  # torch's one file whose functions are named boxes
_ARCHVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# torch.nn.Module's call machinery (and wrappers of it, GradientCheckpointingLayer.__call__): no function of the model
_MACHINERY = frozenset(("_call_impl", "_wrapped_call_impl", "inner", "_fn", "__call__"))
MAX_DEPTH = 48  # frames looked at between an op and its module's forward


def op_name(func: Any) -> str:
    name = _NAMES.get(func)
    if name is None:
        name = _NAMES[func] = getattr(func, "__name__", str(func)).split(".")[0]
    return name


def tensors_of(obj: Any, out: list, depth: int = 0) -> list:
    if len(out) >= MAX_TENSORS or depth > 3:
        return out
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            tensors_of(x, out, depth + 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            tensors_of(x, out, depth + 1)
    return out


class FlowFrame:
    """The steps of one module's forward while it runs; `finish` turns them into the raw flow the trace names."""

    __slots__ = ("prefix", "steps", "value", "keep", "foreign", "truncated", "module", "display", "functions",
                 "fn_of")

    def __init__(self, path: str, module: Any = None, display: Callable[[str], str] | None = None):
        self.prefix = f"{path}." if path else ""
        self.module = module
        self.display = display or (lambda f: f)
        self.functions: list[tuple] = []  # (name, file, line of its def, line it was called from, parent or -1)
        self.fn_of: dict[int, tuple[int, Any]] = {}  # id(frame) -> (function index, the frame, kept alive)
        self.steps: list[list] = []  # [kind, name, raw output shapes, inputs (ints or ("?", id)), count, function]
        self.value: dict[int, Any] = {}  # id(tensor) -> the step that made it (or ("?", id) it passes through)
        self.keep: list[Any] = []  # every tensor seen, alive until the module returns (ids stay unique)
        self.foreign: dict[int, Any] = {}  # tensors consumed that no step made: inputs or attributes
        self.truncated = False

    def _inputs(self, tensors: list) -> list:
        ins: list = []
        for t in tensors:
            k = id(t)
            j = self.value.get(k)
            if j is None:
                if k not in self.foreign:
                    self.foreign[k] = t
                j = ("?", k)
            if j not in ins:
                ins.append(j)
        return ins

    def _made(self, outs: list, j: Any) -> None:
        for t in outs:
            self.value[id(t)] = j
        self.keep.extend(outs)

    def function(self, machinery: bool = False) -> int:
        """The innermost function of the model (or a library) the running op or call is in, below the module's
        forward: its index in `functions` (each enclosing call entered as its parent), or -1 (the forward's own)."""
        module = self.module
        if module is None:
            return -1
        f = sys._getframe(2)
        chain: list = []
        for _ in range(MAX_DEPTH):
            if f is None:
                return -1
            code = f.f_code
            if code.co_name == "forward" and f.f_locals.get("self") is module:
                break
            file = code.co_filename
            if not (file.startswith((_ARCHVIZ_DIR, "<")) or (file.startswith(_TORCH_DIR) and file != _FUNCTIONAL) or
                    (machinery and code.co_name in _MACHINERY)):
                chain.append(f)
            f = f.f_back
        else:
            return -1
        parent = -1
        site = f.f_lineno  # the forward's line that called the outermost function
        for fr in reversed(chain):
            hit = self.fn_of.get(id(fr))
            if hit is None or hit[1] is not fr:
                code = fr.f_code
                name = code.co_qualname.replace(".<locals>", "")
                self.functions.append((name, self.display(code.co_filename), code.co_firstlineno, site, parent))
                hit = self.fn_of[id(fr)] = (len(self.functions) - 1, fr)
            parent = hit[0]
            site = fr.f_lineno
        return parent

    def op(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        outs = tensors_of(out, [])
        if not outs:
            return
        fn = self.function()
        ins = self._inputs(tensors_of(args, tensors_of(kwargs, []) if kwargs else []))
        name = op_name(func)
        if name in _THROUGH or (name in _LAYOUT and len(outs) == 1 and isinstance(args[0], torch.Tensor) and
                                args[0].shape == outs[0].shape):  # the value passes through: its output is its input's
            if len(ins) == 1:
                self._made(outs, ins[0])
            return
        steps = self.steps
        if steps:
            last = steps[-1]
            j = len(steps) - 1
            if last[0] == "op" and last[1] == name and j in ins and last[5] == fn:  # the same op again, on its output
                last[2] = tuple(tuple(t.shape) for t in outs)
                last[3].extend(i for i in ins if i != j and i not in last[3])
                last[4] += 1
                self._made(outs, j)
                return
        self._step("op", name, outs, ins, fn)

    def call(self, path: str, tensors: list, outs: list) -> None:
        rel = path[len(self.prefix):] if path.startswith(self.prefix) else f"/{path}"  # "/": not below this module
        self._step("call", rel, outs, self._inputs(tensors), self.function(machinery=True))

    def _step(self, kind: str, name: str, outs: list, ins: list, fn: int = -1) -> None:
        if len(self.steps) >= MAX_STEPS:
            self.truncated = True
            return
        self.steps.append([kind, name, tuple(tuple(t.shape) for t in outs), ins, 1, fn])
        self._made(outs, len(self.steps) - 1)

    def finish(self, inputs: list, outputs: list) -> tuple:
        """(steps, outputs, truncated, functions) with every input resolved: k >= 0 a step, -1 - i the module's
        input i; a step is (kind, name, shapes, inputs, count, function index or -1)."""
        position = {id(t): i for i, t in reversed(list(enumerate(inputs)))}

        def resolve(j: Any) -> int | None:
            if isinstance(j, int):
                return j
            i = position.get(j[1])
            return None if i is None else -1 - i

        steps = []
        for kind, name, shapes, ins, count, fn in self.steps:
            resolved = tuple(dict.fromkeys(r for r in map(resolve, ins) if r is not None))
            steps.append((kind, name, shapes, resolved, count, fn))
        outs = []
        for t in outputs:
            j = self.value.get(id(t))
            j = resolve(j) if j is not None else resolve(("?", id(t)))
            if j is not None and j not in outs:
                outs.append(j)
        self.fn_of.clear()  # the frames (and their locals) go
        return tuple(steps), tuple(outs), self.truncated, tuple(self.functions)

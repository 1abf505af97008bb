"""Build a model on the meta device, whatever device its code asks for.

`meta_build()` is a context manager under which every tensor factory creates meta tensors, even when the code names a
device (`device="cuda"`, `.cuda()`, `.to("cuda")`, `torch.set_default_device("cuda")`); each such request is
neutralised and noted once with the file:line that made it. Weights are never allocated. One exception: a small
tensor of defined values (`linspace`, `arange`, `tensor`, `zeros`, ...; at most `SMALL_CPU_NUMEL` elements, and
`CPU_BUDGET_NUMEL` in all) that the code asks for on the CPU by name is made there, because such code reads its values
(`.item()`, `.tolist()`). `torch.empty`, which nn.Linear and its kin use for weights, always gives meta.

A small tensor of defined values made without a device (`torch.arange(depth)`) is made on meta too, with a CPU twin
kept beside it (at most `TWIN_NUMEL` elements) and carried through the ops made of twinned tensors only
(`.int()`, `* rate`); when the construction reads its values (`.tolist()`, `.item()`, `int(...)`, as torchvision's
RegNet does with `torch.arange(depth).int().tolist()`), the twin answers, and the build notes it. Twins follow
in-place writes (`mask[n // 2:] = True`), iteration and element reads (`[x.item() for x in torch.linspace(...)]`,
`float(rates[i])`); an op that has no meta kernel (`mask.to_sparse()`) runs on the twins and its result is put on meta.

`.to(...)` of every form (`device=None`, a `torch.device("cpu")`, another tensor) keeps a meta tensor on meta with
its dtype applied, `.cpu()` keeps it there; `.type()` names the CPU type (`'torch.FloatTensor'`), in the build and
(`meta_methods_answered`) in the meta forward pass. Inside `meta_build` too: torch.cuda's queries are answered
(`cuda_queries`), downloads and checkpoint loads skipped (`offline`), weights drawn in numpy never allocated
(`arrays`), torch.ao.quantization's conversion of a float model made on meta (`quantized_conversion`),
`@torch.jit.script` and `torch.compile` keep the Python code (`scripts_kept_python`); each noted with the
model's line.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
import warnings
from typing import Any, Callable, Iterable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

from ..errors import ArchvizError, SourceError, option
from ..gcpause import collector_paused

_META = torch.device("meta")
ARCHVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # frames in archviz's own code are skipped
#: Largest tensor a meta build makes for real on the CPU when the code asks for values there by name (1 Mi elements,
#: 8 MB at most), and the most elements it makes so in one build.
SMALL_CPU_NUMEL = 1 << 20
CPU_BUDGET_NUMEL = 1 << 24
#: Largest tensor made without a device that keeps a CPU twin for the construction to read.
TWIN_NUMEL = 4096
# Tensor methods that read values out: on a meta tensor with a twin, the twin answers.
_READERS = frozenset(getattr(torch.Tensor, n) for n in ("tolist", "item", "__int__", "__float__", "__bool__",
                                                         "__index__", "numpy"))
# Factories whose values are defined by their arguments (not `empty`, nor random ones): what code reads back.
_VALUE_CONSTRUCTORS = frozenset(
    getattr(torch, name) for name in ("arange", "as_tensor", "asarray", "eye", "full", "linspace", "logspace", "ones",
                                      "range", "scalar_tensor", "tensor", "tril_indices", "triu_indices", "zeros")
    if hasattr(torch, name))


def _caller(skip_dirs: tuple[str, ...]) -> str:
    """file:line of the innermost frame outside torch and archviz."""
    for frame in reversed(traceback.extract_stack()):
        fn = frame.filename
        if any(fn.startswith(d) for d in skip_dirs):
            continue
        return f"{os.path.basename(fn)}:{frame.lineno}"
    return "?"


class _MetaMode(TorchFunctionMode):
    made = "made without a device"  # which tensors keep twins, as a read's note names them

    def __init__(self, notes: "MetaNotes", device: torch.device = _META):
        super().__init__()
        self.notes = notes
        self.device = device
        self.constructors = _device_constructors()
        self.cpu_budget = CPU_BUDGET_NUMEL
        self.array_wrappers: frozenset = frozenset()  # set by meta_build where numpy is importable
        from torch.utils.weak import WeakTensorKeyDictionary

        self.twins: WeakTensorKeyDictionary = WeakTensorKeyDictionary()  # meta tensor -> its CPU values

    def _on_twins(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """`func` run on the CPU twins of its tensor arguments; LookupError when one has none (or none is a tensor)."""
        found = False

        def twin(a: Any) -> Any:
            nonlocal found
            if isinstance(a, torch.Tensor):
                t = self.twins.get(a)
                if t is None:
                    raise LookupError
                found = True
                return t
            if isinstance(a, (list, tuple)):
                return type(a)(twin(x) for x in a)
            return a

        targs = tuple(twin(a) for a in args)
        tkwargs = {k: twin(v) for k, v in kwargs.items()}
        if not found:
            raise LookupError
        return func(*targs, **tkwargs)

    def _twinned(self, func: Any, args: tuple, kwargs: dict, out: Any) -> Any:
        """Give `out` (what `func` made of small twinned tensors only) its twin: `func` on the twins. A tuple
        (`unbind`) twins each item, an iterator (`for x in t`) becomes one over twinned items, and an in-place op
        (`mask[2:] = True`) runs on the twin too. Returns `out` (the iterator remade)."""
        if func is torch.Tensor.__iter__ and args and args[0] in self.twins:
            items = list(out)
            for item, value in zip(items, self.twins[args[0]]):
                self.twins[item] = value
            return iter(items)
        inplace = out is None or out is (args[0] if args else None)
        try:
            value = self._on_twins(func, args, kwargs)
        except Exception:  # noqa: BLE001 - the twin is a convenience; the meta tensor stands as it is
            if inplace and args and isinstance(args[0], torch.Tensor):
                self.twins.pop(args[0], None)  # its values are no longer known
            return out
        if isinstance(out, torch.Tensor) and isinstance(value, torch.Tensor) and value.shape == out.shape \
                and out.is_meta and not value.is_meta and out is not (args[0] if args else None):
            self.twins[out] = value
        elif isinstance(out, (tuple, list)) and isinstance(value, (tuple, list)) and len(out) == len(value):
            for o, v in zip(out, value):
                if isinstance(o, torch.Tensor) and isinstance(v, torch.Tensor) and o.is_meta and not v.is_meta and \
                        o.shape == v.shape:
                    self.twins[o] = v
        return out

    def _without_meta_kernel(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """An op with no meta kernel (`mask.to_sparse()`) on small tensors made without a device: run on their CPU
        twins, the result put on meta (its twin kept). Raises what the meta op raised when they have no twins."""
        value = self._on_twins(func, args, kwargs)
        self.notes.answered(f"{getattr(func, '__name__', 'an op')}() of a small tensor made without a device",
                            "has no meta kernel: made on the CPU from its values, then put on meta")
        if not isinstance(value, torch.Tensor):
            return value
        out = value.to(self.device)
        if out.is_meta and value.numel() <= TWIN_NUMEL and value.layout == torch.strided:
            self.twins[out] = value
        return out

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _READERS and self.twins and args and isinstance(args[0], torch.Tensor) \
                and args[0].device.type == "meta":
            t = self.twins.get(args[0])
            if t is not None:
                self.notes.read(f"{getattr(func, '__name__', 'a read')}() of a tensor {self.made}")
                return func(t, *args[1:], **kwargs)
        if func in self.array_wrappers:  # weights made in numpy (torch.from_numpy(np.random.randn(...))): not copied
            from .arrays import wrapped_on_meta

            wrapped = wrapped_on_meta(func, args, kwargs, self.notes.answered)
            if wrapped is not None:
                return wrapped
        if func in self.constructors:
            return self._construct(func, args, kwargs)
        if func in _ANSWERED_METHODS:
            answered = answer_on_meta(func, args, kwargs, self.notes)
            if answered is not NotImplemented:
                twin = self.twins.get(args[0]) if self.twins else None
                if twin is not None and isinstance(answered, torch.Tensor) and answered is not args[0]:
                    self.twins[answered] = twin.to(answered.dtype)  # `.to(torch.float64)`: still readable
                return answered
        if not self.twins:
            return func(*args, **kwargs)
        try:
            out = func(*args, **kwargs)
        except NotImplementedError:  # no meta kernel: answered from the CPU twins where there are some
            try:
                return self._without_meta_kernel(func, args, kwargs)
            except LookupError:
                pass
            raise
        if out is None or isinstance(out, (tuple, list)) or func is torch.Tensor.__iter__ or \
                isinstance(out, torch.Tensor) and out.device.type == "meta" and out.numel() <= TWIN_NUMEL:
            out = self._twinned(func, args, kwargs, out)
        return out

    def _construct(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """A factory call: on the build's device, whatever device it names (see the module doc for the CPU cases)."""
        dev = kwargs.get("device")
        asked = torch.device(dev).type if dev is not None else None
        if asked not in (None, "meta", "cpu"):
            self.notes.neutralised(f"device={str(dev)!r}")
        kwargs["device"] = self.device
        kwargs.pop("pin_memory", None)
        out = func(*args, **kwargs)
        if asked is None and self.device.type == "meta" and func in _VALUE_CONSTRUCTORS \
                and isinstance(out, torch.Tensor) and out.numel() <= TWIN_NUMEL:
            try:
                self.twins[out] = func(*args, **{**kwargs, "device": "cpu"})
            except Exception:  # noqa: BLE001
                pass
        if asked == "cpu" and self.device.type == "meta" and func in _VALUE_CONSTRUCTORS \
                and isinstance(out, torch.Tensor) and out.numel() <= min(SMALL_CPU_NUMEL, self.cpu_budget):
            # Code that names the CPU for values reads them, as transformers' vision models do:
            # `[x.item() for x in torch.linspace(0, rate, depth, device="cpu")]`. Such a small tensor is made
            # for real (torch's own meta context honours the device too), within a budget for the whole build;
            # strays_to_meta moves any that a module keeps to meta before the shape pass.
            self.cpu_budget -= out.numel()
            kwargs["device"] = dev
            out = func(*args, **kwargs)
        return out


_TENSOR_TYPE = torch.Tensor.type
# The tensor methods answer_on_meta answers (one set lookup per op on the build's path, not a call).
_TENSOR_CPU = torch.Tensor.cpu
_ANSWERED_METHODS = frozenset({torch.Tensor.cuda, torch.Tensor.to, torch.Tensor.pin_memory, _TENSOR_TYPE, _TENSOR_CPU})
_CPU_TYPE_NAMES: dict[torch.dtype, str] = {}  # dtype -> its CPU tensor type's name ('torch.FloatTensor'), as asked


def _cpu_type_name(dtype: torch.dtype) -> str:
    name = _CPU_TYPE_NAMES.get(dtype)
    if name is None:
        name = _CPU_TYPE_NAMES[dtype] = _TENSOR_TYPE(torch.empty(0, dtype=dtype, device="cpu"))
    return name


def _type_dtype(wanted: Any) -> torch.dtype | None:
    """The dtype of a `.type(...)` target: a dtype, a tensor type (`torch.cuda.HalfTensor`) or its name."""
    if isinstance(wanted, torch.dtype):
        return wanted
    if isinstance(wanted, str):
        found: Any = torch
        for part in wanted.split(".")[1:] if wanted.startswith("torch.") else ():
            found = getattr(found, part, None)
        wanted = found
    dtype = getattr(wanted, "dtype", None)
    return dtype if isinstance(dtype, torch.dtype) else None


def answer_on_meta(func: Any, args: tuple, kwargs: dict, notes: "MetaNotes | None") -> Any:
    """What a tensor method that names a device or reads one answers for a meta tensor: `.cuda()` and `.to(device)`
    of every form keep it where it is (its dtype and memory format still applied), `.pin_memory()` is itself,
    `.type()` names the CPU type (`'torch.FloatTensor'`, what code compares it with) and `.type(torch.cuda.HalfTensor)`
    converts the dtype only, `.cpu()` of a meta tensor is itself. NotImplemented for any other call. `notes`: where
    a CUDA device asked for is noted."""
    if func is torch.Tensor.cuda:
        if notes is not None:
            notes.neutralised(".cuda()")
        return args[0]
    if func is torch.Tensor.to:
        return _moved(func, args, kwargs, notes)
    if func is torch.Tensor.pin_memory or func is _TENSOR_CPU and args[0].is_meta:  # a copy out of meta: none
        return args[0]
    if func is _TENSOR_TYPE and args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
        wanted = args[1] if len(args) > 1 else kwargs.get("dtype")
        if wanted is None:
            return _cpu_type_name(args[0].dtype)
        dtype = _type_dtype(wanted)
        if dtype is None:
            return NotImplemented
        if notes is not None and "cuda" in str(wanted):
            notes.neutralised(f".type({getattr(wanted, '__module__', '')}.{getattr(wanted, '__name__', wanted)})"
                              if not isinstance(wanted, str) else f".type({wanted!r})")
        return args[0].to(dtype)
    return NotImplemented


@contextlib.contextmanager
def meta_methods_answered() -> Iterator[None]:
    """`Tensor.type()` and `Tensor.cpu()` of a meta tensor answered as `answer_on_meta` does while inside (the meta
    forward pass, which runs under no function mode): code that compares `x.type()` with `'torch.FloatTensor'` takes
    the CPU's branch, and `lengths.cpu()` stays on meta, where the pass answers its values; `torch.autocast` of
    the meta device (`device_type=x.device.type`) is the CPU's."""
    saved = {name: getattr(torch.Tensor, name) for name in ("type", "cpu")}

    def answered(original: Any) -> Any:
        def method(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.is_meta:
                answer = answer_on_meta(original, (self, *args), kwargs, None)
                if answer is not NotImplemented:
                    return answer
            return original(self, *args, **kwargs)

        return method

    for name, original in saved.items():
        setattr(torch.Tensor, name, answered(original))
    autocast = torch.amp.autocast_mode.autocast  # torch.autocast
    init = autocast.__init__

    def meta_as_cpu(self: Any, *args: Any, **kwargs: Any) -> None:
        """`torch.autocast(device_type=x.device.type, ...)` of a meta tensor: the CPU's (no meta autocast exists;
        the CPU's leaves meta tensors' ops as they are)."""
        if args and args[0] == "meta":
            args = ("cpu", *args[1:])
        elif kwargs.get("device_type") == "meta":
            kwargs["device_type"] = "cpu"
        init(self, *args, **kwargs)

    autocast.__init__ = meta_as_cpu
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)
        autocast.__init__ = init


def _moved(func: Any, args: tuple, kwargs: dict, notes: "MetaNotes | None") -> Any:
    """`t.to(...)` of any form (device, dtype, other tensor, `device=None`, `non_blocking`, `copy`) on the build's
    device: the device dropped, the dtype and memory format kept."""
    copy = bool(kwargs.pop("copy", False))
    try:
        dev, dtype, _, memory_format = torch._C._nn._parse_to(*args[1:], **kwargs)
    except (TypeError, RuntimeError):
        return func(*args, **kwargs)
    if dev is not None and dev.type not in ("meta", "cpu") and notes is not None:
        notes.neutralised(f".to({str(dev)!r})")
    if dtype is None and memory_format is None and not copy:
        return args[0]
    options: dict[str, Any] = {"copy": copy}
    if dtype is not None:
        options["dtype"] = dtype
    if memory_format is not None:
        options["memory_format"] = memory_format
    return func(args[0], **options)


# torch.nn.init's in-place initialisers, and the torch modules that import them by name. On meta a tensor has no values
# to fill, so they are skipped while building there (as transformers' `no_init_weights` does when loading): a third
# of a plain meta construction of transformers' deepseek_v3 is spent in nn.Linear's kaiming_uniform_ on meta.
_INIT_FUNCTIONS = ("uniform_", "normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_", "xavier_uniform_",
                   "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_", "sparse_")
_INIT_MODULES = ("torch.nn.init", "torch.nn.modules.activation", "torch.nn.modules.transformer",
                 "torch.nn.modules.linear", "torch.nn.modules.conv", "torch.nn.modules.normalization",
                 "torch.nn.modules.batchnorm", "torch.nn.modules.rnn", "torch.nn.modules.sparse")


def _unchanged(tensor: Any, *args: Any, **kwargs: Any) -> Any:
    return tensor


@contextlib.contextmanager
def _initialisers_skipped() -> Iterator[None]:
    saved: list[tuple[Any, str, Any]] = []
    try:
        for name in _INIT_MODULES:
            module = sys.modules.get(name)
            for fn in _INIT_FUNCTIONS if module is not None else ():
                if fn in module.__dict__:
                    saved.append((module, fn, module.__dict__[fn]))
                    setattr(module, fn, _unchanged)
        yield
    finally:
        for module, fn, original in saved:
            setattr(module, fn, original)


def model_line() -> str:
    """file:line of the model's code that is running: the innermost frame outside torch, archviz, the standard
    library's context managers and the wrappers of a deprecated function (`typing_extensions.deprecated`)."""
    return _caller(_SKIP_DIRS)


def _wrapper_files() -> tuple[str, ...]:
    try:
        import typing_extensions
    except ImportError:
        return ()
    return (typing_extensions.__file__,)


_SKIP_DIRS = (os.path.dirname(torch.__file__), ARCHVIZ_DIR, os.path.dirname(contextlib.__file__), *_wrapper_files())


@contextlib.contextmanager
def scripts_kept_python(answer: Callable[[str, str], None]) -> Iterator[None]:
    """`@torch.jit.script` and `@torch.compile` on a function or class, and `torch.jit.script(module)` or
    `torch.compile(model)`, inside keep the Python code as it is: TorchScript's interpreter fails on meta tensors (its
    graph fuser has no meta device: "Unknown device for graph fuser"), and a meta pass needs no compiled code.
    `answer(what, how)` notes each."""
    import types

    saved_script, saved_compile = torch.jit.script, torch.compile

    def script(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(obj, (types.FunctionType, type)):
            answer(f"@torch.jit.script on {obj.__name__}", "kept as Python: TorchScript does not run on meta")
            return obj
        if isinstance(obj, torch.nn.Module):
            answer(f"torch.jit.script of {type(obj).__name__}", "kept as Python: TorchScript does not run on meta")
            return obj
        return saved_script(obj, *args, **kwargs)

    def compile(model: Any = None, **kwargs: Any) -> Any:  # noqa: A001 - torch.compile's own name
        if model is None:  # @torch.compile(mode=...): the decorator
            return lambda fn: compile(fn, **kwargs)
        answer(f"torch.compile of {getattr(model, '__name__', type(model).__name__)}",
               "kept uncompiled: a meta pass runs the Python code")
        return model

    torch.jit.script, torch.compile = script, compile  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.jit.script, torch.compile = saved_script, saved_compile  # type: ignore[assignment]


class MetaNotes:
    """What the build neutralised, each noted once with where it happened."""

    def __init__(self) -> None:
        self._skip = _SKIP_DIRS
        self.items: list[str] = []
        self._seen: set[str] = set()
        self.final_dtype: torch.dtype | None = None  # the default dtype the model's code left set

    def neutralised(self, what: str) -> None:
        where = _caller(self._skip)
        note = f"{what} at {where} neutralised: built on meta"
        if note not in self._seen:
            self._seen.add(note)
            self.items.append(note)

    def answered(self, what: str, how: str) -> None:
        """`what` (a call the build answered itself) at the model's line that made it, and `how` it was answered."""
        where = _caller(self._skip)
        note = f"{what} at {where} {how}"
        if note not in self._seen:
            self._seen.add(note)
            self.items.append(note)

    def warned(self, text: str) -> None:
        self.items.append(f"warning while building: {text}")

    def read(self, what: str) -> None:
        where = _caller(self._skip)
        note = f"{what} at {where} answered with its values computed on the CPU"
        if note not in self._seen:
            self._seen.add(note)
            self.items.append(note)


@contextlib.contextmanager
def warnings_noted(note: Callable[[str], None]) -> Iterator[None]:
    """Warnings raised inside become calls of `note` (one line each, once per message and place) instead of lines on
    stderr: the library never prints. The filters stay as the user has them, so what is noted is what Python would
    have shown (DeprecationWarnings from library code stay hidden)."""
    seen: set[tuple] = set()

    def show(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        text = " ".join(str(message).split())
        key = (category, text, filename, lineno)
        if key not in seen:
            seen.add(key)
            note(f"{category.__name__}: {text[:300]}{'…' if len(text) > 300 else ''} "
                 f"({os.path.basename(filename)}:{lineno})")

    with warnings.catch_warnings():  # restores showwarning and the filters on the way out
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def meta_build(device: str = "meta") -> Iterator[MetaNotes]:
    """Everything constructed inside lives on the meta device (or, for the execution probe's small copies, on
    `device="cpu"` for real); CUDA requests are neutralised; the default dtype is restored afterwards."""
    from .arrays import ARRAY_WRAPPERS, unallocated_arrays
    from .cuda_queries import cuda_answered
    from .offline import nothing_fetched
    from .quantized_conversion import conversion_answered

    target = torch.device(device)
    notes = MetaNotes()
    saved_dtype = torch.get_default_dtype()
    saved_set_default_device = torch.set_default_device

    def set_default_device(device: Any) -> None:
        if device is not None and torch.device(device).type not in ("meta", "cpu"):
            notes.neutralised(f"torch.set_default_device({str(device)!r})")

    torch.set_default_device = set_default_device  # type: ignore[assignment]
    mode = _MetaMode(notes, target)
    on_meta = target.type == "meta"
    if on_meta:
        mode.array_wrappers = ARRAY_WRAPPERS
    # Tens of thousands of modules and parameters, no garbage: the cyclic GC would rescan the growing heap again and
    # again (half of a 671B model's construction time). Paused for the build, restored after.
    try:
        # `mode` puts every constructor on `target` itself: no torch.device(target) context under it (a second Python
        # mode on every torch call: a fifth of a transformers build). Code that enters `with torch.device("cuda")`
        # still builds on meta: the mode stays above that context.
        with collector_paused(), warnings_noted(notes.warned), mode, cuda_answered(notes.answered), \
                nothing_fetched(notes.answered), scripts_kept_python(notes.answered), \
                (unallocated_arrays(notes.answered) if on_meta
                 else contextlib.nullcontext()), \
                (conversion_answered(notes.answered) if on_meta else contextlib.nullcontext()), \
                (_initialisers_skipped() if on_meta else contextlib.nullcontext()):
            yield notes
    finally:
        notes.final_dtype = torch.get_default_dtype()
        torch.set_default_device = saved_set_default_device
        torch.set_default_dtype(saved_dtype)


def strays_to_meta(modules: Iterable[Any]) -> int:
    """Move the tensors of `modules` that are not on meta to meta; return how many moved.

    The legacy constructors (`nn.Parameter(torch.FloatTensor(d_model, n_head, d_head))`, as XLNet builds its
    attention weights) pass by torch's factory functions, so no mode puts them on meta: a meta build leaves them on
    the CPU, and the meta forward pass would meet them beside meta activations. Ties are kept, and attributes set
    on a parameter (a quantization scale) move with it."""
    import torch.nn as nn

    strays: list[tuple[dict, str, Any]] = []
    on_meta = False
    for mod in modules:
        for store in (mod._parameters, mod._buffers):
            for name, t in store.items() if store else ():
                if t is not None:
                    if t.is_meta:
                        on_meta = True
                    else:
                        strays.append((store, name, t))
    if not on_meta:  # not a meta build (the probe's CPU copy): nothing to move
        return 0
    moved: dict[int, Any] = {}
    for store, name, t in strays:  # `strays` keeps the originals alive: no id is reused mid-way
        new = moved.get(id(t))
        if new is None:
            if isinstance(t, nn.Parameter):
                new = nn.Parameter(t.detach().to("meta"), requires_grad=t.requires_grad)
                new.__dict__.update(t.__dict__)
            else:
                new = t.to("meta")
            moved[id(t)] = new
        store[name] = new
    return len(moved)


def user_frame(exc: BaseException, roots: tuple[str, ...]) -> str | None:
    """`file:line` of the innermost traceback frame inside one of `roots` (the user's model files)."""
    best = None
    tb = exc.__traceback__
    for frame, lineno in traceback.walk_tb(tb):
        fn = frame.f_code.co_filename
        if any(os.path.abspath(fn).startswith(os.path.abspath(r)) for r in roots):
            best = f"{os.path.basename(fn)}:{lineno}"
    if best is None and isinstance(exc, SyntaxError) and exc.filename:
        best = f"{os.path.basename(exc.filename)}:{exc.lineno}"
    return best


_CONFIG_NAMES = "config|args|params"


def unset_field_hint(error: BaseException, config: dict[str, Any],
                     aliases: dict[str, str] | None = None) -> str | None:
    """For code that died on a None (`topk(): argument 'k' must be int, not NoneType`, `'NoneType' object is not
    subscriptable`, or a TypeError that does not say so: `torch.empty(None, 64)` raises "empty() takes 1 positional
    argument but 2 were given"): the config field left unset it comes from, found in the failing line of the model's
    code (`self.top_k`, `config.x`) and, for an attribute, in the __init__ that set it (`self.top_k =
    config.num_experts_per_tok`); for a KeyError, the config's table without the entry looked up
    (`config.rope_parameters[layer_type]`). `aliases`: the config class's attribute_map (`num_local_experts` read as
    `n_routed_experts`), so a field read by its alias is named by both. None when the error is not about a None or
    no unset field explains it."""
    import inspect
    import linecache
    import re

    if not (isinstance(error, (TypeError, KeyError)) or isinstance(error, AttributeError) and
            "NoneType" in str(error)):
        return None
    aliases = aliases or {}
    skip = (os.path.dirname(torch.__file__), ARCHVIZ_DIR)
    frame = lineno = None
    for f, n in traceback.walk_tb(error.__traceback__):
        if not f.f_code.co_filename.startswith(skip):
            frame, lineno = f, n
    if frame is None:
        return None

    def unset(field: str) -> bool:
        field = aliases.get(field, field)
        return field in config and config[field] is None

    def named(field: str) -> str:  # the field as read, and as the config stores it where that differs
        return f"{field} ({aliases[field]})" if aliases.get(field, field) != field else field

    text = linecache.getline(frame.f_code.co_filename, lineno or 0)
    if isinstance(error, KeyError):  # a table the config leaves without the entry the code looks up
        key = error.args[0] if error.args else None
        for name, field in dict.fromkeys(re.findall(rf"\b({_CONFIG_NAMES})\.(\w+)\[", text)):
            table = config.get(aliases.get(field, field))
            if isinstance(table, dict) and key not in table:
                return (f"{name}.{named(field)} has no {key!r} entry in this config ({_shown_keys(table)}); give it "
                        f"with {option('set')} {aliases.get(field, field)}=VALUE")
        return None
    owner = frame.f_locals.get("self")
    for attr in dict.fromkeys(re.findall(r"\bself\.(\w+)", text)):
        if owner is None or getattr(owner, attr, 0) is not None:
            continue
        try:
            init = inspect.getsource(type(owner).__init__)
        except (OSError, TypeError):
            init = ""
        m = re.search(rf"self\.{attr}\s*=\s*(?:self\.)?({_CONFIG_NAMES})\.(\w+)\s*$", init, re.M) or \
            re.search(rf"self\.{attr}\s*=\s*getattr\(\s*(?:self\.)?({_CONFIG_NAMES}),\s*[\"'](\w+)[\"']", init)
        if m and unset(m.group(2)):
            field = m.group(2)
            return (f"self.{attr} is None: {type(owner).__name__}.__init__ takes it from {m.group(1)}.{named(field)}, "
                    f"which this config leaves unset; give it with {option('set')} {aliases.get(field, field)}=VALUE")
    for name, field in dict.fromkeys(re.findall(rf"\b({_CONFIG_NAMES})\.(\w+)", text)):
        if unset(field):
            return (f"{name}.{named(field)} is None in this config; give it with {option('set')} "
                    f"{aliases.get(field, field)}=VALUE")
    return None


def _shown_keys(table: dict) -> str:
    keys = [repr(k) for k in list(table)[:4]]
    return f"its keys: {', '.join(keys)}{', ...' if len(table) > 4 else ''}" if keys else "it is empty"


def is_cuda_insistence(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(s in text for s in ("CUDA", "cuda", "NVIDIA driver", "compiled with CUDA"))


#: The hint of a model that insists on CUDA where the build answered none of it (its own assert, an op that needs a
#: GPU): nothing the user can change, said plainly, never advice to edit the model's code.
CUDA_HINT = ("archviz builds on the meta device and answers torch.cuda's queries and device requests there, but not "
             f"this one; run with {option('debug')} for the traceback")


def build_failure_hint(error: BaseException, config: dict[str, Any],
                       aliases: dict[str, str] | None = None) -> str:
    """The hint of a build that raised `error`: the config named only where it is the cause (an unset field the
    failing line reads, or a config field that line names), an op meta has no kernel for said as that, else the
    traceback."""
    import linecache
    import re

    from .configs import absent_file_hint

    hint = unset_field_hint(error, config, aliases) or absent_file_hint(error, config)
    if hint:
        return hint
    if isinstance(error, NotImplementedError) and "meta" in str(error).lower():
        return ("an op of the model's constructor has no meta kernel and its inputs are too large (or not made by a "
                f"constructor) to make on the CPU: run with {option('debug')} for the traceback")
    if "meta tensor" in str(error):  # .item(), .tolist(), .numpy(), a copy out: values meta has none of
        return (f"the constructor reads the values of a tensor, which a meta build has only for small tensors made "
                f"from defined values (arange, linspace, zeros, ...; at most {TWIN_NUMEL:,} elements), not for this "
                f"one: run with {option('debug')} for the traceback")
    frame = lineno = None
    for f, n in traceback.walk_tb(error.__traceback__):
        if not f.f_code.co_filename.startswith(_SKIP_DIRS):
            frame, lineno = f, n
    if frame is not None:
        line = linecache.getline(frame.f_code.co_filename, lineno or 0)
        named = [k for k in dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", line)) if k in config]
        if named:
            shown = ", ".join(f"{k}={config[k]!r}" for k in named[:3])
            return f"the failing line reads {shown} of the config: check {'it' if len(named) == 1 else 'them'}"
    return f"the model's code raised this while building (run with {option('debug')} for the traceback)"


__all__ = ["meta_build", "MetaNotes", "user_frame", "is_cuda_insistence", "unset_field_hint", "warnings_noted",
           "build_failure_hint", "CUDA_HINT"]


def config_dict_of(args: Any) -> dict[str, Any]:
    """A config object's fields (a dataclass's, an attribute bag's), {} for None."""
    return dict(getattr(args, "__dict__", None) or {})


def names_a_missing_field(e: BaseException, args: Any) -> bool:
    """The error is the model reading a field its config object lacks."""
    return isinstance(e, AttributeError) and args is not None and getattr(e, "obj", None) is args


def construction_error(e: Exception, paths: tuple[str, str, str], cls: type, args: Any,
                       args_cls: type | None) -> SourceError:
    """What the model's constructor raised, said as one SourceError; `paths` is (the model file, the config file or
    the model file, the code root)."""
    path, config_path, code_root = paths
    where = user_frame(e, (code_root,)) or os.path.basename(path)
    if isinstance(e, AttributeError):
        if names_a_missing_field(e, args):
            return SourceError(f"{config_path}: the model reads args.{e.name} at {where}, which "
                               f"{getattr(args_cls, '__name__', '')} lacks",
                               hint=f"add {e.name!r} to {getattr(args_cls, '__name__', '')} or the config")
        return SourceError(f"{path}: building {cls.__name__} raised AttributeError at {where}: {e}",
                           hint=unset_field_hint(e, dict(getattr(args, "__dict__", {})))
                           or f"run with {option('debug')} for the traceback")
    if is_cuda_insistence(e):
        return SourceError(f"{path}: the model insists on CUDA at {where}: {e}", hint=CUDA_HINT)
    return SourceError(f"{path}: building {cls.__name__} raised {type(e).__name__} at {where}: {e}",
                       hint=build_failure_hint(e, config_dict_of(args)))

"""Attributes as a forward reads them, so that the block memo answers a block from another only when both take the
same path (archviz/shapes/memo.py). Blocks alike in structure may differ in what they hold: a per-layer
`self.sliding_window`, `self.attention_type`, `self.use_lora = layer_id > 0` set in `__init__`, an enum, a per-layer
config object, a function chosen per layer, a flag on a child module. While a memoised block's forward runs, each
module below it is watched (its class swapped, for the run only, for a subclass whose `__getattribute__` notes what
is read from the instance's own `__dict__`), and the first value read of each attribute is kept. Another block of
its kind answers from the memo only where every attribute the run read holds the same value on it (`same`: by value,
into tuples, lists, dicts, dataclasses and plain objects; functions by code, defaults and closure). Attributes that
differ but that no forward reads (a note, a rate used only in `__init__`) do not part the blocks. A module whose
class cannot be swapped is read whole: every attribute it holds must be the same. Where the model's modules have hooks
of their own, the hooks of every module below a block must be the same functions too.
Reads by other routes are noted too: `vars(self)` and `self.__dict__` in the model's code read the instance whole
(every attribute it holds counts, the layer number included); a name the instance does not hold (`getattr(self,
f"scale_{i}", None)`, `hasattr`) or holds only as its class's default (`use_extra = False` on the class, True on some
layers) is noted as MISSING, for a block that holds its own to part. Parameters, buffers and sub-modules, read by
torch's `__getattr__` or through `self._parameters`, `self._buffers`, `self._modules`, are the block's kind (names,
shapes, dtypes); their values are meta in the pass (a tensor the build left on the CPU is moved to meta), so nothing
else of them can lead a forward. State outside the block's modules (module-level lists, dicts keyed by `id(self)`)
is read from the code: archviz/shapes/codereads.py."""

from __future__ import annotations

import enum
import functools
import math
import sys
import types
from typing import Any, Callable

import torch

from .layerpaths import Tracked

# torch's own bookkeeping on every module (`training`, the hook dicts, ...): never part of a path
_INTERNAL = frozenset(torch.nn.Module().__dict__)
WHOLE = "__dict__"  # a module that cannot be watched is read whole: every attribute it holds counts
MISSING = object()
# a module's own hooks (`register_forward_hook` on one layer's sub-module): they run inside the block's forward
HOOKS = ("_forward_pre_hooks", "_forward_hooks")
def _held(own: dict, name: str) -> Any:
    """What torch's `Module.__getattr__` finds: the parameter, buffer or sub-module `name` (they are the block's
    kind: names, shapes, dtypes), or MISSING."""
    for table in ("_parameters", "_buffers", "_modules"):
        held = own.get(table)
        if held is not None and name in held:
            return held[name]
    return MISSING


SHIM = "_archviz_memo"  # marks the forwards the memo installs: not the code's, never part of a path

# A read: (module, attribute name, the value first read)
Read = tuple[Any, str, Any]


class Reads:
    """The reads noted while watched forwards run (`running` > 0). A plain object read from a module (a config) is
    watched too from then on (`follow`), for the memo to see which of its lists a forward fetches; `followed`: those
    objects, with their own classes, until `unfollow`."""

    def __init__(self) -> None:
        self.reads: list[Read] = []
        self.running = 0
        self.followed: list[tuple[Any, type]] = []
        self.seen: set[int] = set()

    def follow(self, value: Any) -> None:
        cls = type(value)
        if id(value) in self.seen or cls in _ORIGINAL or not _objectish(value):
            return
        sub = _watcher(cls)
        _LOG[sub] = self
        try:
            value.__class__ = sub
        except TypeError:  # an object whose class cannot change: read as it is
            return
        self.followed.append((value, cls))
        self.seen.add(id(value))

    def missed(self, obj: Any, name: str) -> None:
        """`name` is held by neither `obj`, nor its class, nor (a module) as a parameter, buffer or sub-module
        (`getattr(self, name, None)`, `hasattr`): noted as MISSING, for another block that holds it to take its own
        path."""
        self.reads.append((obj, name, MISSING))

    def unheld(self, obj: Any, name: str) -> None:
        """`name` read from `obj`'s class, not from `obj`: where the class holds it as a plain value (a default that
        some instances override), noted as MISSING on `obj`, for an instance that holds its own to part."""
        key = (type(obj), name)
        default = _CLASS_DEFAULT.get(key)
        if default is None:
            default = _CLASS_DEFAULT[key] = _class_default(type(obj), name)
        if default:
            self.reads.append((obj, name, MISSING))

    def unfollow(self, mark: int) -> None:
        """Objects followed since `mark` back to their own classes."""
        done = self.followed[mark:]
        unwatch(done)
        del self.followed[mark:]
        self.seen.difference_update(id(v) for v, _ in done)


_CLASS_DEFAULT: dict[tuple[type, str], bool] = {}
_NOT_MODELS = ("torch.", "archviz.")


def _class_default(cls: type, name: str) -> bool:
    """Whether `cls` holds `name` as a plain value (not a method, property or other descriptor), torch's own
    defaults (`_compiled_call_impl`) aside."""
    if name.startswith("__"):
        return False
    for c in cls.__mro__:
        if name in c.__dict__:
            return not hasattr(type(c.__dict__[name]), "__get__") and not c.__module__.startswith("torch.")
    return False


def _models_code(frame: Any) -> bool:
    """Whether `frame` runs the model's code, not torch's (`nn.Module.__getattr__` reads `self.__dict__`) nor
    archviz's own."""
    name = frame.f_globals.get("__name__") or ""
    return not name.startswith(_NOT_MODELS) and name not in ("torch", "archviz")


_NOT_FOLLOWED = (torch.nn.Module, torch.Tensor, type, types.FunctionType, types.MethodType, types.ModuleType,
                 types.BuiltinFunctionType, functools.partial, enum.Enum, list, tuple, dict, set, frozenset, int,
                 float, complex, str, bytes)


def _objectish(value: Any) -> bool:
    """A plain object with attributes of its own (a config, a dataclass): not a value, container, module or code."""
    if type(value) in _PLAIN or isinstance(value, _NOT_FOLLOWED) or type(value).__module__.startswith("archviz."):
        return False  # (archviz's own: a tracked number, its log)
    try:
        object.__getattribute__(value, "__dict__")
    except AttributeError:
        return False
    return True


_WATCHED: dict[type, type] = {}
_ORIGINAL: dict[type, type] = {}
_LOG: dict[type, Reads] = {}  # the log each watching class notes into (the memo that watches now)


def _watcher(cls: type) -> type:
    """`cls` with a `__getattribute__` that notes reads of the instance's own attributes into its `_LOG` (and, for
    a module, torch's `__getattr__` as `_held` answers it, which notes a name found nowhere)."""
    sub = _WATCHED.get(cls)
    if sub is not None:
        return sub
    get, own = cls.__getattribute__, object.__getattribute__
    torchs = getattr(cls, "__getattr__", None) is torch.nn.Module.__getattr__

    def __getattribute__(self: Any, name: str) -> Any:
        try:
            value = get(self, name)
        except AttributeError:
            log = _LOG[sub]
            if log.running and not torchs and name not in _INTERNAL:
                log.missed(self, name)  # (a `__getattr__` of the code's own may answer it: not seen)
            raise
        log = _LOG[sub]
        if log.running and name not in _INTERNAL:
            if name in own(self, "__dict__"):
                log.reads.append((self, name, value))
                log.follow(value)
            elif name == "__dict__":  # `vars(self)`, `self.__dict__[...]` in the model's code: all it holds counts
                if _models_code(sys._getframe(1)):
                    log.reads.append((self, WHOLE, MISSING))
            else:
                log.unheld(self, name)
        return value

    def __getattr__(self: Any, name: str) -> Any:
        value = _held(own(self, "__dict__"), name)
        if value is MISSING:
            log = _LOG[sub]
            if log.running and name not in _INTERNAL:
                log.missed(self, name)
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return value

    namespace = {"__getattribute__": __getattribute__, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                 "__doc__": cls.__doc__}
    if torchs:
        namespace["__getattr__"] = __getattr__
    sub = type(cls.__name__, (cls,), namespace)
    _WATCHED[cls] = sub
    _ORIGINAL[sub] = cls
    return sub


def watch(modules: list[Any], log: Reads) -> tuple[list[tuple[Any, type]], list[Any]]:
    """Watch `modules` (those not watched already): ([(module, its own class)] to `unwatch`, [modules that could not
    be watched], read whole)."""
    swapped, whole = [], []
    for mod in modules:
        cls = type(mod)
        if cls in _ORIGINAL:
            continue
        sub = _watcher(cls)
        _LOG[sub] = log
        try:
            mod.__class__ = sub
        except TypeError:  # a class whose instances cannot change class (slots, a ScriptModule): read it whole
            whole.append(mod)
            continue
        swapped.append((mod, cls))
    return swapped, whole


def own_class(obj: Any) -> type:
    """The class of `obj` as its code defines it (not the watching subclass the memo may have swapped in)."""
    return _ORIGINAL.get(type(obj), type(obj))


def unwatch(swapped: list[tuple[Any, type]]) -> None:
    for mod, cls in swapped:
        if type(mod) is _WATCHED.get(cls):
            mod.__class__ = cls


def held(module: Any, name: str) -> Any:
    """What `module` holds under `name` (MISSING where nothing); WHOLE: its attributes, less torch's own."""
    d = getattr(module, "__dict__", None)
    if d is None:
        return MISSING
    if name in HOOKS:  # the hooks themselves (their keys are handles' numbers, new at each registration)
        return tuple((d.get(name) or {}).values())
    if name == WHOLE:  # less the memo's own forwards and the numbers it tracks (archviz/shapes/layerpaths.py)
        return {k: v for k, v in d.items() if k not in _INTERNAL and not getattr(v, SHIM, False)
                and not isinstance(v, Tracked)}
    return d.get(name, MISSING)


_PLAIN = (int, float, complex, str, bytes, bool, type(None), torch.dtype, torch.device, type, range, slice)


def same(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether `b` would lead a forward the way `a` led it: equal values, into containers and plain objects; a
    tensor by shape, dtype and device (and values where it holds some, up to 4,096 of them)."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b) or depth > 8:
        return False
    if t in _PLAIN or isinstance(a, enum.Enum):
        return a == b or (t is float and math.isnan(a) and math.isnan(b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k], depth + 1) for k, v in a.items())
    if isinstance(a, (set, frozenset)):
        return a == b
    if isinstance(a, torch.Tensor):
        return _same_tensor(a, b)
    if isinstance(a, torch.nn.Module):
        return False  # a module held outside `_modules`: only itself is itself
    if isinstance(a, types.FunctionType):
        return a.__code__ is b.__code__ and same(a.__defaults__, b.__defaults__, depth + 1) and \
            same(a.__kwdefaults__, b.__kwdefaults__, depth + 1) and \
            same(_cells(a), _cells(b), depth + 1)
    if isinstance(a, types.MethodType):
        # a method of the module itself (`self.attend = self._local`): its attributes are watched on their own
        own = isinstance(a.__self__, torch.nn.Module) and isinstance(b.__self__, torch.nn.Module)
        return same(a.__func__, b.__func__, depth + 1) and (own or same(a.__self__, b.__self__, depth + 1))
    if isinstance(a, functools.partial):
        return same((a.func, a.args, a.keywords), (b.func, b.args, b.keywords), depth + 1)
    if isinstance(a, (types.BuiltinFunctionType, types.ModuleType)):
        return False  # not the same object (checked above)
    return _same_object(a, b, depth)


def _cells(fn: types.FunctionType) -> tuple:
    return tuple(c.cell_contents if _filled(c) else MISSING for c in fn.__closure__ or ())


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.is_meta or a.numel() > 4096:
        return True
    try:
        return bool(torch.equal(a, b))
    except Exception:  # noqa: BLE001 - a tensor that cannot be compared (a subclass): taken as different
        return False


def _same_object(a: Any, b: Any, depth: int) -> bool:
    """Plain objects (a config, a dataclass, a small state holder) by their attributes; others by `==`."""
    da, db = getattr(a, "__dict__", None), getattr(b, "__dict__", None)
    slots = [s for c in type(a).__mro__ for s in getattr(c, "__slots__", ()) if isinstance(s, str)]
    if isinstance(da, dict) and isinstance(db, dict) or slots:
        if not same(da if isinstance(da, dict) else {}, db if isinstance(db, dict) else {}, depth + 1):
            return False
        return all(same(getattr(a, s, MISSING), getattr(b, s, MISSING), depth + 1) for s in slots)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object whose == cannot answer: taken as different
        return False


def hooked(modules: Any) -> bool:
    """Whether any of `modules` has hooks of its own (a per-module `register_forward_hook`)."""
    return any(m.__dict__.get(h) for m in modules for h in HOOKS)


def uneven(value: Any, depth: int = 0) -> bool:
    """Whether `value` is a list or tuple whose items differ, or a plain object (a config) holding one (depth 0): what
    a layer number could index where no Python method sees it (`config.layer_types[self.layer_idx]`)."""
    if isinstance(value, (list, tuple)):
        return len(value) > 1 and any(not same(value[0], x) for x in value[1:])
    if depth == 0 and _objectish(value):
        d = getattr(value, "__dict__", None)
        return isinstance(d, dict) and any(uneven(v, 1) for v in d.values())
    return False


def holds_all(reads: tuple[tuple[str, str, Any], ...], module_at: Callable[[str], Any]) -> bool:
    """Whether every read (path below the block, name, value) finds the same value on the block whose modules
    `module_at(path)` gives."""
    for rel, name, value in reads:
        mod = module_at(rel)
        if mod is None or not same(value, held(mod, name)):
            return False
    return True


__all__ = ["HOOKS", "MISSING", "WHOLE", "Read", "Reads", "held", "holds_all", "hooked", "own_class", "same", "uneven", "unwatch", "watch"]

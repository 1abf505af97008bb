"""Native code a model's modules compile or load when imported, answered without compiling anything.

Research code builds its kernels when imported: `torch.utils.cpp_extension.load(name, sources=[... .cu])` or
`load_inline(...)`, `torch.ops.load_library(path)`, after checking `CUDA_HOME`; it decorates helpers with `@numba.jit`
/ `@njit` / `@vectorize`, `@torch.jit.script` or `@torch.compile`. None of it runs while a model is built on meta, and
none of it can run here (no compiler, no CUDA toolkit, numba not installed). Inside `native_answered(stubs, note)`,
around the import of the model's code:
- `load` and `load_inline` compile nothing: they return a stub module of the extension's name (from `stubs`, so the
  records list it and its functions are answered by shape rules in the meta pass); `torch.ops.load_library` loads
  nothing;
- `CUDA_HOME` (and `ROCM_HOME`), read from `torch.utils.cpp_extension` while unset, answer a stand-in path, so a
  check that the toolkit is there passes (nothing is compiled with it);
- a compiled package used for its decorators that is not installed (`DECORATOR_PACKAGES`: numba) imports as a stand-in
  whose decorators pass each function through uncompiled (`prange` is `range`); the model's forward never calls such
  helpers on meta, and where a helper runs it runs as the Python it was written as;
- `@torch.jit.script` and `@torch.compile` keep the Python function (`meta.scripts_kept_python`);
- torch.cuda's queries at module level (`DEVICE = torch.cuda.current_device()`) are answered as in a build
  (`cuda_queries`), and `.cuda()` of a tensor made at import keeps it on the CPU, where CUDA is not here;
- downloads are skipped (`offline`): a name bound at import (`from torch.hub import load_state_dict_from_url`)
  skips them when the build calls it.
`note(what, how)` is told of each, once per place in the model's code, for the build's notes.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import sys
import types
from typing import Any, Callable, Iterator

from .cuda_queries import cuda_answered
from .meta import model_line, scripts_kept_python
from .offline import nothing_fetched
from .stubs import EXTENSION_MODULES, StubModule, StubRegistry, pip_name
from ..errors import option

#: Compiled packages that module code uses only through decorators and a few helpers (`numba.jit`, `numba.prange`):
#: when not installed they import as stand-ins whose decorators return the function itself.
DECORATOR_PACKAGES = frozenset({"numba"})
#: Helpers of those packages that are plain Python once uncompiled.
_PLAIN = {"prange": range, "literal_unroll": lambda x: x, "objmode": contextlib.nullcontext}
#: What `CUDA_HOME` answers while the model's code is imported and the toolkit is not here.
STAND_IN_HOME = "/usr/local/cuda"


class Notes:
    """Each note once, `what at file:line how`, in the order they came."""

    def __init__(self, items: list[str]):
        self.items = items

    def __call__(self, what: str, how: str) -> None:
        note = f"{what} at {model_line()} {how}"
        if note not in self.items:
            self.items.append(note)


class _PassThrough:
    """A name of a stand-in package: called on a function or class (a decorator), it returns it unchanged; called
    otherwise (`numba.jit(nopython=True)`, a signature such as `numba.float64(numba.int64)`), another pass-through."""

    def __init__(self, qualname: str, note: Callable[[str, str], None]):
        self.__qualname__ = self.__name__ = qualname
        self._note = note

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], (types.FunctionType, type)):
            top = self.__qualname__.split(".")[0]
            self._note(f"@{self.__qualname__.removesuffix('()')} on {args[0].__name__}",
                       f"passed it through uncompiled: {top} is not installed (pip install {pip_name(top)} to "
                       "compile it; the build never calls it)")
            return args[0]
        return _PassThrough(f"{self.__qualname__.removesuffix('()')}()", self._note)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _named(name, f"{self.__qualname__}.{name}", self._note)

    def __getitem__(self, key: Any) -> "_PassThrough":  # a type signature: `numba.float64[:, :]`
        return self

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)

    def __repr__(self) -> str:
        return f"<archviz stand-in {self.__qualname__}>"


def _named(name: str, qualname: str, note: Callable[[str, str], None]) -> Any:
    return _PLAIN.get(name) or _PassThrough(qualname, note)


class _StandIn(types.ModuleType):
    """A decorator package that is not installed: every name is a pass-through (or its plain Python helper)."""

    def __init__(self, name: str, note: Callable[[str, str], None]):
        super().__init__(name)
        self.__archviz_stub__ = True
        self.__version__ = "0.0.0"
        self.__path__: list[str] = []
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        self._note = note

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _named(attr, f"{self.__name__}.{attr}", self._note)


class _StandInFinder:
    """Last on `sys.meta_path`: a DECORATOR_PACKAGES package (or its submodule) that no other finder found."""

    def __init__(self, stubs: StubRegistry, note: Callable[[str, str], None]):
        self.stubs = stubs
        self.note = note
        self.made: list[str] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.split(".")[0] not in DECORATOR_PACKAGES | EXTENSION_MODULES:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)  # type: ignore[arg-type]

    def create_module(self, spec: Any) -> Any:
        top = spec.name.split(".")[0]
        self.made.append(spec.name)
        if top in EXTENSION_MODULES:
            return self.stubs.module(spec.name, "a kernel package's compiled CUDA extension, not built here")
        self.stubs.modules.setdefault(top, f"not installed (pip install {pip_name(top)}): its decorators pass "
                                           "functions through uncompiled")
        return _StandIn(spec.name, self.note)

    def exec_module(self, module: Any) -> None:
        return None


@contextlib.contextmanager
def _cuda_home_answered(ext: Any, note: Callable[[str, str], None]) -> Iterator[None]:
    """`CUDA_HOME`/`ROCM_HOME` of `torch.utils.cpp_extension`, while unset, answered STAND_IN_HOME when read."""
    unset = [n for n in ("CUDA_HOME", "ROCM_HOME") if n in vars(ext) and vars(ext)[n] is None]

    own = vars(ext).get("__getattr__")  # the module's own (PEP 562), asked for every other name

    def read(name: str) -> Any:
        if name in unset:
            note(f"{name} (unset: no CUDA toolkit here)", f"answered {STAND_IN_HOME!r}: nothing is compiled")
            return STAND_IN_HOME
        if own is not None:
            return own(name)
        raise AttributeError(f"module {ext.__name__!r} has no attribute {name!r}")

    for n in unset:
        delattr(ext, n)
    ext.__getattr__ = read
    try:
        yield
    finally:
        if own is not None:
            ext.__getattr__ = own
        else:
            del ext.__getattr__
        for n in unset:
            setattr(ext, n, None)


@contextlib.contextmanager
def _cuda_moves_kept(note: Callable[[str, str], None]) -> Iterator[None]:
    """`.cuda()` of a tensor made at import (a module-level table), where CUDA is not here: the tensor stays where it
    is (the build moves what a model keeps to meta)."""
    import torch

    if torch.cuda.is_available():
        yield
        return
    saved = torch.Tensor.cuda

    def cuda(self: Any, *args: Any, **kwargs: Any) -> Any:
        note(".cuda() while importing", "kept on the CPU: no GPU here")
        return self

    torch.Tensor.cuda = cuda  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.cuda = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def native_answered(stubs: StubRegistry, notes: list[str]) -> Iterator[None]:
    """The model's import-time native code answered inside (see the module doc); each answer appended to `notes`."""
    import torch
    import torch.utils.cpp_extension as ext

    note = Notes(notes)

    def load(name: str, sources: Any = (), *args: Any, **kwargs: Any) -> Any:
        files = [os.path.basename(str(s)) for s in ([sources] if isinstance(sources, str) else sources or ())]
        return _extension("load", name, ", ".join(files) or "its sources", kwargs.get("is_python_module", True))

    def load_inline(name: str, *args: Any, **kwargs: Any) -> Any:
        return _extension("load_inline", name, "inline sources", kwargs.get("is_python_module", True))

    def _extension(how: str, name: str, made_of: str, python_module: Any) -> Any:
        module = stubs.module(str(name), f"a C++/CUDA extension compiled at import ({made_of}): not compiled")
        stubs.extensions.add(str(name))
        if not python_module:  # its ops registered with torch (`torch.ops.wkv6.forward(...)`): that namespace
            setattr(torch.ops, str(name), module)
        note(f"torch.utils.cpp_extension.{how}({name!r}) of {made_of}",
             "not compiled (archviz builds on meta): its " + ("module" if python_module else f"torch.ops.{name}") +
             " is a stub, each function answered by its shape rule, else as writing into the tensors it is given")
        return module if python_module else None

    def load_library(path: Any) -> None:
        note(f"torch.ops.load_library({os.path.basename(str(path))!r})", "not loaded (archviz builds on meta)")

    finder = _StandInFinder(stubs, note)
    saved = (ext.load, ext.load_inline)
    ext.load, ext.load_inline = load, load_inline  # type: ignore[assignment]
    torch.ops.load_library = load_library  # type: ignore[method-assign] # an attribute of this _Ops object only
    sys.meta_path.append(finder)  # type: ignore[arg-type]
    try:
        with _cuda_home_answered(ext, note), scripts_kept_python(note), cuda_answered(note), \
                _cuda_moves_kept(note), nothing_fetched(note, loads=False):
            yield
    finally:
        ext.load, ext.load_inline = saved  # type: ignore[assignment]
        vars(torch.ops).pop("load_library", None)  # its class's method again
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)  # type: ignore[arg-type]
        for name in finder.made:  # the model's modules keep theirs; the next import finds the package anew
            if isinstance(sys.modules.get(name), (_StandIn, StubModule)):
                del sys.modules[name]


def import_failure_hint(error: BaseException) -> str:
    """The hint of an import of the model's code that raised `error`: archviz's own answer where it gave one (a
    package that is not installed, called at import: "pip install X"), else the traceback; never advice to edit the
    model's code."""
    hint = getattr(error, "hint", None)
    if isinstance(hint, str) and hint:
        return hint
    return f"the model's code raised this while being imported (run with {option('debug')} for the traceback)"

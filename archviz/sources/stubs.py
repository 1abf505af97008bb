"""Stand-ins for modules that cannot be imported (custom kernels, missing optional dependencies).

A stub module answers every attribute with a `StubFunction` named after it and remembers which names were taken, so
the records can say exactly what was stubbed (e.g. `kernel.act_quant`). Calling a stub runs the shape rule registered
for its name when a meta forward pass is active; outside a pass a kernel package's stub answers what a module does
at import (decorators, configs: `StubFunction._configure`), and any other stub raises `StubCalled`.
"""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Any, Callable, Iterator

from ..errors import ShapeError

#: Packages that cannot be installed on a machine without their GPU toolchain (CUDA kernels, compilers): stubbed
#: with their submodules, their entry points answered by shape rules. Any other package the model imports and that
#: is not installed is stubbed too, but calling into it says to install it: it is Python that runs on meta.
KERNEL_PACKAGES = frozenset({
    "triton", "xformers", "flash_attn", "flash_attn_interface", "fast_hadamard_transform", "tilelang", "mamba_ssm",
    "causal_conv1d", "mlstm_kernels", "deep_gemm", "transformer_engine", "apex", "flashinfer", "selective_scan_cuda",
    "causal_conv1d_cuda", "fla", "liger_kernel", "bitsandbytes", "kernel",
})
#: The compiled CUDA extensions of kernel packages (their setup's ext_modules), imported only by the package's own
#: wrappers, which have no path without them: stubbed even where the import is guarded (`try: import
#: selective_scan_cuda` / `except ImportError: selective_scan_cuda = None`), so those wrappers run on meta and the
#: extension's functions are answered by shape rules.
EXTENSION_MODULES = frozenset({"selective_scan_cuda", "causal_conv1d_cuda"})
#: A kernel package's queries of the device it runs on (`triton.runtime.driver.active.get_current_target()`,
#: read at import to pick a backend): they raise as the package does on a machine without a GPU, so the code takes
#: its CPU path (`except Exception: return "cpu"`) instead of carrying a stub on.
_NO_DEVICE = ("triton.runtime.driver.",)
#: How a call of a function of a C++/CUDA extension the model compiles at import is answered where no shape rule
#: names it: as a kernel that writes into the tensors it is given (`wkv6.forward(B, T, C, H, r, k, v, w, u, y)`).
EXTENSION_CALL = "torch.utils.cpp_extension.load"
#: torch's modules that look for a kernel package when first imported and keep what they find
#: (`torch.utils.flop_counter` binds triton's JITFunction and tests `isinstance` against it ever after).
_PROBERS = ("torch.utils.flop_counter",)
# Import names whose pip distribution is named otherwise.
_PIP_NAMES = {"yaml": "pyyaml", "PIL": "pillow", "cv2": "opencv-python", "sklearn": "scikit-learn",
              "google": "protobuf", "attr": "attrs"}


def pip_name(module: str) -> str:
    """The pip distribution of an import name (`yaml` -> `pyyaml`; most are their own)."""
    top = module.split(".")[0]
    return _PIP_NAMES.get(top, top)


#: What module code reads back from the commonest import-time calls of kernel packages, by parameter name, and their
#: defaults: `[c for c in configs if c.num_warps <= 8]`, `min(c.kwargs["BLOCK"] for c in kernel.configs)`.
_IMPORT_SIGNATURES: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "triton.Config": (("kwargs", "num_warps", "num_stages", "num_ctas"),
                      {"kwargs": {}, "num_warps": 4, "num_stages": 3, "num_ctas": 1}),
}


class MissingPackage(ShapeError):
    """The model called into a package that is not installed and that runs on meta once it is (einops, fairscale):
    installing it is the answer, not a shape rule."""


class StubCalled(RuntimeError):
    """A stubbed function was called with no shape rule to answer for it."""

    def __init__(self, qualname: str):
        super().__init__(qualname)
        self.qualname = qualname


# Set by the shape pass: (qualname, args, kwargs) -> result. None outside a meta forward pass.
_call_handler: Callable[[str, tuple, dict], Any] | None = None


def set_call_handler(handler: Callable[[str, tuple, dict], Any] | None) -> Callable | None:
    global _call_handler
    previous, _call_handler = _call_handler, handler
    return previous


#: What a kernel package's names are instead of stubs, by qualified name: its classes (`RMSNorm` of mamba_ssm's
#: triton norms: an nn.Module holding the package's documented parameters, so they are counted) and factories.
#: Registered by the shape stage's kernel rules (`stand_in`).
_STAND_INS: dict[str, Any] = {}


def stand_in(*names: str) -> Callable[[Any], Any]:
    """Register `cls` (a class, or a function) as what the stubbed name(s) `names` (qualified:
    `package.module.Class`) are: the model's code imports it in the stub's place."""

    def deco(cls: Any) -> Any:
        for n in names:
            _STAND_INS[n] = cls
        return cls

    return deco


def through_rule(qualname: str, rule: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A stand-in's call of its package's kernel `qualname`: answered as a stub's call is inside a meta pass (so
    the pass notes the kernel and its FLOPs), else `rule` itself."""
    if _call_handler is not None:
        return _call_handler(qualname, args, kwargs)
    return rule(*args, **kwargs)


class StubFunction:
    """A callable stand-in; also usable as a decorator factory (`@tilelang.jit(...)`), a class or a namespace."""

    def __init__(self, qualname: str, registry: "StubRegistry"):
        self.__qualname__ = qualname
        self.__name__ = qualname.rsplit(".", 1)[-1]
        self.__module__ = qualname.rsplit(".", 1)[0] if "." in qualname else qualname
        self._registry = registry
        self._given: dict[str, Any] = {}  # a call's arguments by name, read back as attributes
        self._made_by: str | None = None  # the kernel package's decorator that made it from the model's function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        installable = self.__qualname__.split(".")[0] in self._registry.installable
        if _call_handler is not None:
            try:
                return _call_handler(self.__qualname__, args, kwargs)
            except ShapeError as e:
                if self._made_by is not None and "has no shape rule" in e.message:
                    # the model's own kernel (`@triton.jit def _fwd_kernel`): answered as its decorator's kind is
                    # (`triton.jit(name)`: a launch writes into the tensors it is given), where a rule says how
                    return _call_handler(f"{self._made_by}({self.__qualname__})", args, kwargs)
                if not installable or "has no shape rule" not in e.message:
                    raise
        if installable and (self._registry.importing or self._registry.assembling):
            # a missing plain package called while the model's code is imported (`matplotlib.use("Agg")`, a
            # decorator): what it configures is never read by a build; a function it decorates stays itself. While
            # a factory assembles what may be a job's config (`StubRegistry.assembling`), the same, remembered
            if len(args) == 1 and not kwargs and isinstance(args[0], (types.FunctionType, type)):
                return args[0]
            made = self._configure(args, kwargs)
            if not self._registry.importing:
                self._registry.assumed.append((self.__qualname__, made))
            return made
        if installable:
            raise self._registry.not_installed(self.__qualname__) from None
        if self.__qualname__.startswith(_NO_DEVICE):  # asked for the GPU it runs on: none, as on a CPU machine
            raise RuntimeError(f"{self.__qualname__}: 0 active drivers (archviz builds without a GPU)")
        if self.__qualname__.split(".")[0] in KERNEL_PACKAGES:
            return self._configure(args, kwargs)
        raise StubCalled(self.__qualname__)

    def _configure(self, args: tuple, kwargs: dict) -> "StubFunction":
        """A kernel package's call outside a pass: what a module does when it is imported (`@triton.jit`,
        `@triton.autotune(configs=[triton.Config(...)], key=[...])`, `@tilelang.jit(out_idx=...)`). A decorator
        applied to the model's own function gives a stub named after that function (`model._kernel`, its shape rule's
        name), which keeps what its decorators were given (`_kernel.configs`); a stub passes through further
        decorators; any other call gives a stub named after the call, which reads back what it was given
        (`triton.Config({"BLOCK": 64}, num_warps=4)`: `.kwargs["BLOCK"]`, `.num_warps`, `.num_stages` 3 by default)."""
        if len(args) == 1 and not kwargs:
            target = args[0]
            # a kernel wrapped by the model's subclass of a package class (`class Tuner(triton Autotuner)`)
            target = getattr(target, "__dict__", {}).get("_archviz_wraps") or target
            if isinstance(target, (types.FunctionType, type)):
                target = self._registry.function(f"{target.__module__}.{target.__qualname__}")
                target._made_by = self.__qualname__.removesuffix("()")  # `triton.jit`: how a launch is answered
            if isinstance(target, StubFunction):
                for key, value in self._given.items():
                    target.__dict__.setdefault(key, value)
                return target
        made = self._registry.function(f"{self.__qualname__}()")
        names, defaults = _IMPORT_SIGNATURES.get(self.__qualname__, ((), {}))
        given = {**defaults, **dict(zip(names, args)), **kwargs}
        if not given:
            return made
        call = StubFunction(made.__qualname__, self._registry)  # its own: reads back what it was given
        call._given = {k: v for k, v in given.items() if not k.startswith("_")}
        call.__dict__.update(call._given)
        return call

    def __getitem__(self, key: Any) -> "StubFunction":
        """A launch grid (`kernel[grid](...)`, triton's and tilelang's syntax) is the kernel itself."""
        return self

    def __iter__(self) -> Any:
        """Empty: `for tag in ExifTags.TAGS:` at import of a missing package's table runs no step (without this,
        Python iterates by __getitem__(0), (1), ... and never stops)."""
        return iter(())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._registry.function(f"{self.__qualname__}.{name}")

    def __repr__(self) -> str:
        return f"<archviz stub {self.__qualname__}>"

    def __mro_entries__(self, bases: tuple) -> tuple:
        """A base class from a package that is not there (`class Model(pl.LightningModule)`, `class
        Pipe(PipelineModule, nn.Module)`): nothing beside an nn.Module (the MRO stays whole), else a base that makes
        the class an nn.Module where its body defines `forward` (`missing_base`)."""
        import torch

        if any(isinstance(b, type) and (issubclass(b, torch.nn.Module) or type(b) is not type) for b in bases):
            return ()  # a module already, or a base of its own metaclass (which ours would conflict with)
        return (missing_base(self.__qualname__, self._registry),)

    def __or__(self, other: Any) -> Any:
        return Any

    __ror__ = __or__

    # `isinstance(x, container_abcs.Iterable)` with a module the installed version no longer has: nothing is an
    # instance (or a subclass) of what is not there
    def __instancecheck__(self, instance: Any) -> bool:
        return False

    def __subclasscheck__(self, subclass: Any) -> bool:
        return False


class StubModule(types.ModuleType):
    """A module whose every attribute is a `StubFunction`, recorded when it is first taken."""

    def __init__(self, name: str, registry: "StubRegistry", reason: str):
        super().__init__(name)
        self.__archviz_stub__ = True
        self.__archviz_reason__ = reason
        self.__version__ = "0.0.0"  # read at import to pick code paths (`version.parse(triton.__version__)`): none new
        self.__path__: list[str] = []  # a package: `import name.sub.mod` gets a stub submodule (_SubmoduleFinder)
        import importlib.machinery

        # a spec, so that importlib.util.find_spec(name) answers as for an installed package
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        self._registry = registry
        _SubmoduleFinder.install()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return self._registry.function(f"{self.__name__}.{attr}")


class _SubmoduleFinder:
    """On `sys.meta_path`: a submodule of a stub module (`fairscale.nn.model_parallel.initialize`, `xformers.ops.fmha`,
    `triton.language`) is a stub module too, of the same registry. Names under no stub are left to the other
    finders."""

    installed = False

    @classmethod
    def install(cls) -> None:
        if not cls.installed:
            sys.meta_path.append(cls())  # type: ignore[arg-type]
            cls.installed = True

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        parent = sys.modules.get(name.rpartition(".")[0]) if "." in name else None
        if not isinstance(parent, StubModule):
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: Any) -> Any:
        parent = sys.modules[spec.name.rpartition(".")[0]]
        return parent._registry.module(spec.name, parent.__archviz_reason__)

    def exec_module(self, module: Any) -> None:
        return None


class StubRegistry:
    """The stub modules of one build and every name taken from them."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # module name -> reason
        self.names: dict[str, StubFunction] = {}
        self.stood_in: set[str] = set()  # names taken that a stand-in answered
        self.installable: set[str] = set()  # top-level packages not installed that pip would install
        self.importing = False  # the model's code is being imported (archviz.sources.importer sets it)
        self.native_notes: list[str] = []  # what its import was answered with (native code, bases) and warned
        self.assembling = False  # a factory runs whose result may hold the model beside other parts (`assembling`)
        self.assumed: list[tuple[str, Any]] = []  # (qualname, the stub it returned) of each call answered so (`assembling_job`)
        self.extensions: set[str] = set()  # C++/CUDA extensions the model's code compiles at import (not compiled)

    def module(self, name: str, reason: str) -> StubModule:
        self.modules.setdefault(name, reason)
        return StubModule(name, self, reason)

    def missing(self, name: str) -> StubModule:
        """A stub for a package that is not installed: a kernel package (KERNEL_PACKAGES) is answered by shape
        rules; any other says to install it when the model calls into it."""
        top = name.split(".")[0]
        if top in KERNEL_PACKAGES:
            import importlib

            for prober in _PROBERS:  # imported before the stub exists: they must never keep one
                importlib.import_module(prober)
            return self.module(name, "a GPU kernel package, not installable here")
        self.installable.add(top)
        return self.module(name, f"not installed (pip install {pip_name(top)})")

    @contextlib.contextmanager
    def assembling_job(self) -> Iterator[None]:
        """While a factory runs whose result may be a training job's config (its model spec beside its data,
        optimizer and logging parts): a call into a missing plain package answers a stub, as at import, and is
        remembered in `assumed`; the caller decides afterwards whether the model needed it (`sources.construct`)."""
        was, self.assembling = self.assembling, True
        self.assumed.clear()
        try:
            yield
        finally:
            self.assembling = was

    def not_installed(self, qualname: str) -> MissingPackage:
        top = qualname.split(".")[0]
        return MissingPackage(f"the model calls {qualname}, and {top} is not installed",
                              hint=f"pip install {pip_name(top)} (plain Python: it runs on meta once installed)")

    def function(self, qualname: str) -> Any:
        """The stub of `qualname`, made once; a name with a stand-in (`stand_in`) is that class itself, so module code
        may also subclass it and test `isinstance(m, (nn.LayerNorm, RMSNorm))`."""
        made = _STAND_INS.get(qualname)
        if made is not None:
            self.stood_in.add(qualname)
            return made
        fn = self.names.get(qualname)
        if fn is None:
            fn = self.names[qualname] = StubFunction(qualname, self)
            if qualname.split(".")[0] in self.extensions and "." in qualname:  # a function of an extension
                fn._made_by = EXTENSION_CALL
        return fn

    def taken(self) -> tuple[str, ...]:
        """Stubbed modules and the names taken from them, sorted: `kernel`, `kernel.act_quant`, ..."""
        out = set(self.modules)
        out.update(self.names)
        out.update(self.stood_in)
        return tuple(sorted(out))


class MissingBaseAttribute(AttributeError):
    """A name the model reads from a base class whose package is not installed (`self.save_hyperparameters()` of a
    LightningModule built as a plain nn.Module): an AttributeError (so `getattr(m, name, default)` still answers
    its default) whose message says what to install."""


class _MissingBaseMeta(type):
    """The metaclass of a missing package's base class: a subclass whose body defines `forward` (the nn.Module
    protocol) is made on `torch.nn.Module` instead, noted; any other stays a plain class."""

    def __new__(mcls, name: str, bases: tuple, ns: dict, **kwargs: Any) -> Any:
        missing = next((b for b in bases if isinstance(b, _MissingBaseMeta) and "_archviz_base_of" in b.__dict__),
                       None)
        if missing is None or "forward" not in ns:
            return super().__new__(mcls, name, bases, ns, **kwargs)
        qualname, registry = missing._archviz_base_of
        module_base = _module_base(qualname, registry)
        made = type(name, tuple(module_base if b is missing else b for b in bases), dict(ns), **kwargs)
        registry.native_notes.append(f"{name}'s base {qualname} is not installed (pip install "
                                     f"{pip_name(qualname)}): {name} built on torch.nn.Module, its forward its own")
        return made


def missing_base(qualname: str, registry: "StubRegistry") -> type:
    """The base class a missing package's `qualname` stands for when a class derives from it alone."""
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # the base's own arguments, whatever they are
        self.__dict__["_archviz_wraps"] = next((a for a in args if isinstance(a, StubFunction)), None)

    def __getattr__(self: Any, name: str) -> Any:  # what a kernel package's base would hold: its stub
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        top = qualname.split(".")[0]
        if top not in KERNEL_PACKAGES:  # `getattr(cfg, name, default)` of a plain package's class keeps its default
            raise MissingBaseAttribute(f"{type(self).__name__} has no {name}: it comes from its base {qualname}, "
                                       f"and {top} is not installed (pip install {pip_name(top)})")
        return registry.function(f"{qualname}.{name}")

    def __getitem__(self: Any, key: Any) -> Any:  # a launch grid: the kernel it wraps (an autotuner subclass)
        return self.__dict__.get("_archviz_wraps") or registry.function(qualname)

    return _MissingBaseMeta(qualname.rsplit(".", 1)[-1], (), {
        "_archviz_base_of": (qualname, registry), "__module__": qualname.rsplit(".", 1)[0], "__init__": __init__,
        "__getattr__": __getattr__, "__getitem__": __getitem__})


def _module_base(qualname: str, registry: "StubRegistry") -> type:
    """An nn.Module standing for the missing base `qualname`: its constructor takes any arguments (the base's own
    are unknown), and a name the model reads from it that nn.Module lacks says what to install."""
    import torch.nn as nn

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nn.Module.__init__(self)

    def __getattr__(self: Any, name: str) -> Any:
        try:
            return nn.Module.__getattr__(self, name)
        except AttributeError:
            if name.startswith("_"):
                raise
            top = qualname.split(".")[0]
            raise MissingBaseAttribute(f"{type(self).__name__} has no {name}: it comes from its base {qualname}, "
                                       f"and {top} is not installed (pip install {pip_name(top)})") from None

    return type(qualname.rsplit(".", 1)[-1], (nn.Module,), {"__init__": __init__, "__getattr__": __getattr__,
                                                            "__module__": qualname.rsplit(".", 1)[0]})

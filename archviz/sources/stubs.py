"""Stand-ins for modules that cannot be imported (custom kernels, missing optional dependencies).

A stub module answers every attribute with a `StubFunction` named after it and remembers which names were taken, so
the records can say exactly what was stubbed (e.g. `kernel.act_quant`). Calling a stub runs the shape rule registered
for its name when a meta forward pass is active; outside a pass a kernel package's stub answers what a module does
at import (decorators, configs: `StubFunction._configure`), and any other stub raises `StubCalled`.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

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
        if installable and self._registry.importing:
            # a missing plain package called while the model's code is imported (`matplotlib.use("Agg")`, a
            # decorator): what it configures is never read by a build; a function it decorates stays itself
            if len(args) == 1 and not kwargs and isinstance(args[0], (types.FunctionType, type)):
                return args[0]
            return self._configure(args, kwargs)
        if installable:
            raise self._registry.not_installed(self.__qualname__) from None
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

    # Allow use as a base class or in type annotations without failing at import time.
    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)

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
        self.native_notes: list[str] = []  # what its import-time native code was answered with (sources.native)

    def module(self, name: str, reason: str) -> StubModule:
        self.modules.setdefault(name, reason)
        return StubModule(name, self, reason)

    def missing(self, name: str) -> StubModule:
        """A stub for a package that is not installed: a kernel package (KERNEL_PACKAGES) is answered by shape
        rules; any other says to install it when the model calls into it."""
        top = name.split(".")[0]
        if top in KERNEL_PACKAGES:
            return self.module(name, "a GPU kernel package, not installable here")
        self.installable.add(top)
        return self.module(name, f"not installed (pip install {pip_name(top)})")

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
        return fn

    def taken(self) -> tuple[str, ...]:
        """Stubbed modules and the names taken from them, sorted: `kernel`, `kernel.act_quant`, ..."""
        out = set(self.modules)
        out.update(self.names)
        out.update(self.stood_in)
        return tuple(sorted(out))

"""Stand-ins for modules that cannot be imported (custom kernels, missing optional dependencies).

A stub module answers every attribute with a `StubFunction` named after it and remembers which names were taken, so
the records can say exactly what was stubbed (e.g. `kernel.act_quant`). Calling a stub runs the shape rule registered
for its name when a meta forward pass is active, and otherwise raises `StubCalled`.
"""

from __future__ import annotations

import types
from typing import Any, Callable


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


class StubFunction:
    """A callable stand-in; also usable as a decorator factory (`@tilelang.jit(...)`), a class or a namespace."""

    def __init__(self, qualname: str, registry: "StubRegistry"):
        self.__qualname__ = qualname
        self.__name__ = qualname.rsplit(".", 1)[-1]
        self.__module__ = qualname.rsplit(".", 1)[0] if "." in qualname else qualname
        self._registry = registry

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _call_handler is not None:
            return _call_handler(self.__qualname__, args, kwargs)
        raise StubCalled(self.__qualname__)

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


class StubModule(types.ModuleType):
    """A module whose every attribute is a `StubFunction`, recorded when it is first taken."""

    def __init__(self, name: str, registry: "StubRegistry", reason: str):
        super().__init__(name)
        self.__archviz_stub__ = True
        self.__archviz_reason__ = reason
        self.__path__: list[str] = []  # a package, so `import name.sub` works too
        self._registry = registry

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return self._registry.function(f"{self.__name__}.{attr}")


class StubRegistry:
    """The stub modules of one build and every name taken from them."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # module name -> reason
        self.names: dict[str, StubFunction] = {}

    def module(self, name: str, reason: str) -> StubModule:
        self.modules.setdefault(name, reason)
        return StubModule(name, self, reason)

    def function(self, qualname: str) -> StubFunction:
        fn = self.names.get(qualname)
        if fn is None:
            fn = self.names[qualname] = StubFunction(qualname, self)
        return fn

    def taken(self) -> tuple[str, ...]:
        """Stubbed modules and the names taken from them, sorted: `kernel`, `kernel.act_quant`, ..."""
        out = set(self.modules)
        out.update(self.names)
        return tuple(sorted(out))

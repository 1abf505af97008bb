"""Which class or builder function of a model file is the model.

A candidate is an nn.Module class of the file whose constructor takes the config (or, with no config, builds from
its defaults and the `overrides` values), or a builder function of the file (`build_sam_vit_b()`, `DiT_XL_2(**kwargs)`:
public, returning what it makes from the file's classes or builders) that the same values let be called. The root
model is the candidate no other class of the file instantiates, read from the code (its AST: the names it calls or
picks to call, never words in a docstring, never a `class Wrapper(Base)` line: a subclass is a candidate beside its
base, not a reason to drop it).
Classes come first; builders are the model where no class builds alone. Of several roots, a subclass gives way to
its base, a class that makes no weights (a loss) to one that does, and one whose constructor needs its layer's number
(`layer_id`: a block variant nothing instantiates) to one that does not, and a class its config class names in a
string (a part picked by name: `mlp_class_name: "GptNeoxMLP"`) to one it does not; any still left are listed with
their signatures.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import textwrap
from typing import Any, Callable

from ..errors import SourceError, option
from .configs import _config_param, _fit, _init_params
from .options import suggest

_PREFERRED = ("Transformer", "Model", "CausalLM")
# torch.nn modules that hold weights (a loss, an activation, dropout or pooling holds none)
_WEIGHTED_TORCH = ("linear", "conv", "normalization", "batchnorm", "instancenorm", "sparse", "rnn", "transformer")


def _own(obj: Any, module: Any) -> bool:
    """Defined in `module`, or, for a package, in one of its modules (what its `__init__` gathers)."""
    where = getattr(obj, "__module__", None) or ""
    return where == module.__name__ or hasattr(module, "__path__") and where.startswith(module.__name__ + ".")


def classes_in(module: Any) -> list[type]:
    import torch

    found = [v for v in vars(module).values()
             if inspect.isclass(v) and issubclass(v, torch.nn.Module) and _own(v, module)]
    return list(dict.fromkeys(found))  # once each: `Model = DetectionModel` names one class twice


def _tree(obj: Any) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(obj)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None


def _called_names(obj: Any) -> set[str]:
    """The names the code of `obj` calls (`Block(...)`, `nn.Linear(...)` as `Linear`, `self.x = Foo(...)`)."""
    tree = _tree(obj)
    out: set[str] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute):
                out.add(f.attr)
    return out


def _named_in_code(obj: Any) -> set[str]:
    """The names the code of `obj` uses (`Block(...)`, `ResBlock1 if ... else ResBlock2`, `nn.Linear` as `Linear`),
    read from its AST: never a docstring's words, never its own bases (`class Wrapper(Base)`), nor
    `super(Base, self)`."""
    tree = _tree(obj)
    if tree is None:
        return set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            skip.update(id(n) for b in node.bases for n in ast.walk(b))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super":
            skip.update(id(n) for a in node.args for n in ast.walk(a))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
    return out


def _resolved_calls(obj: Any, module: Any) -> list[Any]:
    """What the calls of `obj`'s code name, looked up in its module (names it cannot resolve left out)."""
    import torch

    scope = {**vars(module), **vars(inspect.getmodule(obj) or module)}  # where it is defined, first
    return [x for n in _called_names(obj)
            if (x := scope.get(n, getattr(torch.nn, n, None) if n[:1].isupper() else None)) is not None]


def _weighs(cls: type, module: Any, seen: set[type] | None = None) -> bool:
    """Whether `cls` may make weights: it calls nn.Parameter, a torch.nn layer with weights, a class of the file
    that does (its bases of the file too), or a function of the file. Read from the code, never built."""
    import torch

    seen = seen if seen is not None else set()
    if cls in seen:
        return False
    seen.add(cls)
    if cls.__module__.startswith("torch.nn"):
        return cls.__module__.rsplit(".", 1)[-1] in _WEIGHTED_TORCH or cls.__name__ in ("MultiheadAttention", "PReLU")
    for klass in [cls, *[b for b in cls.__mro__[1:] if b.__module__ == cls.__module__]]:
        for x in _resolved_calls(klass, module):
            if x is torch.nn.Parameter or inspect.isclass(x) and issubclass(x, torch.nn.Module) and \
                    _weighs(x, module, seen):
                return True
            if inspect.isfunction(x) and _own(x, module):  # a helper of the file may make the layers: it may
                return True
    return False


def _forwards_to_base(cls: type) -> bool:
    """A subclass whose constructor passes *args/**kwargs on to a base that needs arguments: it needs them too."""
    try:
        own = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return False
    if not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in own):
        return False
    import torch

    return any(any(p.default is p.empty for p in _init_params(b)) for b in cls.__mro__[1:]
               if issubclass(b, torch.nn.Module) and b is not torch.nn.Module and "__init__" in vars(b))


def _takes_keys(cls: type, keys: set[str], given: set[str]) -> bool:
    """The config's keys are keyword arguments of `cls`'s constructor (every one of them), and with the overrides
    they give all it requires: a JSON of a class's arguments (`{"embed_dim": 512, "vision_layers": 12, ...}`)."""
    return keys <= {p.name for p in _init_params(cls)} and _buildable(cls, keys | given)


def _buildable(fn: Any, given: set[str]) -> bool:
    """Every required argument of `fn` is among `given`, and it forwards none it cannot get."""
    if inspect.isclass(fn) and _forwards_to_base(fn):
        return False
    params = _init_params(fn) if inspect.isclass(fn) else [
        p for p in _signature(fn).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    missing = [p.name for p in params if p.default is p.empty and p.name not in given]
    if missing and not inspect.isclass(fn):  # a launcher's namespace its project's argument parser fills
        from .launcher import launcher_defaults, namespace_parameter

        if missing == [namespace_parameter(fn, missing)] and launcher_defaults(fn) is not None:
            return True
    return not missing


def _signature(fn: Any) -> inspect.Signature:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return inspect.Signature()


def builders_in(module: Any) -> list[Callable]:
    """The file's builder functions: public, defined there, returning something and calling a class or another
    builder of the file to make it."""
    import torch

    funcs = {v for k, v in vars(module).items() if inspect.isfunction(v) and _own(v, module)
             and not v.__name__.startswith("_") and not k.startswith("_")}
    makes = {id(c) for c in classes_in(module)}
    out: list[Callable] = []
    for fn in sorted(funcs, key=lambda f: f.__code__.co_firstlineno):
        tree = _tree(fn)
        if tree is None or not any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(tree)):
            continue
        calls = _resolved_calls(fn, module)
        if any(id(x) in makes or (inspect.isfunction(x) and _own(x, module) and x is not fn)
               or inspect.isclass(x) and issubclass(x, torch.nn.Module) for x in calls):
            out.append(fn)
    return out


def signature_of(obj: Any) -> str:
    if inspect.isclass(obj):
        ps = _signature(obj.__init__).parameters.values()
        return f"{obj.__name__}({', '.join(str(p) for p in list(ps)[1:])})"
    return f"{obj.__name__}{_signature(obj)}"


def _roots(cands: list[Any], makers: list[Any]) -> list[Any]:
    """The candidates that no other of `makers` names in its code (calls it, or picks it to call)."""
    called = {id(m): _named_in_code(m) for m in makers}
    return [c for c in cands if not any(c.__name__ in called[id(m)] for m in makers if m is not c)]


_LAYER_NUMBER = re.compile(r"^(layer|block)_?(id|idx|index|i|n|no|num|number)$")


def _takes_layer_number(cls: type) -> bool:
    """Its constructor needs the number of the layer it is (`layer_id`, `layer_idx`): a block, never the model."""
    return any(p.default is p.empty and _LAYER_NUMBER.match(p.name.lower()) for p in _init_params(cls))


def _config_strings(cands: list[type]) -> set[str]:
    """The strings the candidates' config classes hold in their code (`mlp_class_name: Literal["GptNeoxMLP",
    "LLaMAMoE"] = "GptNeoxMLP"`): names of the classes the model picks by name (`getattr(module, name)`)."""
    out: set[str] = set()
    for cfg in {id(t[1]): t[1] for c in cands if (t := _config_param(c)) is not None and t[1] is not None}.values():
        for node in ast.walk(_tree(cfg) or ast.Module(body=[], type_ignores=[])):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return out


def _listing(classes: list[type], builders: list[Callable]) -> str:
    shown = [signature_of(x) for x in [*classes, *builders]]
    return "; ".join(shown) if shown else "none"


def find_model(module: Any, wanted: str | None, keys: set[str] | None, given: set[str] = frozenset()) -> Any:
    """The model of the file: named by `wanted` (a class or builder function, `Class.from_name` too), else the
    root candidate (see the module's docstring). `keys`: the config's keys, None when no config was given; `given`:
    the keyword arguments the user set."""
    classes = classes_in(module)
    builders = builders_in(module)
    name = module.__name__ if module.__file__.endswith("__init__.py") else os.path.basename(module.__file__)
    if wanted:
        return _named(module, wanted, classes, builders)
    cands: list[type] = []
    unfit: list[type] = []  # their config class needs a field the config (or no config) does not give
    for c in classes:
        taken = _config_param(c)
        if taken is not None:
            (unfit if taken[1] is not None and _fit(taken[1], (keys or set()) | given) is None else cands).append(c)
        elif keys is None and _buildable(c, given):  # no config: built from its own defaults and overrides
            cands.append(c)
        elif keys and _takes_keys(c, keys, given):  # the config's keys are its keyword arguments
            cands.append(c)
    if not cands and keys:  # none fits: the one that does not is built, and its config class says what it lacks
        cands = unfit
    for preferred in _PREFERRED:  # the conventional names first, as the releases of reference code name them
        for c in cands:
            if c.__name__ == preferred:
                return c
    top = _roots(cands, classes)
    # the base, not a variant (unless the base makes no weights: an abstract BaseModel its models derive from)
    top = [c for c in top if not any(c is not b and issubclass(c, b) and _weighs(b, module) for b in top)] or top
    if len(top) > 1:
        top = [c for c in top if _weighs(c, module)] or top  # a loss beside the model: the model
    if len(top) > 1:  # a block variant nothing instantiates (it takes its layer's number): the model
        top = [c for c in top if not _takes_layer_number(c)] or top
    if len(top) > 1:  # a part the config picks by its name (`mlp_class_name: "GptNeoxMLP"`): the model
        named = _config_strings(top)
        top = [c for c in top if c.__name__ not in named] or top
    found = [b for b in builders if _buildable(b, (keys or set()) | given)]
    broots = _roots(found, [*classes, *found])
    if top and broots and not any(_weighs(c, module) for c in top):
        top = []  # a post-processor or loss that builds alone, beside a builder of the model: the builder
    if len(top) == 1:
        return top[0]
    if top:
        raise SourceError(f"{name}: {len(top)} candidates could be the model: {_listing(top, [])}",
                          hint=f"name one with {option('model-class')}")
    if len(broots) == 1:
        return broots[0]
    if broots:
        raise SourceError(f"{name}: {len(broots)} builders could make the model: {_listing([], broots)}",
                          hint=f"name one with {option('model-class')}")
    if keys is None:
        likely = _likely_root(module, classes)
        if likely is not None:
            needs = [p.name for p in _init_params(likely) if p.default is p.empty and p.name not in given]
            others = ", ".join(x.__name__ for x in [*classes, *builders] if x is not likely)
            raise SourceError(f"{module.__file__}: no class or builder of the file builds from its defaults alone; "
                              f"the model looks like {signature_of(likely)} (no other class of the file makes it), "
                              f"which needs {', '.join(needs)} (others there: {others or 'none'})",
                              hint=f"give {'it' if len(needs) == 1 else 'them'} with {option('set')} {needs[0]}=VALUE"
                                   f"{'' if len(needs) == 1 else ' ...'}, or {likely.__name__}'s arguments as a JSON "
                                   f"object with {option('config')} path/to/config.json, or name another with "
                                   f"{option('model-class')}")
        raise SourceError(f"{module.__file__}: no class or builder of the file builds from its defaults alone "
                          f"(there: {_listing(classes, builders)})",
                          hint=f"pass its config with {option('config')} path/to/config.json, or give the arguments "
                               f"it needs with {option('set')}, or name the model with {option('model-class')}")
    raise SourceError(f"{name}: no nn.Module class or builder is built from this config alone "
                      f"(there: {_listing(classes, builders)})",
                      hint=f"name the model with {option('model-class')}, or give the arguments it needs with "
                           f"{option('set')}")


_WRAPPED = ("model", "net", "network", "module", "backbone", "denoiser", "unet", "encoder", "decoder")


def _wraps(cls: type) -> bool:
    """A class that wraps a model it is handed (`GaussianDiffusion(model, ...)`): a required argument named for one
    or annotated as an nn.Module."""
    import torch

    return any(p.default is p.empty and (p.name in _WRAPPED or inspect.isclass(p.annotation)
                                         and issubclass(p.annotation, torch.nn.Module)) for p in _init_params(cls))


def _likely_root(module: Any, classes: list[type]) -> type | None:
    """Where nothing builds alone: the one class that makes weights, wraps no model and that no other class of the
    file makes (by the code's calls), or None."""
    weighted = [c for c in classes if not _wraps(c) and _weighs(c, module)
                and any(p.default is p.empty for p in _init_params(c))]
    top = _roots(weighted, classes)  # (a builder of the file makes the model too: it is no reason to drop it)
    return top[0] if len(top) == 1 else None


def _named(module: Any, wanted: str, classes: list[type], builders: list[Callable]) -> Any:
    """model_class: a class of the file, a function there, or `Class.from_name`."""
    import torch

    obj: Any = module
    for part in wanted.split("."):
        obj = getattr(obj, part, None)
    if obj is not None and (inspect.isclass(obj) and issubclass(obj, torch.nn.Module) or
                            callable(obj) and not inspect.isclass(obj)):
        return obj
    names = [c.__name__ for c in classes] + [b.__name__ for b in builders]
    raise SourceError(f"{option('model-class')} {wanted}: no such nn.Module class or builder function in "
                      f"{module.__name__}",
                      hint=suggest(wanted, names) or f"there: {_listing(classes, builders)}")


__all__ = ["builders_in", "classes_in", "find_model", "signature_of"]

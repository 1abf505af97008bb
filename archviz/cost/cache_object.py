"""A cache object passed into forward (`forward(tokens, seqlens, cache: Optional[BufferCache] = None)`), made for a
decode step as the code's own generate makes it: the project's call of that class's constructor, found by AST (never
by a name archviz knows), each argument evaluated on the built model where it reads the variable generate holds the
model in (`model.args.n_kv_heads`, `model.n_layers`, arithmetic of those), else by the constructor parameter it fills
(a batch size: B; a length, window or capacity: the context the step needs); then the calls generate makes on it
before its first forward that take nothing, a device or a dtype (`cache.reset()`, `cache.to(device=..., dtype=...)`),
on meta. What cannot be made so is said in one line (`CacheRecipe.missing`).

A forward argument with no such annotation (`inference_params=None`) is found by data flow: a function of the
project with a decoding loop that makes an object of a project class and passes it into a call of the model; the
attributes that function sets on the object (`params.seqlen_offset += n`) are set to the context before the step.
A state the forward returns and the loop feeds back (`logits, state = forward(token, state)`) is `fed_back_argument`."""

from __future__ import annotations

import ast
import inspect
import math
import operator
import os
import typing
from dataclasses import dataclass
from typing import Any

import torch

MAX_FILES = 400  # .py files of a project read to find the constructor call
MAX_BYTES = 2 << 20  # bytes of one file


@dataclass(frozen=True)
class CacheRecipe:
    """How generate makes the cache `argument` of the forward: class `cls`, called at `where` with `call`'s
    arguments, the model being the variable `model_var`, then `then` (method name, keyword names) on it."""
    argument: str
    cls: type
    where: str
    call: ast.Call
    model_var: str
    then: tuple[tuple[str, tuple[str, ...]], ...]
    sets: tuple[str, ...] = ()  # attributes generate sets on it after making it (`params.seqlen_offset += n`)
    local: tuple[tuple[str, ast.AST], ...] = ()  # generate's locals bound once (`m = self.model.config`)


def cache_argument(model: Any) -> tuple[str, type] | None:
    """(name, class) of the forward's argument after the first that is annotated with a class of the model's own
    code (`Optional[BufferCache]`), neither a tensor nor a torch, typing or builtin class; None where none is."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())[1:]
        hints = typing.get_type_hints(model.forward)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve names no class
        return None
    for p in params:
        hint = hints.get(p.name)
        options = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) is \
            typing.Union else [hint]
        cls = options[0] if len(options) == 1 else None
        if isinstance(cls, type) and not issubclass(cls, torch.Tensor) and \
                (cls.__module__ or "").split(".")[0] not in ("torch", "typing", "builtins", "collections") and \
                not issubclass(cls, torch.nn.Module):
            return p.name, cls
    return None


def _project_files(cls: type) -> list[str]:
    """The .py files of the project a class (the cache's, the model's) comes from: its top package's folder (or
    its file's folder), at most MAX_FILES, in a fixed order."""
    module = inspect.getmodule(cls)
    path = getattr(module, "__file__", None)
    if not path:
        return []
    root = os.path.dirname(os.path.abspath(path))
    while os.path.isfile(os.path.join(os.path.dirname(root), "__init__.py")):
        root = os.path.dirname(root)
    out: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        out.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith(".py"))
        if len(out) >= MAX_FILES:
            break
    return out[:MAX_FILES]


def _is_call_of(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and (isinstance(node.func, ast.Name) and node.func.id == name or
                                           isinstance(node.func, ast.Attribute) and node.func.attr == name)


def _roots(node: ast.AST) -> set[str]:
    """The names an attribute chain or arithmetic starts from."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _parsed(paths: list[str], needle: str | None) -> Any:
    """(path, AST) of each project file that parses (and holds `needle` where given)."""
    for path in paths:
        try:
            if os.path.getsize(path) > MAX_BYTES:
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if needle is not None and needle not in text:
                continue
            yield path, ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue


def find_recipe(model: Any, roots: tuple[str, ...] = ()) -> CacheRecipe | None:
    """The cache recipe of the model's forward: by its annotation (`cache_argument`), the first function of its
    project that calls the class's constructor and passes the result as that argument (`model.forward(...,
    cache=cache)` or `model(..., cache=cache)`); else by data flow (`_flow_recipe`); None where the project has no
    such call."""
    found = cache_argument(model)
    if found is None:
        return _flow_recipe(model, roots)
    argument, cls = found
    for path, tree in _parsed(_project_files(cls), cls.__name__):
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            hit = _recipe_in(fn, {cls.__name__}, [argument], set())
            if hit is not None:
                node, argument, model_var, then, sets = hit
                return CacheRecipe(argument, cls, f"{os.path.basename(path)}:{node.lineno}", node.value, model_var,
                                   then, sets, _locals(fn))
    return None


def _forward_names(model: Any) -> list[str]:
    try:
        return [p.name for p in inspect.signature(model.forward).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return []


def _flow_recipe(model: Any, roots: tuple[str, ...]) -> CacheRecipe | None:
    """The cache argument found by data flow, whatever its name or annotation: a function of the model's project
    that loops (a decoding loop), makes an object of a project class (not a module, not a tensor) and passes it, by
    keyword or position, into a call of the model (`model(...)`, `model.forward(...)`, `self.model(...)`,
    `self.model.forward(...)`, a method of the model's class); the argument it fills is the cache. The class is read
    from the project's modules already imported, else from the function's own module (`_module_class`)."""
    names = _forward_names(model)
    if len(names) < 2:
        return None
    classes = _project_classes(type(model))
    methods = {n for n in dir(type(model)) if not n.startswith("_")} | {"forward"}
    for path, tree in _parsed(_project_files(type(model)), None):
        own = {n.name for n in tree.body if isinstance(n, ast.ClassDef)} - set(classes)  # the file's, not imported
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and
                   any(isinstance(m, (ast.For, ast.While)) for m in ast.walk(n))):  # a decoding loop's function
            hit = _recipe_in(fn, set(classes) | own, names[1:], methods)
            cls = None if hit is None else classes.get(_called_name(hit[0].value)) or \
                _module_class(path, _called_name(hit[0].value), type(model), roots)
            if cls is not None:
                node, argument, model_var, then, sets = hit
                return CacheRecipe(argument, cls, f"{os.path.basename(path)}:{node.lineno}", node.value, model_var,
                                   then, sets, _locals(fn))
    return None


def _module_class(path: str, name: str, model_cls: type, roots: tuple[str, ...]) -> type | None:
    """Class `name` of a file of the model's package that its code does not import (the module of its generate):
    that module imported under the package, what it imports that is not installed stubbed as inside forward; None
    where the file is not a module of the model's package, fails to import, or the class is a module or tensor."""
    import importlib
    import sys

    from ..shapes.imports import ImportsInForward
    from ..sources.guard import importing
    from ..sources.stubs import StubRegistry

    package = (model_cls.__module__ or "").rpartition(".")[0]
    folder = os.path.dirname(getattr(sys.modules.get(package), "__file__", None) or "")
    if not package or not folder or os.path.dirname(os.path.abspath(path)) != os.path.abspath(folder):
        return None
    try:  # as the model's file was imported: what it prints kept off stdout, an exit or a hang one error
        with importing(os.path.basename(path)), ImportsInForward(StubRegistry(), roots):
            module = importlib.import_module(f"{package}.{os.path.splitext(os.path.basename(path))[0]}")
    except Exception:  # noqa: BLE001 - the project's own module; without it no cache is made
        return None
    cls = getattr(module, name, None)
    return cls if isinstance(cls, type) and not issubclass(cls, (torch.nn.Module, torch.Tensor, BaseException)) \
        else None


def _locals(fn: ast.AST) -> tuple[tuple[str, ast.AST], ...]:
    """The names a function binds exactly once by a plain assignment (`m = self.model.config`), with their value."""
    bound: dict[str, list[ast.AST]] = {}
    for s in ast.walk(fn):
        for t in s.targets if isinstance(s, ast.Assign) else ():
            if isinstance(t, ast.Name):
                bound.setdefault(t.id, []).append(s.value if len(s.targets) == 1 else t)
    return tuple((k, v[0]) for k, v in bound.items() if len(v) == 1)


def fed_back_argument(model: Any) -> tuple[str, int, str] | None:
    """(argument, index in forward's returned tuple, where) of a state the forward returns and the code's own
    generate loop passes back into it: `logits, state = llm_forward(token, state)` in a loop of the model's project,
    the name both unpacked from the call and passed to it, by keyword or at the position of a forward argument that
    defaults to None; None where the project has no such loop."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    optional = {p.name for p in params[1:] if p.default is None}
    if not optional:  # nothing the loop could feed back: the project's files are not read (torch's own, 400 of them,
        return None  # for an nn.Sequential: ~4 s)
    names = [p.name for p in params]
    for path, tree in _parsed(_project_files(type(model)), None):
        for loop in (n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))):
            for node in ast.walk(loop):
                if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and
                        isinstance(node.value, ast.Call)):
                    continue
                for j, t in enumerate(node.targets[0].elts):
                    argument = _passed_as(node.value, t.id, names[1:], True) if isinstance(t, ast.Name) else None
                    if argument in optional:
                        return argument, j, f"{os.path.basename(path)}:{node.lineno}"
    return None


def _project_classes(model_cls: type) -> dict[str, type]:
    """{name: class} of the plain classes (no modules, tensors or exceptions) defined in the project's modules that
    are imported, first name wins in a fixed order."""
    import sys

    files = set(_project_files(model_cls))
    out: dict[str, type] = {}
    for name in sorted(n for n, m in list(sys.modules.items()) if getattr(m, "__file__", None) and
                       os.path.abspath(m.__file__) in files):
        for k, v in sorted(vars(sys.modules[name]).items()):
            if isinstance(v, type) and getattr(sys.modules.get(v.__module__), "__file__", None) and \
                    os.path.abspath(sys.modules[v.__module__].__file__) in files and \
                    not issubclass(v, (torch.nn.Module, torch.Tensor, BaseException)):
                out.setdefault(k, v)
    return out


def _called_name(node: ast.AST) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _model_call(call: ast.Call, params: set[str], methods: set[str]) -> str | None:
    """The variable holding the model where `call` calls it: `model(...)`, `model.forward(...)` (any method where
    `methods` is empty, else one of `methods`), `self.model(...)`, `self.model.forward(...)`; None otherwise."""
    f = call.func
    if isinstance(f, ast.Name):
        return f.id if f.id in params else None
    if not isinstance(f, ast.Attribute):
        return None
    if isinstance(f.value, ast.Name) and f.value.id in params and (not methods or f.attr in methods):
        return f.value.id
    if isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr == "model" and "self" in params:
        return "self.model"
    if isinstance(f.value, ast.Attribute) and ast.unparse(f.value) == "self.model" and "self" in params and \
            (not methods or f.attr in methods):
        return "self.model"
    return None


def _passed_as(call: ast.Call, var: str, names: list[str], positional: bool) -> str | None:
    for k in call.keywords:
        if k.arg in names and isinstance(k.value, ast.Name) and k.value.id == var:
            return k.arg
    if positional:
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Name) and a.id == var and 1 <= i <= len(names):
                return names[i - 1]
    return None


def _recipe_in(fn: ast.AST, classes: set[str], names: list[str], methods: set[str]) -> Any:
    """(the assignment `var = cls(...)`, the argument, the model's variable, the argument-free calls on var before
    the model call, the attributes set on var after making it) in one function: `var = cls(...)`, then a call
    passing `name=var` (or var at a name's position, when `methods` is given) on a variable of the function's
    parameters (the model); None where none is."""
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and _called_name(node.value) in classes):
            continue
        var = node.targets[0].id
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            direct = isinstance(call.func, ast.Name) or getattr(call.func, "attr", "") in ("forward", "model")
            argument = _passed_as(call, var, names, bool(methods) and direct)
            model_var = _model_call(call, params, methods) if argument is not None else None
            if model_var is None:
                continue
            then = tuple((c.func.attr, tuple(k.arg or "" for k in c.keywords)) for c in ast.walk(fn)
                         if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
                         isinstance(c.func.value, ast.Name) and c.func.value.id == var and
                         node.lineno < c.lineno <= call.lineno and not c.args)
            sets = tuple(sorted({t.attr for s in ast.walk(fn) if isinstance(s, (ast.Assign, ast.AugAssign)) and
                                 s.lineno > node.lineno
                                 for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
                                 if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and
                                 t.value.id == var}))
            return node, argument, model_var, then, sets
    return None


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_NOT_MADE = object()


def _value(node: ast.AST, model_var: str, model: Any, local: dict[str, ast.AST] | None = None, depth: int = 0) -> Any:
    """An argument read on the built model: constants, attribute chains of the model's variable (`self.model` too),
    generate's locals bound once to such (`local`), and + - * // of them; `_NOT_MADE` for anything else (a call)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id == model_var:
            return model
        bound = (local or {}).get(node.id)
        return _value(bound, model_var, model, local, depth + 1) if bound is not None and depth < 8 else _NOT_MADE
    if isinstance(node, ast.Attribute):
        if "." in model_var and ast.unparse(node) == model_var:
            return model
        owner = _value(node.value, model_var, model, local, depth)
        return _NOT_MADE if owner is _NOT_MADE else getattr(owner, node.attr, _NOT_MADE)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _value(node.left, model_var, model, local, depth), _value(node.right, model_var, model, local, depth)
        if _NOT_MADE in (a, b) or not all(isinstance(x, int) for x in (a, b)):
            return _NOT_MADE
        return _OPS[type(node.op)](a, b)
    return _NOT_MADE


def _by_role(name: str, batch: int, capacity: int, dtype: torch.dtype) -> Any:
    n = name.lower()
    if "batch" in n or n in ("bsz", "b", "bs"):
        return batch
    if any(w in n for w in ("seq", "len", "window", "ctx", "context", "capacity", "size", "tokens", "positions")):
        return capacity
    if "dtype" in n:
        return dtype
    if "device" in n:
        return "meta"
    return _NOT_MADE


def _keywords(call: ast.Call, local: dict[str, ast.AST]) -> list[tuple[str | None, ast.AST]]:
    """(name, value) of a call's keywords, `**options` spread where options is a dict of string keys written in the
    function (`kw = {"num_heads": m.n_kv_head}`); an unknown `**` stays (None, value)."""
    out: list[tuple[str | None, ast.AST]] = []
    for k in call.keywords:
        spread = local.get(k.value.id) if k.arg is None and isinstance(k.value, ast.Name) else k.value
        if k.arg is None and isinstance(spread, ast.Dict) and \
                all(isinstance(key, ast.Constant) and isinstance(key.value, str) for key in spread.keys):
            out.extend((key.value, v) for key, v in zip(spread.keys, spread.values))
        else:
            out.append((k.arg, k.value))
    return out


def make_cache(recipe: CacheRecipe, model: Any, batch: int, capacity: int) -> tuple[Any, dict[str, Any]]:
    """(the cache object on meta, {parameter: value} it was made with), as `recipe` says; a ValueError naming the
    argument that cannot be made."""
    try:
        params = [p for p in inspect.signature(recipe.cls.__init__).parameters.values()][1:]
    except (TypeError, ValueError):
        params = []
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.get_default_dtype())
    args, kwargs, used = [], {}, {}
    local = dict(recipe.local)
    for i, node in enumerate(recipe.call.args):
        name = params[i].name if i < len(params) else f"argument {i + 1}"
        v = _value(node, recipe.model_var, model, local)
        v = _by_role(name, batch, capacity, dtype) if v is _NOT_MADE else v
        if v is _NOT_MADE:
            raise ValueError(f"{recipe.cls.__name__}'s {name} ({ast.unparse(node)} at {recipe.where})")
        args.append(v)
        used[name] = v
    for key, node in _keywords(recipe.call, local):
        v = _value(node, recipe.model_var, model, local)
        v = _by_role(key or "", batch, capacity, dtype) if v is _NOT_MADE else v
        if v is _NOT_MADE or key is None:
            raise ValueError(f"{recipe.cls.__name__}'s {key or '**'} ({ast.unparse(node)} at {recipe.where})")
        kwargs[key] = used[key] = v
    with torch.device("meta"), torch.no_grad():
        cache = recipe.cls(*args, **kwargs)
        for method, names in recipe.then:
            fn = getattr(cache, method, None)
            values = {n: _by_role(n, batch, capacity, dtype) for n in names}
            if callable(fn) and _NOT_MADE not in values.values():
                out = fn(**values)
                cache = out if isinstance(out, recipe.cls) else cache
    return cache, used


def cache_tensors(cache: Any) -> list[tuple[str, Any, torch.Tensor]]:
    """(attribute, key, tensor) of what the cache object holds: its tensor attributes (key None) and the tensors
    in its lists (key: the index, a layer's) and dicts, one level down, and in the tuples those hold (a layer's
    `(conv_state, ssm_state)`: attribute `name[j]`)."""
    out = []
    for name, v in sorted(vars(cache).items()):
        items = list(v.items()) if isinstance(v, dict) else list(enumerate(v)) if isinstance(v, (list, tuple)) \
            else [(None, v)]
        out.extend((name, k, t) for k, t in items if isinstance(t, torch.Tensor))
        out.extend((f"{name}[{j}]", k, t) for k, ts in items if isinstance(ts, (list, tuple))  # a layer's pair
                   for j, t in enumerate(ts) if isinstance(t, torch.Tensor))
    return out


def inner_cache_argument(model: Any) -> tuple[str, str] | None:
    """(path, argument) of the first submodule whose forward takes a cache argument (whisper's decoder: `kv_cache`,
    a dict its decoding loop fills through hooks), or None."""
    import inspect

    found = []
    for path, m in model.named_modules():
        try:
            names = list(inspect.signature(m.forward).parameters) if path else []
        except (TypeError, ValueError):
            continue
        hit = next((n for n in names if "cache" in n.lower()), None)
        if hit is not None:
            found.append((path.count("."), path, hit))
    return min(found)[1:] if found else None  # the outermost


def hooked_cache(model: Any) -> tuple[str, str, str] | None:
    """(method, submodule path, argument) where a method of the model's own class takes no required argument and
    registers forward hooks (`install_kv_cache_hooks`: the cache it returns is filled by its submodules' outputs),
    and a submodule's forward takes a cache argument (`inner_cache_argument`); None otherwise."""
    inner = inner_cache_argument(model)
    if inner is None:
        return None
    for name, fn in sorted(vars(type(model)).items()):
        if not inspect.isfunction(fn) or name.startswith("_"):
            continue
        try:
            params = list(inspect.signature(fn).parameters.values())[1:]
            source = inspect.getsource(fn)
        except (TypeError, ValueError, OSError):
            continue
        if "register_forward_hook" in source and "return" in source and \
                all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            return name, inner[0], inner[1]
    return None


def _object_entries(tensors: list[tuple[str, Any, torch.Tensor]], larger: dict[tuple[str, Any], torch.Tensor],
                    batch_value: int | None) -> list[dict[str, Any]]:
    """KV entries of a cache object's tensors (a list's items: one layer each): the dim that grew by one with one
    more token of room is a slot a token; the batch dim (the size it was made with) divided out; a tensor that did
    not grow is fixed state."""
    from .kv import element_bytes

    out = []
    for name, key, t in tensors:
        other = larger.get((name, key))
        shape = [int(d) for d in t.shape]
        grown = [j for j, (a, b) in enumerate(zip(shape, other.shape)) if b == a + 1] \
            if other is not None and other.dim() == t.dim() else []
        rest = [d for j, d in enumerate(shape) if j not in grown[:1]]
        if batch_value in rest:
            rest.remove(batch_value)
        dtype = str(t.dtype).replace("torch.", "")
        out.append({"path": "", "name": name if isinstance(key, int) or key is None else f"{name}.{key}",
                    "layer": key if isinstance(key, int) else None, "dtype": dtype, "element_bytes": element_bytes(dtype),
                    "width": math.prod(rest), "ratio": 1 if grown else None, "slots": None if grown else 1,
                    "what": "cache: a slot every token" if grown else "fixed per sequence (state)"})
    return out


def hooked_entries(short: dict, long: dict, paths: dict[int, str], layer_list: str | None) -> list[dict[str, Any]]:
    """KV entries of a hook-filled cache (a dict keyed by the modules whose outputs it keeps): a tensor whose dim
    grew by one with one more token of fill keeps a slot a token, one that did not (cross-attention's keys over a
    fixed window) is fixed."""
    from .kv import _layer_of, element_bytes

    out = []
    for module, t in short.items():
        other = long.get(module)
        if not isinstance(t, torch.Tensor) or not isinstance(other, torch.Tensor) or t.dim() < 2:
            continue
        shape = [int(d) for d in t.shape]
        grown = [j for j, (a, b) in enumerate(zip(shape, other.shape)) if b == a + 1]
        path = paths.get(id(module), "")
        dtype = str(t.dtype).replace("torch.", "")
        out.append({"path": path, "name": type(module).__name__, "layer": _layer_of(path, layer_list),
                    "dtype": dtype, "element_bytes": element_bytes(dtype),
                    "width": math.prod(d for j, d in enumerate(shape[1:], 1) if j not in grown[:1]),
                    "ratio": 1 if grown else None, "slots": None if grown else 1,
                    "what": "cache: a slot every token" if grown else "fixed per sequence (a window's keys)"})
    return out


def held_entries(what: str, grew: bool, tensors: tuple[list, list, int | None], notes: list[str]
                 ) -> list[dict[str, Any]]:
    """The KV entries of what a cache holds (`tensors`: its tensors with room for context + 1 and context + 2
    tokens, the batch it was made for), and the note on a step whose FLOPs did not `grew` with one more token: fixed
    state (all its tensors fixed), else a cache whose fill meta does not hold."""
    held, larger, batch_value = tensors
    entries = _object_entries(held, {(a, k): t for a, k, t in larger}, batch_value)
    if grew:
        return entries
    if entries and all(e["slots"] == 1 for e in entries):
        notes.append(f"{what}: it holds state of a fixed size (no tensor grows with its room: a recurrent state, or "
                     "a sliding window's keys): the decode step's FLOPs are the same at every longer context")
    else:
        notes.append(f"{what}: the decode step's FLOPs do not grow with the context: the cache keeps how full it is "
                     "in tensors whose values meta does not hold, so attention over the cached tokens is not "
                     "counted (a lower bound); KV entries are read from its tensors")
    return entries


__all__ = ["held_entries", "hooked_entries", "fed_back_argument", "hooked_cache", "inner_cache_argument", "CacheRecipe",
           "cache_argument", "find_recipe", "make_cache", "cache_tensors"]

"""Reference implementations in DeepSeek's `inference/` style: `model.py` + `config.json`.

The folder of `model.py` goes first on `sys.path`, so sibling imports (`from kernel import ...`, `from engram import
...`) resolve. A module that cannot be imported (a missing dependency such as tilelang, or a sibling file that needs
one) is replaced by a stub module whose names are recorded. `ModelArgs(**config)` is built, module globals such as
`world_size` and `rank` are set, and the top model class is constructed on the meta device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import inspect
import json
import os
import re
import sys
import traceback
from typing import Any, Iterator

from ..errors import ArchvizError, SourceError
from .guard import importing
from .options import BuildOptions, Built, _versions, read_json_config, suggest
from .package import locate
from .stubs import StubRegistry

MAX_STUB_ROUNDS = 32
_GENERIC_FOLDERS = {"inference", "src", "model", "models", "code", "reference"}


def _folder_modules(folder: str) -> set[str]:
    return {f[:-3] for f in os.listdir(folder) if f.endswith(".py")}


# Top-level module names that reference builds have put in sys.modules (model files, siblings, stubs).
_LOADED: set[str] = set()


def _purge(names: set[str]) -> None:
    """Forget modules of these names, and everything earlier reference builds loaded or stubbed: two references
    (V3 and V4) both have a `model` and a `kernel`, and one must never see the other's."""
    names = names | _LOADED
    _LOADED.update(names)
    for name in list(sys.modules):
        if name.split(".")[0] in names:
            del sys.modules[name]


def _failing_file(exc: BaseException, folder: str) -> str | None:
    """The file of the model folder whose import statement raised (innermost frame in the folder)."""
    hit = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        fn = os.path.abspath(frame.f_code.co_filename)
        if os.path.dirname(fn) == folder:
            hit = fn
    return hit


def _missing_named(e: ImportError) -> str | None:
    """The package an ImportError of the model's own making asks for (`raise ImportError("Please install
    mlstm_kernels package")`): the ModuleNotFoundError it was raised from, else the name after "install"."""
    for inner in (e.__cause__, e.__context__):
        if isinstance(inner, ModuleNotFoundError) and inner.name:
            return inner.name.split(".")[0]
    m = re.search(r"\binstall\s+(?:the\s+)?[`'\"]?([A-Za-z_][\w.-]*)", str(e))
    if m:
        name = m.group(1).rstrip(".").replace("-", "_").split(".")[0]
        return name if name.isidentifier() and name not in ("it", "them", "this", "the") else None
    return None


def import_reference(path: str, stubs: StubRegistry, notes: list[str] | None = None) -> Any:
    """Import the model file: as its stem (`model`) with its folder first on the path, or, inside a package, under
    its dotted name (archviz.sources.package); stubbing what cannot be imported. `notes`: where what its import-time
    native code was answered with goes (archviz.sources.native)."""
    from .meta import user_frame
    from .native import import_failure_hint, native_answered

    layout = locate(path)
    folder = os.path.dirname(os.path.abspath(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    package = layout.package
    siblings = _folder_modules(folder) if package is None else set()
    own = package or stem
    stubbed: dict[str, Any] = {}
    sys.path[:0] = layout.paths
    try:
        for _ in range(MAX_STUB_ROUNDS):
            _purge(siblings | set(stubbed) | {own})
            sys.modules.update(stubbed)
            try:
                with importing(os.path.basename(path)), native_answered(stubs, notes if notes is not None else []):
                    if package:
                        return importlib.import_module(layout.module_name)
                    spec = importlib.util.spec_from_file_location(stem, path)
                    assert spec and spec.loader
                    module = importlib.util.module_from_spec(spec)
                    sys.modules[stem] = module
                    spec.loader.exec_module(module)
                return module
            except ModuleNotFoundError as e:
                missing = (e.name or "").split(".")[0]
                _LOADED.add(missing)
                if not missing:
                    raise SourceError(f"{path}: import failed: {e}", hint="install what it names") from None
                failing = _failing_file(e, folder) if package is None else None
                failing_stem = os.path.splitext(os.path.basename(failing))[0] if failing else stem
                if failing_stem != stem and failing_stem in siblings and failing_stem not in stubbed:
                    # A sibling (e.g. kernel.py) needs a dependency that is not here: stub the sibling wholesale,
                    # so its functions are answered by name (and by shape rules in the meta forward pass).
                    stubbed[failing_stem] = stubs.module(failing_stem, f"{failing_stem}.py needs {missing}")
                elif missing not in stubbed and missing != package:
                    stubbed[missing] = stubs.missing(missing) if missing not in siblings else \
                        stubs.module(missing, f"{missing}.py failed to import")
                else:
                    raise SourceError(f"{path}: import of {missing} keeps failing ({e})",
                                      hint="run with --debug for the traceback") from e
            except ImportError as e:
                # `from X import name` where X exists but lacks the name, or a broken sibling: stub X.
                name = (e.name or "").split(".")[0]
                if name and name not in stubbed and name != stem and name != package:
                    stubbed[name] = stubs.module(name, f"import failed: {e}")
                    continue
                asked = _missing_named(e) if not name else None
                if asked and asked not in stubbed and asked != own:  # the model's own "please install X"
                    _LOADED.add(asked)
                    stubbed[asked] = stubs.missing(asked)
                    continue
                where = user_frame(e, (layout.code_root,)) or os.path.basename(path)
                raise SourceError(f"{path}: import failed at {where}: {e}", hint="fix the import") from None
            except SourceError:
                raise
            except Exception as e:  # noqa: BLE001 - the user's file raised while importing
                where = user_frame(e, (layout.code_root,)) or os.path.basename(path)
                raise SourceError(f"{path}: raised {type(e).__name__} on import at {where}: {e}",
                                  hint=import_failure_hint(e)) from e
        raise SourceError(f"{path}: too many failing imports", hint="install the model's dependencies")
    finally:
        for p in layout.paths:
            if p in sys.path:
                sys.path.remove(p)


_CONFIG_PARAMS = ("args", "config", "params", "cfg", "conf", "model_args", "model_config", "hparams")
_PLAIN = (int, float, str, bool, bytes, list, tuple, dict, set)


def _init_params(cls: type) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    return [p for p in list(sig.parameters.values())[1:] if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _takes_kwargs(cls: type) -> bool:
    if cls.__init__ is object.__init__:
        return False
    try:
        return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())
    except (TypeError, ValueError):
        return False


def _annotated_class(owner: type, p: inspect.Parameter) -> type | None:
    """The class a constructor parameter is annotated with (`args: ModelArgs`, `config: "GPTConfig"`,
    `Optional[X]`), or None."""
    import typing

    a = p.annotation
    if a is p.empty:
        return None
    if isinstance(a, str):
        scope = vars(sys.modules.get(owner.__module__) or object)
        a = a.strip("'\" ").replace("Optional[", "").rstrip("]").split("|")[0].strip()
        found: Any = scope.get(a.split(".")[0])
        for part in a.split(".")[1:]:
            found = getattr(found, part, None)
        a = found
    if not inspect.isclass(a):
        a = next((x for x in typing.get_args(a) if inspect.isclass(x) and x is not type(None)), None)
    return a if inspect.isclass(a) else None


def _config_param(cls: type) -> tuple[inspect.Parameter, type | None] | None:
    """`cls`'s first constructor parameter when it is a config: annotated with a class that is not a plain value,
    a tensor or a module, or named like one (args, config, params, ...). With the class it is annotated with."""
    import torch

    ps = _init_params(cls)
    if not ps:
        return None
    first = ps[0]
    ann = _annotated_class(cls, first)
    if ann is not None:
        if issubclass(ann, _PLAIN) or issubclass(ann, (torch.nn.Module, torch.Tensor)):
            return None
        return first, ann
    return (first, None) if first.name in _CONFIG_PARAMS else None


def config_fields(cls: type) -> set[str] | None:
    """The names a config class takes: its dataclass fields or constructor parameters; None when it takes any
    (**kwargs, or a bare class whose attributes are set one by one)."""
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls) if f.init}
    if _takes_kwargs(cls):
        return None
    ps = _init_params(cls)
    return {p.name for p in ps} if ps else None


def _required(cls: type) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    return {p.name for p in _init_params(cls) if p.default is p.empty}


def _fit(cls: type, keys: set[str]) -> int | None:
    """How many of the config's keys `cls` takes, or None when it lacks a field the config does not give."""
    if _required(cls) - keys:
        return None
    fields = config_fields(cls)
    return len(keys) if fields is None else len(keys & fields)


def make_config(cls: type, values: dict[str, Any]) -> Any:
    fields = config_fields(cls)
    if fields is None and not _takes_kwargs(cls) and not _init_params(cls):  # a bare class: attributes set on it
        obj = cls()
        for k, v in values.items():
            setattr(obj, k, v)
        return obj
    return cls(**{k: v for k, v in values.items() if fields is None or k in fields})


def config_dict(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


def _classes_in(module: Any) -> list[type]:
    import torch

    return [v for v in vars(module).values()
            if inspect.isclass(v) and issubclass(v, torch.nn.Module) and v.__module__ == module.__name__]


def _unreferenced(cands: list[type], classes: list[type]) -> list[type]:
    """The candidates no other class of the module names in its code (the top model builds the blocks)."""
    sources = {}
    for c in classes:
        try:
            sources[c] = inspect.getsource(c)
        except (OSError, TypeError):
            sources[c] = ""
    return [c for c in cands if not any(re.search(rf"\b{re.escape(c.__name__)}\b", src)
                                        for o, src in sources.items() if o is not c)]


def _defaults_only(cls: type) -> bool:
    return all(p.default is not p.empty for p in _init_params(cls))


def find_model_class(module: Any, wanted: str | None, keys: set[str] | None) -> type:
    """The top nn.Module of the file: named by --model-class, else the class whose constructor takes a config (a
    dataclass or a class the config's keys fit; with no config, one built from its defaults) and that no other class
    of the file builds. `keys`: the config's keys, None when no config was given."""
    classes = _classes_in(module)
    if wanted:
        for c in classes:
            if c.__name__ == wanted:
                return c
        raise SourceError(f"--model-class {wanted}: no such nn.Module class in {os.path.basename(module.__file__)}",
                          hint=suggest(wanted, [c.__name__ for c in classes]) or
                          f"classes: {', '.join(c.__name__ for c in classes)}")
    cands: list[type] = []
    unfit: list[type] = []  # their config class needs a field the config (or no config) does not give
    for c in classes:
        taken = _config_param(c)
        if taken is not None:
            (unfit if taken[1] is not None and _fit(taken[1], keys or set()) is None else cands).append(c)
        elif keys is None and taken is None and _defaults_only(c):  # no config: built from its own defaults
            cands.append(c)
    if not cands and keys:  # none fits: the one that does not is built, and its config class says what it lacks
        cands = unfit
    # The top class is the one no other candidate builds as a child: prefer the conventional names.
    for name in ("Transformer", "Model", "CausalLM"):
        for c in cands:
            if c.__name__ == name:
                return c
    top = _unreferenced(cands, classes)
    if len(top) == 1:
        return top[0]
    name = os.path.basename(module.__file__)
    if len(top) > 1:
        raise SourceError(f"{name}: {len(top)} classes could be the model: {', '.join(c.__name__ for c in top)}",
                          hint="name one with --model-class")
    if keys is None:
        raise SourceError(f"{module.__file__}: a reference implementation needs its config",
                          hint="pass --config path/to/config.json (no class of the file builds from its defaults)")
    raise SourceError(f"{name}: no nn.Module class is built from a config alone",
                      hint="name it with --model-class, or wrap the construction in a function and pass "
                           "package.module:callable")


def find_config_class(module: Any, model_cls: type, wanted: str | None, keys: set[str]) -> type | None:
    """The class `model_cls` is built from: --config-class, else its constructor's annotation, else the dataclass of
    the file (or imported there) that the config's keys fit best. None when the model takes no config."""
    scope = {k: v for k, v in vars(module).items() if inspect.isclass(v)}
    if wanted:
        if wanted in scope:
            return scope[wanted]
        raise SourceError(f"--config-class {wanted}: no such class in {os.path.basename(module.__file__)}",
                          hint=suggest(wanted, sorted(scope)) or "name the class the model is built from")
    taken = _config_param(model_cls)
    if taken is None:
        return None
    if taken[1] is not None:
        return taken[1]
    import torch

    cands = [c for c in scope.values() if dataclasses.is_dataclass(c) and not issubclass(c, torch.nn.Module)]
    fits = {c: f for c in cands if (f := _fit(c, keys)) is not None}
    if not fits:
        raise SourceError(f"{os.path.basename(module.__file__)}: no dataclass there takes this config, so "
                          f"{model_cls.__name__}({taken[0].name}) cannot be built",
                          hint="name the config class with --config-class")
    best = max(fits.values())
    top = [c for c, f in fits.items() if f == best]
    if len(top) > 1:
        own = [c for c in top if c.__module__ == module.__name__]
        top = own or top
    if len(top) > 1:
        named = [c for c in top if c.__name__ == "ModelArgs" or c.__name__.endswith(("Args", "Config"))]
        top = named[:1] if len(named) == 1 else top
    if len(top) > 1:
        raise SourceError(f"{os.path.basename(module.__file__)}: {', '.join(c.__name__ for c in top)} all fit the "
                          f"config of {model_cls.__name__}", hint="name one with --config-class")
    return top[0]


class _StandInBackend:
    """The parts of a `tokenizers.Tokenizer` that a model constructor reads, with made-up token strings."""

    def __init__(self, vocab_size: int, distinct: int):
        self.vocab_size = vocab_size
        self.distinct = max(1, distinct)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return self.vocab_size

    def id_to_token(self, i: int) -> str:
        return f"tok{i % self.distinct}"

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(self.id_to_token(i) for i in ids)

    def token_to_id(self, token: str) -> int | None:
        return None


class StandInTokenizer:
    """A tokenizer stand-in sized from the config: `vocab_size` ids whose strings collapse onto `distinct` keys.

    Only values (hash tables, token maps), never shapes, depend on a tokenizer's strings; the records say a stand-in
    was used."""

    unk_token_id = None

    def __init__(self, vocab_size: int, distinct: int | None = None):
        self.backend_tokenizer = _StandInBackend(vocab_size, distinct or vocab_size)
        self.vocab_size = vocab_size

    def __len__(self) -> int:
        return self.vocab_size

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return self.vocab_size

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.backend_tokenizer.decode(ids)

    def convert_ids_to_tokens(self, ids: Any) -> Any:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(i) for i in ids]

    def convert_tokens_to_ids(self, tokens: Any) -> Any:
        return None

    def encode(self, text: str) -> list[int]:
        return [0] * max(1, len(text.split()))


class FileTokenizer(StandInTokenizer):
    """A real `tokenizer.json`, loaded with the tokenizers library, with the transformers-style surface models use."""

    def __init__(self, path: str):
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise SourceError("--tokenizer needs the tokenizers library", hint="pip install tokenizers") from None
        try:
            self.backend_tokenizer = Tokenizer.from_file(path)
        except Exception as e:  # noqa: BLE001
            raise SourceError(f"--tokenizer {path}: not a tokenizers JSON file ({e})",
                              hint="give the model's tokenizer.json") from None
        self.vocab_size = self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.backend_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def convert_ids_to_tokens(self, ids: Any) -> Any:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(i) for i in ids]

    def convert_tokens_to_ids(self, tokens: Any) -> Any:
        if isinstance(tokens, str):
            return self.backend_tokenizer.token_to_id(tokens)
        return [self.backend_tokenizer.token_to_id(t) for t in tokens]

    def encode(self, text: str) -> list[int]:
        return self.backend_tokenizer.encode(text).ids


def _standin_tokenizer(config: dict[str, Any]) -> tuple[StandInTokenizer, str]:
    vocab = int(config.get("vocab_size") or 0)
    distinct = None
    for k, v in sorted(config.items()):
        if "compressed_vocab_size" in k and isinstance(v, int):
            distinct = v
    tok = StandInTokenizer(vocab, distinct)
    note = (f"tokenizer: a stand-in of {vocab:,} ids" + (f" collapsing to {distinct:,} keys" if distinct else "")
            + " (only values, not shapes, depend on it; pass --tokenizer tokenizer.json for real values)")
    return tok, note


@contextlib.contextmanager
def process_group_as(world_size: int | None, rank: int | None) -> Iterator[None]:
    """Make `dist.get_world_size()` / `dist.get_rank()` answer the requested values (and `dist.is_initialized()`
    True) while inside: the model is built, or its meta pass runs, for that rank."""
    if world_size is None and rank is None:
        yield
        return
    import torch.distributed as dist

    saved = {n: getattr(dist, n, None) for n in ("is_initialized", "get_world_size", "get_rank")}
    ws = world_size or 1
    dist.is_initialized = lambda: True  # type: ignore[assignment]
    dist.get_world_size = lambda group=None: ws  # type: ignore[assignment]
    dist.get_rank = lambda group=None: rank or 0  # type: ignore[assignment]
    try:
        yield
    finally:
        for n, f in saved.items():
            if f is not None:
                setattr(dist, n, f)


_DTYPE_CALL = re.compile(r"torch\.set_default_dtype\(\s*torch\.(\w+)\s*\)")
# `torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)` (meta-llama's generation.py): its first, the preferred
_TENSOR_TYPE_CALL = re.compile(r"torch\.set_default_tensor_type\(\s*torch\.(?:cuda\.)?(\w+)Tensor\s*\)")
_TENSOR_TYPES = {"BFloat16": "bfloat16", "Half": "float16", "Float": "float32", "Double": "float64"}


def launcher_dtype(path: str) -> tuple[str, str] | None:
    """The default dtype a reference's launcher sets before building the model: `torch.set_default_dtype(...)` under
    `if __name__ == "__main__":` in model.py, or in a sibling generate.py or generation.py (also
    `torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)`, meta-llama's). Returns (dtype, where)."""
    folder = os.path.dirname(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        text = ""
    main = text.find('if __name__ == "__main__"')
    if main >= 0:
        m = _DTYPE_CALL.search(text, main)
        if m:
            return m.group(1), f"{os.path.basename(path)}:{text.count(chr(10), 0, m.start()) + 1}"
    for name in ("generate.py", "generation.py"):  # DeepSeek's launcher; meta-llama's Llama.build
        gen = os.path.join(folder, name)
        if not os.path.isfile(gen):
            continue
        with open(gen, encoding="utf-8") as f:
            g = f.read()
        m = _DTYPE_CALL.search(g)
        if m:
            return m.group(1), f"{name}:{g.count(chr(10), 0, m.start()) + 1}"
        m = _TENSOR_TYPE_CALL.search(g)
        if m and m.group(1) in _TENSOR_TYPES:
            return _TENSOR_TYPES[m.group(1)], f"{name}:{g.count(chr(10), 0, m.start()) + 1}"
    return None


def resolve_paths(spec: str, options: BuildOptions) -> tuple[str, str | None]:
    """The model file and its config: --config, else a config.json beside the file, else None (a model whose
    classes build from their own defaults)."""
    path = os.path.join(spec, "model.py") if os.path.isdir(spec) else spec
    config = options.config
    if config is None:
        guess = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
        if not os.path.isfile(guess):
            return os.path.abspath(path), None
        config = guess
    if not os.path.isfile(config):
        raise SourceError(f"--config {config}: no such file", hint="check the path")
    return os.path.abspath(path), os.path.abspath(config)


def _constructor_extras(cls: type, args: Any, options: BuildOptions, notes: list[str]) -> dict[str, Any]:
    """What the constructor takes after the config: a tokenizer (--tokenizer, else a stand-in); anything else it
    needs is refused in one line naming it."""
    extra: dict[str, Any] = {}
    needed = []
    for p in _init_params(cls)[1 if args is not None else 0:]:
        if "token" in p.name and args is not None:
            if options.tokenizer:
                extra[p.name] = FileTokenizer(options.tokenizer)
                notes.append(f"tokenizer: {os.path.basename(options.tokenizer)}")
            else:
                extra[p.name], note = _standin_tokenizer(config_dict(args))
                notes.append(note)
        elif p.default is p.empty:
            needed.append(p.name)
    if needed:
        raise SourceError(f"{cls.__name__}.__init__ also needs {', '.join(map(repr, needed))}, which archviz cannot "
                          "supply (it passes the config and a tokenizer)",
                          hint="wrap the construction in a function and pass package.module:callable")
    return extra


#: max_batch_size for a config class whose default is 0, "set by its loader" (mistral-inference's TransformerArgs;
#: its from_folder takes max_batch_size=1): enough sequences for the pass's batch.
PASS_BATCH_LIMIT = 64


def unset_batch_limit(args: Any, config: dict[str, Any], notes: list[str]) -> None:
    """A config whose `max_batch_size` is left at a default of 0 takes no sequence at all (`assert len(seqlens) <=
    max_batch_size`): its loader sets it. Set here to PASS_BATCH_LIMIT, noted; a config or --set value stands."""
    value = getattr(args, "max_batch_size", None)
    if "max_batch_size" in config or value != 0 or isinstance(value, bool):
        return
    try:
        args.max_batch_size = PASS_BATCH_LIMIT
    except (AttributeError, TypeError):  # a frozen config: as it is
        return
    notes.append(f"max_batch_size: {type(args).__name__}'s default 0 (its loader sets it) taken as "
                 f"{PASS_BATCH_LIMIT}; --set max_batch_size=N gives another")


def build(spec: str, options: BuildOptions) -> Built:
    from .meta import construction_error, is_cuda_insistence, meta_build, names_a_missing_field
    from .process_group import constructed

    path, config_path = resolve_paths(spec, options)
    folder = os.path.dirname(path)
    config = read_json_config(config_path) if config_path else None

    stubs = StubRegistry()
    notes: list[str] = []
    module = import_reference(path, stubs, notes)
    code_root = locate(path).code_root
    cls = find_model_class(module, options.model_class, set(config) if config is not None else None)
    args_cls = find_config_class(module, cls, options.config_class, set(config or ()))
    kwargs: dict[str, Any] = {}
    if args_cls is None:  # built from its own defaults: --set gives its keyword arguments
        if config:
            raise SourceError(f"{config_path}: {cls.__name__} takes no config",
                              hint="drop --config, or name the class built from it with --model-class")
        kwargs = _constructor_kwargs(cls, options, notes)
        args = None
    else:
        config = dict(config or {})
        args = _config_object(args_cls, config, (config_path, path), options, notes)
    extra = _constructor_extras(cls, args, options, notes)
    config_path = config_path or path

    if options.world_size is not None or options.rank is not None:
        if not hasattr(module, "world_size"):
            notes.append("--world-size given, but the module has no world_size global")
        module.world_size = options.world_size or 1
        module.rank = options.rank or 0
    import torch

    default_dtype, dtype_obj = _default_dtype(path, options, notes)

    def construct() -> Any:
        with meta_build(options.device) as meta_notes, process_group_as(options.world_size, options.rank):
            if dtype_obj is not None:
                torch.set_default_dtype(dtype_obj)
            model = cls(args, **extra) if args is not None else cls(**kwargs, **extra)
        return model, meta_notes

    try:
        (model, meta_notes), started = constructed(construct)  # a process group started for code that insists on one
        notes.extend(started)
    except ArchvizError:
        raise
    except Exception as e:  # noqa: BLE001
        said = construction_error(e, (path, config_path, code_root), cls, args, args_cls)
        if names_a_missing_field(e, args) or (not isinstance(e, AttributeError) and is_cuda_insistence(e)):
            raise said from None
        raise said from e
    notes = list(meta_notes.items) + notes
    if default_dtype is None and meta_notes.final_dtype not in (None, torch.float32):
        # The constructor set a default dtype (DeepSeek-V3: torch.set_default_dtype(torch.bfloat16)); its forward
        # runs under it.
        default_dtype = str(meta_notes.final_dtype).replace("torch.", "")
    world_size = int(getattr(module, "world_size", 1) or 1)
    rank = int(getattr(module, "rank", 0) or 0)
    cfg = json.loads(json.dumps({k: v for k, v in (config_dict(args) if args is not None else kwargs).items()
                                 if _jsonable(v)}))
    name, display_root = _model_name(module, code_root, folder)
    return Built(model=model, spec=spec, kind="reference", name=name, config=cfg,
                 overrides=dict(options.overrides), stubbed_imports=stubs.taken(), notes=notes,
                 world_size=world_size, rank=rank, roots=(code_root,), display_roots=((display_root, ""),),
                 module=module,
                 args=args, stubs=stubs, versions=_versions(), default_dtype=default_dtype)


def _constructor_kwargs(cls: type, options: BuildOptions, notes: list[str]) -> dict[str, Any]:
    """A model built from its constructor's defaults: the --set values as its keyword arguments, each one checked."""
    kwargs: dict[str, Any] = {}
    taken = {p.name for p in _init_params(cls)}
    for key, value in options.overrides:
        if key not in taken and not _takes_kwargs(cls):
            raise SourceError(f"--set {key}: {cls.__name__}.__init__ has no argument {key!r}",
                              hint=suggest(key, sorted(taken)) or "see its constructor's arguments")
        kwargs[key] = value
    notes.append(f"built as {cls.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}): no config "
                 "given, its constructor's defaults")
    return kwargs


def _config_object(args_cls: type, config: dict[str, Any], paths: tuple[str | None, str], options: BuildOptions,
                   notes: list[str]) -> Any:
    """The model's config object made from `config` with the --set values applied (`config` takes them too);
    `paths` is (the config file or None, the model file)."""
    config_path, path = paths
    fields = config_fields(args_cls)
    for key, value in options.overrides:
        if fields is not None and key not in fields:
            raise SourceError(f"--set {key}: {args_cls.__name__} has no field {key!r}",
                              hint=suggest(key, sorted(fields)) or f"see the {args_cls.__name__} fields")
        config[key] = value
    unknown = sorted(k for k in config if fields is not None and k not in fields)
    if unknown:
        notes.append(f"config keys not in {args_cls.__name__}, ignored: {', '.join(unknown)}")
    if config_path is None:
        notes.append(f"no config given: {args_cls.__name__}'s defaults")
    try:
        args = make_config(args_cls, config)
    except TypeError as e:
        raise SourceError(f"{config_path or path}: {args_cls.__name__} rejects this config: {e}",
                          hint="add the field it names to the config") from None
    unset_batch_limit(args, config, notes)
    return args


def _default_dtype(path: str, options: BuildOptions, notes: list[str]) -> tuple[str | None, Any]:
    """The default dtype to build under (its name and the torch dtype): --default-dtype, else the launcher's."""
    import torch

    default_dtype = options.default_dtype
    if default_dtype is None:
        found = launcher_dtype(path)
        if found:
            default_dtype = found[0]
            notes.append(f"built and run with default dtype {found[0]}, as its launcher sets ({found[1]})")
    dtype_obj = getattr(torch, default_dtype, None) if default_dtype else None
    if default_dtype and not isinstance(dtype_obj, torch.dtype):
        raise SourceError(f"--default-dtype {default_dtype}: not a torch dtype", hint="e.g. bfloat16")
    return default_dtype, dtype_obj


def _model_name(module: Any, code_root: str, folder: str) -> tuple[str, str]:
    """The model's name and the root its files are named from: the folder above the top package
    (`gpt_oss/torch/model.py`), else the file's folder."""
    package = module.__name__.split(".")[0] if "." in module.__name__ else None
    display_root = os.path.dirname(code_root) if package else folder
    name = package or os.path.basename(folder) or "model"
    if name in _GENERIC_FOLDERS:  # DeepSeek's releases keep the code in inference/: name the model by the folder above
        name = os.path.basename(os.path.dirname(folder)) or name
    return name, display_root


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False

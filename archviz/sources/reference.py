"""Reference implementations in DeepSeek's `inference/` style: `model.py` + `config.json`.

The folder of `model.py` goes first on `sys.path`, so sibling imports (`from kernel import ...`, `from engram import
...`) resolve. A module that cannot be imported (a missing dependency such as tilelang, or a sibling file that needs
one) is replaced by a stub module whose names are recorded. `ModelArgs(**config)` is built, module globals such as
`world_size` and `rank` are set, and the top model class is constructed on the meta device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import os
import re
from typing import Any, Iterator

from ..errors import ArchvizError, SourceError, UnknownArgument, option
from .options import BuildOptions, Built, _versions, read_json_config, suggest
from .package import locate
from .candidates import find_model
from .configs import (AttrBag, _config_param, _init_params, _takes_kwargs, code_reads, config_dict, config_fields,
                      find_config_class, make_config, preset_maker)
from .importer import import_reference
from .stubs import StubRegistry
from .targets import target_config

_GENERIC_FOLDERS = {"inference", "src", "model", "models", "code", "reference"}


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
            raise SourceError(f"{option('tokenizer')} needs the tokenizers library",
                              hint="pip install tokenizers") from None
        try:
            self.backend_tokenizer = Tokenizer.from_file(path)
        except Exception as e:  # noqa: BLE001
            raise SourceError(f"{option('tokenizer')} {path}: not a tokenizers JSON file ({e})",
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
            + f" (only values, not shapes, depend on it; pass {option('tokenizer')} tokenizer.json for real values)")
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
# `assert r.dtype == torch.bfloat16` (a CUDA kernel's wrapper: its launcher trains in that precision), and any dtype
# the code compares a tensor's with
_ASSERTED_DTYPE = re.compile(r"assert\s+[\w.\[\]]+\.dtype\s*==\s*torch\.(bfloat16|float16|half)\b")
_COMPARED_DTYPE = re.compile(r"\.dtype\s*[=!]=\s*torch\.(\w+)")


def launcher_dtype(path: str) -> tuple[str, str] | None:
    """The default dtype a reference's launcher sets before building the model: `torch.set_default_dtype(...)` under
    `if __name__ == "__main__":` in model.py, or in a sibling generate.py or generation.py (also
    `torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)`, meta-llama's); else the one 16-bit dtype the file's
    code asserts its tensors have and no other (`assert r.dtype == torch.bfloat16` in a CUDA kernel's wrapper: its
    launcher runs the model in that precision). Returns (dtype, where)."""
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
    asserted = list(_ASSERTED_DTYPE.finditer(text))  # its kernels insist on one 16-bit dtype, and on no other
    if asserted and {m.group(1) for m in _COMPARED_DTYPE.finditer(text)} == {asserted[0].group(1)}:
        dtype = "float16" if asserted[0].group(1) == "half" else asserted[0].group(1)
        return dtype, f"{os.path.basename(path)}:{text.count(chr(10), 0, asserted[0].start()) + 1} asserts its " \
                      f"tensors are {dtype}, {len(asserted)} such asserts"
    return None


def resolve_paths(spec: str, options: BuildOptions) -> tuple[str, str | None]:
    """The model file and its config: config, else a config.json beside the file, else None (a model whose
    classes build from their own defaults)."""
    path = spec
    if os.path.isdir(spec):  # its model.py, else the package the folder is
        path = os.path.join(spec, "model.py")
        if not os.path.isfile(path):
            path = os.path.join(spec, "__init__.py")
    config = options.config
    if config is None:
        guess = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
        if not os.path.isfile(guess):
            return os.path.abspath(path), None
        config = guess
    if not os.path.isfile(config):
        raise SourceError(f"{option('config')} {config}: no such file", hint="check the path")
    return os.path.abspath(path), os.path.abspath(config)


def _constructor_extras(cls: type, args: Any, options: BuildOptions, notes: list[str],
                        given: dict[str, Any]) -> dict[str, Any]:
    """What the constructor takes after the config: the overrides values of its own arguments (`given`: required ones
    included, `num_classes`), a tokenizer (tokenizer, else a stand-in); anything else it needs is refused in one
    line naming it."""
    extra: dict[str, Any] = {}
    needed = []
    for p in _init_params(cls)[1 if args is not None else 0:]:
        if p.name in given:
            extra[p.name] = given[p.name]
        elif "token" in p.name and args is not None:
            if options.tokenizer:
                extra[p.name] = FileTokenizer(options.tokenizer)
                notes.append(f"tokenizer: {os.path.basename(options.tokenizer)}")
            else:
                extra[p.name], note = _standin_tokenizer(config_dict(args))
                notes.append(note)
        elif p.default is p.empty:
            needed.append(p.name)
    if needed:
        raise SourceError(f"{cls.__name__}.__init__ also needs {', '.join(map(repr, needed))}",
                          hint=f"give {'it' if len(needed) == 1 else 'them'} as {needed[0]}=VALUE with {option('set')}")
    return extra


#: max_batch_size for a config class whose default is 0, "set by its loader" (mistral-inference's TransformerArgs;
#: its from_folder takes max_batch_size=1): enough sequences for the pass's batch.
PASS_BATCH_LIMIT = 64


def unset_batch_limit(args: Any, config: dict[str, Any], notes: list[str]) -> None:
    """A config whose `max_batch_size` is left at a default of 0 takes no sequence at all (`assert len(seqlens) <=
    max_batch_size`): its loader sets it. Set here to PASS_BATCH_LIMIT, noted; a config or overrides value stands."""
    value = getattr(args, "max_batch_size", None)
    if "max_batch_size" in config or value != 0 or isinstance(value, bool):
        return
    try:
        args.max_batch_size = PASS_BATCH_LIMIT
    except (AttributeError, TypeError):  # a frozen config: as it is
        return
    notes.append(f"max_batch_size: {type(args).__name__}'s default 0 (its loader sets it) taken as "
                 f"{PASS_BATCH_LIMIT}; {option('set')} max_batch_size=N gives another")


def build(spec: str, options: BuildOptions) -> Built:
    path, config_path = resolve_paths(spec, options)
    config = read_json_config(config_path) if config_path else None
    stubs = StubRegistry()
    module = import_reference(path, stubs)
    given = dict(options.overrides)
    config, wanted, said = target_config(config, module, options.model_class, os.path.basename(config_path or path))
    target = find_model(module, wanted, set(config) if config is not None else None, set(given))
    return build_target(Target(spec, path, module, target, stubs, said=(said,) if said else ()), config, config_path,
                        options)


@dataclasses.dataclass(frozen=True)
class Target:
    """What a source names, imported: the spec typed, the file, its module, the class or builder, the stubs taken."""

    spec: str
    path: str
    module: Any
    obj: Any
    stubs: StubRegistry
    kind: str = "reference"
    said: tuple[str, ...] = ()  # notes of how the config was read (the node of a target/params config)


def build_target(t: Target, config: dict[str, Any] | None, config_path: str | None, options: BuildOptions) -> Built:
    """Build `t.obj` on meta: a class from its config object (or keyword arguments), a builder function from the
    config's keys and the overrides values as keyword arguments."""
    from .guard import time_limit
    from .meta import construction_error, is_cuda_insistence, meta_build, names_a_missing_field
    from .process_group import constructed

    path, module, cls = t.path, t.module, t.obj
    code_root = locate(path).code_root if t.kind == "reference" else os.path.dirname(path)
    notes: list[str] = []
    args, args_cls, kwargs, extra = _arguments(t, config, config_path, options, notes)
    config_path = config_path or path
    if options.world_size is not None or options.rank is not None:
        if not hasattr(module, "world_size"):
            notes.append(f"{option('world-size')} given, but the module has no world_size global")
        module.world_size = options.world_size or 1
        module.rank = options.rank or 0
    import torch

    default_dtype, dtype_obj = _default_dtype(path, options, notes)
    if not inspect.isclass(cls):  # a builder function: the factory's call, its errors said as a factory's are
        from .construct import call_factory

        model, called = call_factory(cls, {**kwargs, **extra}, t.spec, code_root, options.device, t.stubs)
        meta_notes = None
        notes = called + notes
    else:
        def construct() -> Any:
            with meta_build(options.device) as meta_notes, process_group_as(options.world_size, options.rank), \
                    time_limit(f"building {getattr(cls, '__name__', 'the model')}"):
                if dtype_obj is not None:
                    torch.set_default_dtype(dtype_obj)
                model = cls(args, **extra) if args is not None else cls(**kwargs, **extra)
            return model, meta_notes

        try:
            (model, meta_notes), started = constructed(construct)  # a process group for code that insists on one
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
            # The constructor set a default dtype (DeepSeek-V3: torch.set_default_dtype(torch.bfloat16)); its
            # forward runs under it.
            default_dtype = str(meta_notes.final_dtype).replace("torch.", "")
    refuse_weightless(model, t.spec, cls)
    world_size = int(getattr(module, "world_size", 1) or 1)
    rank = int(getattr(module, "rank", 0) or 0)
    cfg = json.loads(json.dumps({k: v for k, v in (config_dict(args) if args is not None else kwargs).items()
                                 if _jsonable(v)}))
    name, display_root = _model_name(module, code_root, os.path.dirname(path))
    return Built(model=model, spec=t.spec, kind=t.kind, name=name, config=cfg,
                 overrides=dict(options.overrides), stubbed_imports=t.stubs.taken(),
                 notes=list(t.stubs.native_notes) + list(t.said) + notes,
                 world_size=world_size, rank=rank, roots=(code_root,), display_roots=((display_root, ""),),
                 module=module,
                 args=args, stubs=t.stubs, versions=_versions(), default_dtype=default_dtype)


def refuse_weightless(model: Any, spec: str, made_by: Any) -> None:
    """A build that yields no parameters at all (a loss or a helper module of the file, built for want of a config)
    is no model: one line, exit 2. A model converted by torch.ao.quantization holds its weights packed, not as
    parameters: it is a model."""
    from .quantized_names import is_converted

    if any(True for _ in model.parameters()) or any(is_converted(m) for m in model.modules()):
        return
    raise SourceError(f"{spec}: {getattr(made_by, '__name__', 'the model')} built with 0 parameters: it is not the "
                      "model (a loss or a helper?)",
                      hint=f"name the model with {option('model-class')}, or give its config with {option('config')}")


def _arguments(t: Target, config: dict[str, Any] | None, config_path: str | None, options: BuildOptions,
               notes: list[str]) -> tuple[Any, type | None, dict[str, Any], dict[str, Any]]:
    """(the config object or None, its class, the keyword arguments, the constructor's further arguments)."""
    cls, given = t.obj, dict(options.overrides)
    if not inspect.isclass(cls):  # a builder: the config's keys and overrides as its keyword arguments
        kwargs = {**(config or {}), **given}
        if not _check_kwargs(cls, kwargs, t.spec):  # (a namespace's attributes are said where it is made)
            notes.append(f"built as {cls.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})")
        return None, None, kwargs, {}
    args_cls = find_config_class(t.module, cls, options.config_class, set(config or ()))
    if args_cls is None:  # built from its own defaults: the config's keys and overrides give its keyword arguments
        kwargs = _constructor_kwargs(cls, {**(config or {}), **given}, notes, config_path)
        return None, None, kwargs, {}
    own = {p.name for p in _init_params(cls)[1:]}
    fields = config_fields(args_cls)
    into_config = {k: v for k, v in given.items() if k not in own or fields is None or k in fields}
    options = dataclasses.replace(options, overrides=tuple(into_config.items()))
    if args_cls is AttrBag:
        notes.append(f"{cls.__name__}({_config_param(cls)[0].name}) takes a config no class of the file declares: "
                     "the JSON's keys given as attributes")
    args = _config_object(args_cls, dict(config or {}), (config_path, t.path), options, notes)
    extra = _constructor_extras(cls, args, options, notes, {k: v for k, v in given.items() if k not in into_config})
    return args, args_cls, {}, extra


def _check_kwargs(fn: Any, kwargs: dict[str, Any], spec: str) -> bool:
    """Each keyword argument is one the builder takes (or it takes any); True where the builder takes a launcher's
    namespace that was not given (the keys are its attributes: construct.namespace_argument)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    from .launcher import namespace_parameter

    if namespace_parameter(fn, [n for n, p in params.items() if n not in kwargs and p.default is p.empty]):
        return True
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return False
    for key in kwargs:
        if key not in params:
            raise UnknownArgument(f"{spec}: {fn.__name__} has no argument {key!r}",
                              hint=suggest(key, sorted(params)) or f"its arguments: {', '.join(params)}")
    return False


def _constructor_kwargs(cls: type, values: dict[str, Any], notes: list[str], config_path: str | None
                        ) -> dict[str, Any]:
    """A model built from its constructor's defaults: the config's keys and overrides values as its keyword arguments,
    each one checked."""
    taken = {p.name for p in _init_params(cls)}
    for key in values:
        if key not in taken and not _takes_kwargs(cls):
            where = f"{option('config')} {config_path}" if config_path else option("set")
            raise UnknownArgument(f"{where}: {cls.__name__}.__init__ has no argument {key!r}",
                              hint=suggest(key, sorted(taken)) or f"its arguments: {', '.join(sorted(taken))}")
    notes.append(f"built as {cls.__name__}({', '.join(f'{k}={v!r}' for k, v in values.items())})"
                 + ("" if config_path else ": no config given, its constructor's defaults"))
    return dict(values)


def _from_preset(preset: tuple[Any, str], args_cls: type, values: dict[str, Any], notes: list[str]) -> Any:
    """The config made by its preset classmethod (`Config.from_name(name="pythia-160m")`), the other values handed
    to it where it takes them, else set on what it made."""
    import inspect

    maker, key = preset
    takes = inspect.signature(maker).parameters
    anything = any(p.kind is p.VAR_KEYWORD for p in takes.values())
    handed = {k: v for k, v in values.items() if k == key or anything or k in takes}
    args = maker(**handed)
    for k, v in values.items():
        if k not in handed:
            setattr(args, k, v)
    notes.append(f"{args_cls.__name__} made by {args_cls.__name__}.{maker.__name__}("
                 f"{', '.join(f'{k}={v!r}' for k, v in handed.items())}): {key} names one of its presets")
    return args


def _config_object(args_cls: type, config: dict[str, Any], paths: tuple[str | None, str], options: BuildOptions,
                   notes: list[str]) -> Any:
    """The model's config object made from `config` with the overrides values applied (`config` takes them too);
    `paths` is (the config file or None, the model file)."""
    config_path, path = paths
    fields = config_fields(args_cls)
    undeclared: dict[str, Any] = {}  # keys the code reads off the config that its class does not declare
    for key, value in options.overrides:
        if fields is not None and key not in fields:
            read = code_reads(key, locate(path).code_root)
            if read is None:
                raise UnknownArgument(f"{option('set')} {key}: {args_cls.__name__} has no field {key!r}, and the code "
                                  f"reads no {key!r}",
                                  hint=suggest(key, sorted(fields)) or f"see the {args_cls.__name__} fields")
            undeclared[key] = value
            notes.append(f"{key}: not a field of {args_cls.__name__}; set on the config object, as the code reads it "
                         f"({read})")
            continue
        config[key] = value
    unknown = sorted(k for k in config if fields is not None and k not in fields)
    if unknown:
        notes.append(f"config keys not in {args_cls.__name__}, ignored: {', '.join(unknown)}")
    preset = None if config_path else preset_maker(args_cls, set(config))
    if config_path is None and preset is None:
        notes.append(f"no config given: {args_cls.__name__}'s defaults")
    try:
        args = _from_preset(preset, args_cls, config, notes) if preset else make_config(args_cls, config)
    except TypeError as e:
        raise SourceError(f"{config_path or path}: {args_cls.__name__} rejects this config: {e}",
                          hint="add the field it names to the config") from None
    for key, value in undeclared.items():
        try:
            object.__setattr__(args, key, value)  # a frozen dataclass too
        except (AttributeError, TypeError):  # __slots__: no room for it
            raise UnknownArgument(f"{option('set')} {key}: {args_cls.__name__} has no field {key!r} and no room for one",
                              hint=suggest(key, sorted(fields or ())) or f"see the {args_cls.__name__} fields"
                              ) from None
    unset_batch_limit(args, config, notes)
    return args


def _default_dtype(path: str, options: BuildOptions, notes: list[str]) -> tuple[str | None, Any]:
    """The default dtype to build under (its name and the torch dtype): default_dtype, else the launcher's."""
    import torch

    default_dtype = options.default_dtype
    if default_dtype is None:
        found = launcher_dtype(path)
        if found:
            default_dtype = found[0]
            notes.append(f"built and run with default dtype {found[0]}, as its launcher sets ({found[1]})")
    dtype_obj = getattr(torch, default_dtype, None) if default_dtype else None
    if default_dtype and not isinstance(dtype_obj, torch.dtype):
        raise SourceError(f"default_dtype {default_dtype}: not a torch dtype", hint="e.g. bfloat16")
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

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

from ..errors import SourceError
from .guard import importing
from .options import BuildOptions, Built, _versions, read_json_config, suggest
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


def import_reference(path: str, stubs: StubRegistry) -> Any:
    """Import `path` as module `model` (its file stem), stubbing what cannot be imported."""
    from .meta import user_frame

    folder = os.path.dirname(os.path.abspath(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    siblings = _folder_modules(folder)
    stubbed: dict[str, Any] = {}
    sys.path.insert(0, folder)
    try:
        for _ in range(MAX_STUB_ROUNDS):
            _purge(siblings | set(stubbed) | {stem})
            sys.modules.update(stubbed)
            spec = importlib.util.spec_from_file_location(stem, path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[stem] = module
            try:
                with importing(os.path.basename(path)):  # its exits and its own KeyboardInterrupt: one line
                    spec.loader.exec_module(module)
                return module
            except ModuleNotFoundError as e:
                missing = (e.name or "").split(".")[0]
                _LOADED.add(missing)
                if not missing:
                    raise SourceError(f"{path}: import failed: {e}", hint="install what it names") from None
                failing = _failing_file(e, folder)
                failing_stem = os.path.splitext(os.path.basename(failing))[0] if failing else stem
                if failing_stem != stem and failing_stem in siblings and failing_stem not in stubbed:
                    # A sibling (e.g. kernel.py) needs a dependency that is not here: stub the sibling wholesale,
                    # so its functions are answered by name (and by shape rules in the meta forward pass).
                    stubbed[failing_stem] = stubs.module(failing_stem, f"{failing_stem}.py needs {missing}")
                elif missing not in stubbed:
                    reason = "no such module" if missing not in siblings else f"{missing}.py failed to import"
                    stubbed[missing] = stubs.module(missing, reason)
                else:
                    raise SourceError(f"{path}: import of {missing} keeps failing ({e})",
                                      hint="run with --debug for the traceback") from e
            except ImportError as e:
                # `from X import name` where X exists but lacks the name, or a broken sibling: stub X.
                name = (e.name or "").split(".")[0]
                if name and name not in stubbed and name != stem:
                    stubbed[name] = stubs.module(name, f"import failed: {e}")
                    continue
                where = user_frame(e, (folder,)) or os.path.basename(path)
                raise SourceError(f"{path}: import failed at {where}: {e}", hint="fix the import") from None
            except SourceError:
                raise
            except Exception as e:  # noqa: BLE001 - the user's file raised while importing
                where = user_frame(e, (folder,)) or os.path.basename(path)
                raise SourceError(f"{path}: raised {type(e).__name__} on import at {where}: {e}",
                                  hint="fix the module so that it imports (run with --debug for the traceback)"
                                  ) from e
        raise SourceError(f"{path}: too many failing imports", hint="install the model's dependencies")
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)


def find_args_class(module: Any) -> type:
    cands = [v for k, v in vars(module).items()
             if inspect.isclass(v) and dataclasses.is_dataclass(v) and v.__module__ == module.__name__]
    for c in cands:
        if c.__name__ == "ModelArgs":
            return c
    named = [c for c in cands if c.__name__.endswith("Args")]
    if named:
        return named[0]
    raise SourceError(f"{module.__file__}: no ModelArgs dataclass found",
                      hint="archviz builds ModelArgs(**config); use package.module:callable for other models")


def _init_params(cls: type) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    return [p for p in list(sig.parameters.values())[1:] if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def find_model_class(module: Any, args_cls: type, wanted: str | None) -> type:
    import torch

    classes = [v for v in vars(module).values()
               if inspect.isclass(v) and issubclass(v, torch.nn.Module) and v.__module__ == module.__name__]
    if wanted:
        for c in classes:
            if c.__name__ == wanted:
                return c
        raise SourceError(f"--model-class {wanted}: no such nn.Module class in {os.path.basename(module.__file__)}",
                          hint=suggest(wanted, [c.__name__ for c in classes]) or
                          f"classes: {', '.join(c.__name__ for c in classes)}")

    def takes_args_only(c: type) -> bool:
        ps = _init_params(c)
        if not ps or ps[0].name not in ("args", "config", "params") and ps[0].annotation not in (args_cls,
                                                                                                  args_cls.__name__):
            return False
        return all(p.default is not p.empty or "token" in p.name for p in ps[1:])

    cands = [c for c in classes if takes_args_only(c)]
    # The top class is the one no other candidate builds as a child: prefer the conventional names.
    for name in ("Transformer", "Model", "CausalLM"):
        for c in cands:
            if c.__name__ == name:
                return c
    if cands:
        return cands[-1]
    raise SourceError(f"{module.__file__}: no model class built from {args_cls.__name__} alone",
                      hint="name it with --model-class")


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


def launcher_dtype(path: str) -> tuple[str, str] | None:
    """The default dtype a reference's launcher sets before building the model: `torch.set_default_dtype(...)` under
    `if __name__ == "__main__":` in model.py, or in a sibling generate.py. Returns (dtype, where)."""
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
    gen = os.path.join(folder, "generate.py")
    if os.path.isfile(gen):
        with open(gen, encoding="utf-8") as f:
            g = f.read()
        m = _DTYPE_CALL.search(g)
        if m:
            return m.group(1), f"generate.py:{g.count(chr(10), 0, m.start()) + 1}"
    return None


def resolve_paths(spec: str, options: BuildOptions) -> tuple[str, str]:
    path = os.path.join(spec, "model.py") if os.path.isdir(spec) else spec
    config = options.config
    if config is None:
        guess = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
        if os.path.isfile(guess):
            config = guess
        else:
            raise SourceError(f"{path}: a reference implementation needs its config",
                              hint="pass --config path/to/config.json")
    if not os.path.isfile(config):
        raise SourceError(f"--config {config}: no such file", hint="check the path")
    return os.path.abspath(path), os.path.abspath(config)


def build(spec: str, options: BuildOptions) -> Built:
    from .meta import is_cuda_insistence, meta_build, unset_field_hint, user_frame

    path, config_path = resolve_paths(spec, options)
    folder = os.path.dirname(path)
    config = read_json_config(config_path)

    stubs = StubRegistry()
    module = import_reference(path, stubs)
    args_cls = find_args_class(module)
    fields = {f.name for f in dataclasses.fields(args_cls)}
    notes: list[str] = []
    for key, value in options.overrides:
        if key not in fields:
            raise SourceError(f"--set {key}: {args_cls.__name__} has no field {key!r}",
                              hint=suggest(key, sorted(fields)) or "see the ModelArgs fields")
        config[key] = value
    unknown = sorted(k for k in config if k not in fields)
    if unknown:
        notes.append(f"config keys not in {args_cls.__name__}, ignored: {', '.join(unknown)}")
    try:
        args = args_cls(**{k: v for k, v in config.items() if k in fields})
    except TypeError as e:
        raise SourceError(f"{config_path}: {args_cls.__name__} rejects this config: {e}",
                          hint="add the field it names to the config") from None

    cls = find_model_class(module, args_cls, options.model_class)
    extra: dict[str, Any] = {}
    for p in _init_params(cls)[1:]:
        if "token" in p.name:
            if options.tokenizer:
                extra[p.name] = FileTokenizer(options.tokenizer)
                notes.append(f"tokenizer: {os.path.basename(options.tokenizer)}")
            else:
                extra[p.name], note = _standin_tokenizer(dataclasses.asdict(args))
                notes.append(note)
        elif p.default is p.empty:
            raise SourceError(f"{cls.__name__}.__init__ needs {p.name!r}, which archviz cannot supply",
                              hint="wrap the construction in a function and pass package.module:callable")

    if options.world_size is not None or options.rank is not None:
        if not hasattr(module, "world_size"):
            notes.append("--world-size given, but the module has no world_size global")
        module.world_size = options.world_size or 1
        module.rank = options.rank or 0
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
    try:
        with meta_build(options.device) as meta_notes, process_group_as(options.world_size, options.rank):
            if dtype_obj is not None:
                torch.set_default_dtype(dtype_obj)
            model = cls(args, **extra)
    except SourceError:
        raise
    except AttributeError as e:
        where = user_frame(e, (folder,)) or os.path.basename(path)
        if getattr(e, "obj", None) is args:
            raise SourceError(f"{config_path}: the model reads args.{e.name} at {where}, which "
                              f"{args_cls.__name__} lacks", hint=f"add {e.name!r} to ModelArgs or the config") from None
        raise SourceError(f"{path}: building {cls.__name__} raised AttributeError at {where}: {e}",
                          hint=unset_field_hint(e, dict(getattr(args, "__dict__", {})))
                          or "run with --debug for the traceback") from e
    except Exception as e:  # noqa: BLE001
        where = user_frame(e, (folder,)) or os.path.basename(path)
        if is_cuda_insistence(e):
            raise SourceError(f"{path}: the model insists on CUDA at {where}: {e}",
                              hint="archviz builds on the meta device; guard the CUDA call with "
                                   "torch.cuda.is_available()") from None
        raise SourceError(f"{path}: building {cls.__name__} raised {type(e).__name__} at {where}: {e}",
                          hint=unset_field_hint(e, dict(getattr(args, "__dict__", {})))
                          or "check the config (run with --debug for the traceback)") from e
    notes = list(meta_notes.items) + notes
    if default_dtype is None and meta_notes.final_dtype not in (None, torch.float32):
        # The constructor set a default dtype (DeepSeek-V3: torch.set_default_dtype(torch.bfloat16)); its forward
        # runs under it.
        default_dtype = str(meta_notes.final_dtype).replace("torch.", "")
    world_size = int(getattr(module, "world_size", 1) or 1)
    rank = int(getattr(module, "rank", 0) or 0)
    cfg = json.loads(json.dumps({k: v for k, v in dataclasses.asdict(args).items() if _jsonable(v)}))
    name = os.path.basename(folder) or "model"
    if name in _GENERIC_FOLDERS:  # DeepSeek's releases keep the code in inference/: name the model by the folder above
        name = os.path.basename(os.path.dirname(folder)) or name
    return Built(model=model, spec=spec, kind="reference", name=name, config=cfg,
                 overrides=dict(options.overrides), stubbed_imports=stubs.taken(), notes=notes,
                 world_size=world_size, rank=rank, roots=(folder,), display_roots=((folder, ""),), module=module,
                 args=args, stubs=stubs, versions=_versions(), default_dtype=default_dtype)


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False

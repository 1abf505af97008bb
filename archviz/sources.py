"""Model sources: turn one SOURCE string into a model built on the meta device.

- `hf:<model_type>`, a `config.json`, or a Hugging Face-style model folder: transformers' own model code;
- a reference implementation: `model.py` (or its folder) with a `config.json` (DeepSeek's `inference/` style);
- `package.module:callable` returning an `nn.Module`.

`build(spec, options)` returns a `Built`: the live model plus what the records need to say about how it was built.
`Built` stays inside the library; renderers only ever see records.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import SourceError
from .stubs import StubRegistry


@dataclass(frozen=True)
class BuildOptions:
    config: str | None = None  # config.json for a reference implementation
    overrides: tuple[tuple[str, Any], ...] = ()  # --set key=value, values already parsed
    model_class: str | None = None  # reference: the top class to build
    tokenizer: str | None = None  # reference: tokenizer.json for constructors that take one
    world_size: int | None = None  # reference: module global `world_size`
    rank: int | None = None  # reference: module global `rank`
    default_dtype: str | None = None  # reference: default dtype to build and run under (else found in its launcher)
    device: str = "meta"  # "cpu" only for the execution probe's small copies
    trust_remote_code: bool = False  # transformers folder: import and run the .py files config.json's auto_map names
    quantized: bool = False  # transformers: lay out the modules as config.json's quantization_config says


@dataclass
class Built:
    """A model built on meta and the facts of its build (internal; never handed to renderers)."""

    model: Any  # torch.nn.Module
    spec: str
    kind: str  # hf | reference | factory
    name: str
    config: dict[str, Any]
    overrides: dict[str, Any]
    stubbed_imports: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    world_size: int = 1
    rank: int = 0
    roots: tuple[str, ...] = ()  # folders whose files are the user's model code
    display_roots: tuple[tuple[str, str], ...] = ()  # (absolute folder, display prefix) to name source files
    module: Any = None  # reference: the imported model module
    args: Any = None  # reference: the ModelArgs instance; hf: the config object
    stubs: StubRegistry | None = None
    versions: dict[str, str] = field(default_factory=dict)
    default_dtype: str | None = None  # reference: the default dtype its launcher sets (build and forward run under it)
    # hf --quantized: a context in which the modules the quantizer replaced are back (the meta pass runs there)
    unquantized: Callable[[], Any] | None = None
    # hf: (path, module) pairs -> what from_pretrained consults to name checkpoint tensors (JSON-able)
    loading: Callable[[list[tuple[str, Any]]], dict[str, Any]] | None = None


def parse_override(text: str) -> tuple[str, Any]:
    """`key=value`; the value is read as JSON when it parses (numbers, booleans, lists), else kept as a string."""
    if "=" not in text:
        raise SourceError(f"--set {text!r} is not key=value", hint="write e.g. --set num_hidden_layers=4")
    key, raw = text.split("=", 1)
    key = key.strip()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def classify(spec: str, options: BuildOptions) -> str:
    if spec.startswith("hf:"):
        return "hf"
    if os.path.exists(spec):
        if os.path.isdir(spec):
            if os.path.isfile(os.path.join(spec, "model.py")):
                return "reference"
            if os.path.isfile(os.path.join(spec, "config.json")):
                return "hf"
            raise SourceError(f"{spec}: folder holds neither model.py nor config.json",
                              hint="give a reference model.py (with --config) or a Hugging Face model folder")
        if spec.endswith(".py"):
            return "reference"
        if spec.endswith(".json"):
            return "hf"
        raise SourceError(f"{spec}: not a model source", hint="give hf:<model_type>, a config.json, a model folder, "
                          "a model.py with --config, or package.module:callable")
    if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", spec):
        return "factory"
    raise SourceError(f"{spec}: no such file, and not hf:<model_type> or package.module:callable",
                      hint="check the path, or write hf:llama for transformers' llama")


# Build options that only one kind of source reads: given to another, they would be ignored without a word.
_ONLY_FOR = {"--config": "reference", "--model-class": "reference", "--tokenizer": "reference",
             "--world-size": "reference", "--rank": "reference", "--trust-remote-code": "hf", "--quantized": "hf"}
_KIND_WORDS = {"reference": "a reference model.py", "hf": "a transformers model (hf:<type>, config.json or folder)",
               "factory": "a package.module:callable"}


def _refuse_unused(spec: str, kind: str, options: BuildOptions) -> None:
    given = {"--config": options.config, "--model-class": options.model_class, "--tokenizer": options.tokenizer,
             "--world-size": options.world_size, "--rank": options.rank,
             "--trust-remote-code": options.trust_remote_code or None, "--quantized": options.quantized or None}
    unused = [flag for flag, value in given.items() if value is not None and _ONLY_FOR[flag] != kind]
    if unused:
        owners = sorted({_ONLY_FOR[f] for f in unused})
        raise SourceError(f"{spec}: {', '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to "
                          f"{' or '.join(_KIND_WORDS[o] for o in owners)}, and this is {_KIND_WORDS[kind]}",
                          hint=f"drop {', '.join(unused)}")


def build(spec: str, options: BuildOptions = BuildOptions()) -> Built:
    kind = classify(spec, options)
    _refuse_unused(spec, kind, options)
    if kind == "hf":
        from . import source_hf
        return source_hf.build(spec, options)
    if kind == "reference":
        from . import source_reference
        return source_reference.build(spec, options)
    return build_factory(spec, options)


def build_factory(spec: str, options: BuildOptions) -> Built:
    import torch

    from .meta import is_cuda_insistence, meta_build, user_frame

    mod_name, attr = spec.split(":", 1)
    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        raise SourceError(f"{spec}: cannot import {mod_name} ({e})",
                          hint="install the package or put its folder on PYTHONPATH") from None
    except Exception as e:  # noqa: BLE001 - the user's module raised while importing
        where = user_frame(e, (os.path.dirname(getattr(sys.modules.get(mod_name), "__file__", "") or ""),)) or mod_name
        raise SourceError(f"{spec}: importing {mod_name} raised {type(e).__name__}: {e} ({where})",
                          hint="fix the module so that it imports") from None
    fn: Any = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise SourceError(f"{spec}: {mod_name} has no attribute {attr!r}",
                              hint=f"names there: {', '.join(n for n in dir(module) if not n.startswith('_'))[:200]}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise SourceError(f"{spec}: {attr} is not callable", hint="point at a function or class that returns a module")
    root = os.path.dirname(getattr(module, "__file__", "") or "")
    kwargs = dict(options.overrides)
    try:
        with meta_build(options.device) as notes:
            model = fn(**kwargs)  # --set key=value: the factory's keyword arguments
    except Exception as e:  # noqa: BLE001
        where = user_frame(e, (root,)) or spec
        # the factory's own signature refused an argument (not a TypeError from deeper in its code)
        lacked = [k for k in kwargs if isinstance(e, TypeError) and f"unexpected keyword argument '{k}'" in str(e)]
        if lacked:
            raise SourceError(f"{spec}: {attr} does not take {', '.join(lacked)} ({e})",
                              hint="--set key=value passes keyword arguments to a factory: give only the ones "
                                   "it takes") from None
        if is_cuda_insistence(e):
            raise SourceError(f"{spec}: the model insists on CUDA at {where}: {e}",
                              hint="archviz builds on the meta device; remove the hard CUDA requirement "
                                   "or guard it with torch.cuda.is_available()") from None
        raise SourceError(f"{spec}: building the model raised {type(e).__name__}: {e} ({where})",
                          hint="run with --debug for the traceback") from e
    if not isinstance(model, torch.nn.Module):
        raise SourceError(f"{spec}: returned {type(model).__name__}, not a torch.nn.Module",
                          hint="the factory must return the model (an nn.Module)")
    # The keyword arguments are the factory's config: they name dims (`64` -> `d`), as a config.json's fields do.
    config = {k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool, list)) or v is None}
    return Built(model=model, spec=spec, kind="factory", name=attr, config=config, overrides=kwargs,
                 notes=list(notes.items), roots=(root,), display_roots=_display_roots_for(module),
                 versions=_versions())


def _display_roots_for(module: Any) -> tuple[tuple[str, str], ...]:
    """Name files relative to the folder above the top-level package, e.g. `mypkg/models.py`."""
    top = sys.modules.get(module.__name__.split(".")[0])
    f = getattr(top, "__file__", None)
    if not f:
        return ()
    base = os.path.dirname(f)
    if os.path.basename(f) == "__init__.py":
        base = os.path.dirname(base)
    return ((base, ""),)


def _versions(*packages: str) -> dict[str, str]:
    """Versions of torch, archviz and the named packages the build used (never what else the process imported)."""
    import importlib.metadata

    out = {}
    for pkg in ("torch", *packages):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    from . import __version__
    out["archviz"] = __version__
    return out


def read_json_config(path: str) -> dict[str, Any]:
    """A config file as a dict, or one clear line saying why not."""
    from .safejson import load_config_file

    raw = load_config_file(path)  # a regular file, bounded size and nesting (archviz.safejson)
    if not isinstance(raw, dict):
        raise SourceError(f"{path}: a config must be a JSON object", hint="check the file")
    return raw


def suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3)
    return f"did you mean {', '.join(close)}?" if close else ""


__all__ = ["BuildOptions", "Built", "build", "classify", "parse_override", "read_json_config", "suggest"]

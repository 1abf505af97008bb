"""The stage's vocabulary: `BuildOptions` in, `Built` out, and the small readers every kind of source shares."""

from __future__ import annotations

import ast
import difflib
import json
from dataclasses import dataclass, field
from typing import Any, Callable
from ..errors import SourceError
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


SET_VALUES = ("a value is read as JSON (4, 0.5, true, null, [1, 2], \"text\"), else as a Python literal (None, "
              "True, False, (1, 2), 'text'), else kept as the string it is")


def parse_override(text: str) -> tuple[str, Any]:
    """`key=value`; the value is read as JSON when it parses (numbers, booleans, null, lists), else as a Python
    literal (`None`, `True`, `False`, tuples, quoted strings: `weights_backbone=None` gives None, not "None"),
    else kept as a string (`act=gelu`)."""
    if "=" not in text:
        raise SourceError(f"--set {text!r} is not key=value", hint="write e.g. --set num_hidden_layers=4; "
                                                                  + SET_VALUES)
    key, raw = text.split("=", 1)
    key = key.strip()
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        pass
    try:  # literals only: ast.literal_eval never calls or imports anything
        return key, ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return key, raw


def _versions(*packages: str) -> dict[str, str]:
    """Versions of torch, archviz and the named packages the build used (never what else the process imported)."""
    import importlib.metadata

    out = {}
    for pkg in ("torch", *packages):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    from .. import __version__
    out["archviz"] = __version__
    return out


def read_json_config(path: str) -> dict[str, Any]:
    """A config file as a dict, or one clear line saying why not."""
    from ..safejson import load_config_file

    raw = load_config_file(path)  # a regular file, bounded size and nesting (archviz.safejson)
    if not isinstance(raw, dict):
        raise SourceError(f"{path}: a config must be a JSON object", hint="check the file")
    return raw


def suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3)
    return f"did you mean {', '.join(close)}?" if close else ""

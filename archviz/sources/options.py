"""The stage's vocabulary: `BuildOptions` in, `Built` out, and the small readers every kind of source shares."""

from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..errors import SourceError, option, shown
from ..records.recordcheck import refused_as, want_table

if TYPE_CHECKING:
    from .stubs import StubRegistry


@dataclass(frozen=True)
class BuildOptions:
    config: str | None = None  # config.json for a reference implementation
    overrides: tuple[tuple[str, Any], ...] = ()  # overrides key=value, values already parsed
    model_class: str | None = None  # reference: the top class to build
    config_class: str | None = None  # reference: the class the config JSON builds (else found from the code)
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
    tokens_1d: bool = False  # shapes: the forward takes token ids [T], not [B, T] (found by the meta pass)
    # hf quantized: a context in which the modules the quantizer replaced are back (the meta pass runs there)
    unquantized: Callable[[], Any] | None = None
    # hf: (path, module) pairs -> what from_pretrained consults to name checkpoint tensors (JSON-able)
    loading: Callable[[list[tuple[str, Any]]], dict[str, Any]] | None = None
    # a live model handed in wrapped (archviz.sources.live): {"wrappers": [...], "own_modules": [paths the wrapper added]}
    wrapper: dict[str, Any] | None = None


SET_VALUES = ("a value is read as JSON (4, 0.5, true, null, [1, 2], \"text\"), else as a Python literal (None, "
              "True, False, (1, 2), 'text'), else kept as the string it is")


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_override(text: str, flag: str = option("set")) -> tuple[str, Any]:
    """`key=value`; the value is read as JSON when it parses (numbers, booleans, null, lists), else as a Python
    literal (`None`, `True`, `False`, tuples, quoted strings: `weights_backbone=None` gives None, not "None"),
    else kept as a string (`act=gelu`). The key must be a field or argument name; a size the config class would
    take but no model can have (`num_hidden_layers=-3`) is refused (see `check_override`)."""
    if "=" not in text:
        raise SourceError(f"{flag} {shown(text)} is not key=value", hint=f"write e.g. {flag} num_hidden_layers=4; "
                                                                  + SET_VALUES)
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise SourceError(f"{flag} {shown(text)}: the key is empty",
                          hint=f"write {flag} KEY=VALUE, e.g. {flag} num_hidden_layers=2")
    if not _KEY.fullmatch(key):
        raise SourceError(f"{flag} {shown(text)}: {shown(key, 40)} is not a field name (letters, digits and _)",
                          hint=f"write {flag} KEY=VALUE, e.g. {flag} num_hidden_layers=2")
    where = f"{flag} {shown(text)}"
    value = _value(raw, where)
    check_override(key, value, where)
    return key, value



def _value(raw: str, where: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    except (ValueError, RecursionError):  # an int of more digits than Python converts; nesting past the stack
        raise SourceError(f"{where}: the value is too large or too deeply nested to read",
                          hint="give a number of at most a few hundred digits, or a flat list") from None
    try:  # literals only: ast.literal_eval never calls or imports anything
        return ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


# Sizes no model can have at zero (a model of no layers, no width, no heads, no vocabulary is not the model asked
# for), and name patterns of counts and widths no model can have below zero. Both are refused for `overrides` values:
# a config class takes them (transformers builds a llama of -3 layers: its embedding and head, no layers), and what
# archviz would then report is not the model asked for.
_AT_LEAST_ONE = frozenset({
    "num_hidden_layers", "num_layers", "n_layer", "n_layers", "hidden_size", "d_model", "n_embd",
    "num_attention_heads", "n_head", "n_heads", "num_key_value_heads", "vocab_size", "intermediate_size", "head_dim",
    "max_position_embeddings",
})  # not `dim`: a factory's `dim=-1` (nn.Softmax) is an axis
_COUNT_OR_WIDTH = re.compile(r"^(?:num|n)_|_(?:size|layers|heads|experts|lora_rank|embeddings|features|channels|"
                             r"head_dim|inter_dim)$")  # not `_dim`: nn.Flatten's end_dim=-1 is an axis


def check_override(key: str, value: Any, where: str) -> None:
    """Refuse a size that the config class would take but no model has: a negative count or width (-1 aside where
    the key is no core size: codes default such counts to -1 for "unset"), a zero layer count, width, head count or
    vocabulary, or a string, bool or fraction where those are whole numbers."""
    core = key in _AT_LEAST_ONE
    if (not core and not _COUNT_OR_WIDTH.search(key)) or "window" in key:
        return
    example = f"e.g. {option('set')} {key}={'2' if 'layer' in key else '64'}"
    if core and isinstance(value, (bool, str, float)):
        raise SourceError(f"{where}: {key} is a whole number, not {value!r}", hint="give a positive integer, "
                                                                                   f"{example}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if value < 0 and (core or value != -1):  # -1: the code's own "unset, same as another" (num_heads_upsample=-1)
        raise SourceError(f"{where}: {key} cannot be negative", hint=f"give a positive integer, {example}")
    if core and value < 1:
        raise SourceError(f"{where}: a model with {key} = {value:g} is not a model archviz can describe",
                          hint=f"give at least 1, {example}")


def check_overrides(texts: list[str] | None, flag: str = option("set")) -> dict[str, Any]:
    """`overrides` values read (`parse_override`), a key given twice with different values refused."""
    out: dict[str, Any] = {}
    first: dict[str, str] = {}
    for text in texts or ():
        key, value = parse_override(text, flag)
        if key in out and (out[key] != value or type(out[key]) is not type(value)):
            raise SourceError(f"{flag} {shown(first[key])} and {flag} {shown(text)} disagree on {key}",
                              hint=f"give {flag} {key}=... once")
        out[key] = value
        first.setdefault(key, text)
    return out


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
    """A config file (JSON; YAML where its name ends in .yaml or .yml) as a dict, or one clear line saying why
    not."""
    from ..files.safejson import load_config_file
    from ..files.safeyaml import YAML_SUFFIXES, load_file

    yaml = str(path).lower().endswith(YAML_SUFFIXES)
    # a regular file, bounded size and nesting (archviz.files.safejson, safeyaml)
    raw = load_file(path, what="config", error=SourceError) if yaml else load_config_file(path)
    with refused_as(lambda m: SourceError(f"{path}: {m}", hint="check the file")):
        want_table("", raw, what="a config: a YAML mapping" if yaml else "a config: a JSON object")
    check_config_sizes(raw, path)
    return raw


def check_config_sizes(config: dict[str, Any], where: str, depth: int = 2) -> None:
    """Refuse, before anything is built, a config whose counts or widths no model has (`check_override` of each
    value: a negative or zero layer count, head count or width), in its sub-configs too (text_config, ...)."""
    for key, value in config.items():
        if isinstance(value, dict) and depth > 0:
            check_config_sizes(value, f"{where} ({key})" if "(" not in where else where, depth - 1)
        elif isinstance(key, str):
            check_override(key, value, where)


def suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3)
    return f"did you mean {', '.join(close)}?" if close else ""

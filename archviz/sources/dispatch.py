"""Which kind of source a SOURCE string is, and the build that kind gets.

- `hf:<model_type>`, a `config.json`, or a Hugging Face-style model folder: transformers' own model code;
- a reference implementation: `model.py` (or its folder) with a `config.json` (DeepSeek's `inference/` style);
- `package.module:callable` returning an `nn.Module`;
- a Hub repository, `org/name[@revision]` or `hf://org/name`: its config.json fetched (archviz.sources.hub), built as
  a model folder.

`build(spec, options)` returns a `Built`: the live model plus what the records need to say about how it was built.
`Built` stays inside the library; renderers only ever see records.
"""

from __future__ import annotations

import os
import re

from ..errors import SourceError, option
from .options import BuildOptions, Built
from .factory import build_factory


def classify(spec: str, options: BuildOptions) -> str:
    if not isinstance(spec, str):  # a Python object: a live model, a factory callable, a config (sources.live)
        return "live"
    from .hub import hub_repo

    if hub_repo(spec) is not None:
        return "hub"
    if spec.startswith("hf:"):
        return "hf"
    if os.path.exists(spec):
        from .diffusers_config import is_diffusers

        if os.path.isdir(spec):
            if os.path.isfile(os.path.join(spec, "model.py")):
                return "reference"
            if os.path.isfile(os.path.join(spec, "config.json")):
                return "diffusers" if is_diffusers(spec) else "hf"
            if os.path.isfile(os.path.join(spec, "__init__.py")):  # a package: the model its classes or builders make
                return "reference"
            raise SourceError(f"{spec}: folder holds neither model.py, config.json nor __init__.py",
                              hint=f"give a reference model.py (with {option('config')}), a Hugging Face model "
                                   "folder, or a package's folder")
        if spec.endswith(".py"):
            return "reference"
        if spec.endswith(".json"):
            return "diffusers" if is_diffusers(spec) else "hf"
        raise SourceError(f"{spec}: not a model source", hint="give hf:<model_type>, a config.json, a model folder, "
                          f"a model.py with {option('config')}, or package.module:callable")
    if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", spec):
        return "factory"
    raise SourceError(f"{spec}: no such file, and not hf:<model_type> or package.module:callable",
                      hint="check the path, or write hf:llama for transformers' llama")


# Build options that only one kind of source reads: given to another, they would be ignored without a word.
_ONLY_FOR = {option("config"): ("reference", "factory"), option("model-class"): ("reference",),
             option("config-class"): ("reference",), option("tokenizer"): ("reference",),
             option("world-size"): ("reference",), option("rank"): ("reference",),
             option("trust-remote-code"): ("hf", "hub"), option("quantized"): ("hf", "hub")}
_KIND_WORDS = {"reference": "a reference model.py", "hf": "a transformers model (hf:<type>, config.json or folder)",
               "factory": "a package.module:callable", "hub": "a Hub repository (org/name)",
               "diffusers": "a diffusers config.json"}


def _refuse_unused(spec: str, kind: str, options: BuildOptions) -> None:
    given = {option("config"): options.config, option("model-class"): options.model_class,
             option("config-class"): options.config_class, option("tokenizer"): options.tokenizer,
             option("world-size"): options.world_size, option("rank"): options.rank,
             option("trust-remote-code"): options.trust_remote_code or None,
             option("quantized"): options.quantized or None}
    unused = [flag for flag, value in given.items() if value is not None and kind not in _ONLY_FOR[flag]]
    if unused:
        owners = sorted({o for f in unused for o in _ONLY_FOR[f]})
        raise SourceError(f"{spec}: {', '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to "
                          f"{' or '.join(_KIND_WORDS[o] for o in owners)}, and this is {_KIND_WORDS[kind]}",
                          hint=f"drop {', '.join(unused)}")


def build(spec: str, options: BuildOptions = BuildOptions()) -> Built:
    kind = classify(spec, options)
    if kind == "live":  # the user's own object, its training mode left as it is
        from .live import build_live
        return build_live(spec, options)
    _refuse_unused(spec, kind, options)
    if kind == "hf":
        from . import hf
        built = hf.build(spec, options)
    elif kind == "hub":  # its config.json (and code) fetched, then built as the model folder it is
        from . import diffusers_config, hf, hub
        folder = hub.fetch(spec, options.trust_remote_code)
        built = (diffusers_config if diffusers_config.is_diffusers(folder) else hf).build(folder, options)
        built.spec = spec
    elif kind == "diffusers":
        from . import diffusers_config
        built = diffusers_config.build(spec, options)
    elif kind == "reference":
        from . import reference
        built = reference.build(spec, options)
    else:
        built = build_factory(spec, options)
    # Every kind is built in eval mode, as transformers' from_pretrained leaves its models: what a model card
    # documents is inference (dropout off, batch norm on running statistics, no auxiliary training heads). The meta
    # pass can trace training mode on request (`trace_shapes(run=PassRun(train=True))`, the CLI's train option).
    built.model.eval()
    return built


__all__ = ["BuildOptions", "Built", "build", "classify", "parse_override", "read_json_config", "suggest"]

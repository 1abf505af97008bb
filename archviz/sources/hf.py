"""transformers models: `hf:<model_type>` (config class defaults), a config.json, or a model folder."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import os
import re
import sys
import warnings
from typing import Any, Callable, Iterator

from ..errors import SourceError, one_line, option
from ..records.recordcheck import refused_as, want_str
from .options import BuildOptions, Built, _versions, read_json_config, shown, suggest


def _import_transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise SourceError("transformers is not installed", hint="pip install 'archviz[hf]'") from None
    return transformers


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """transformers logs deprecations and hints while configs and models are built; the library never prints."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)


def load_config(spec: str, options: BuildOptions) -> tuple[Any, str]:
    if not spec.startswith("hf:"):  # a config file's types and sizes are refused before transformers is imported
        path = os.path.join(spec, "config.json") if os.path.isdir(spec) else spec
        raw = read_json_config(path)
        with refused_as(lambda m: SourceError(f"{path}: {m}", hint='give one model type, e.g. "model_type": '
                                                                   '"llama"')):
            model_type = want_str("model_type", raw.get("model_type"), optional=True)
    transformers = _import_transformers()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    overrides = dict(options.overrides)
    if spec.startswith("hf:"):
        model_type = spec[3:]
        if model_type not in CONFIG_MAPPING_NAMES:
            raise SourceError(f"{spec}: unknown model type {model_type!r} in transformers {transformers.__version__}",
                              hint=suggest(model_type, list(CONFIG_MAPPING_NAMES)) or
                              "see transformers' CONFIG_MAPPING for the known model types")
        raw = {}
        name = model_type
        path = spec
    else:
        if not model_type:
            raise SourceError(f"{path}: no model_type field", hint="add \"model_type\" (e.g. \"llama\") to the config")
        code = auto_map(raw)
        if model_type not in CONFIG_MAPPING_NAMES and not (code.get("AutoConfig") and options.trust_remote_code):
            if code and options.trust_remote_code:
                raise SourceError(f"{path}: auto_map names no AutoConfig for model_type {model_type!r}",
                                  hint='add "AutoConfig": "configuration_x.MyConfig" to auto_map')
            if code:
                raise SourceError(f"{path}: model_type {model_type!r} is the folder's own code (auto_map: "
                                  f"{', '.join(sorted(set(code.values())))}), not transformers'",
                                  hint=f"pass {option('trust-remote-code')} to import and run the folder's .py files")
            raise SourceError(f"{path}: unknown model_type {model_type!r} in transformers {transformers.__version__}",
                              hint=suggest(model_type, list(CONFIG_MAPPING_NAMES)) or "check model_type")
        name = raw.get("_name_or_path") or os.path.basename(os.path.dirname(os.path.abspath(path))) or model_type
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    remote = auto_map(raw).get("AutoConfig") if options.trust_remote_code else None
    # the class, without building its default (which may not validate)
    config_class = remote_class(remote, path) if remote else CONFIG_MAPPING[model_type]
    top, text = _split_overrides(config_class, overrides)
    values = {**raw, **top}
    if text:  # a composite config (Qwen3.5, Llama 4): the text model's fields live in its text_config
        values["text_config"] = {**(raw.get("text_config") or {}), **text}
    # Overrides go through the config's constructor, so derived fields (layer_types, ...) follow them.
    try:
        config = config_class.from_dict(values) if values else config_class()
    except Exception as e:  # noqa: BLE001
        raise SourceError(f"{path}: transformers rejects this {model_type} config: {e}",
                          hint="fix the field it names") from None
    return config, name


def auto_map(raw: dict[str, Any]) -> dict[str, str]:
    """config.json's `auto_map` (Auto class -> `module.Class` in the model's folder), its single-class entries."""
    found = raw.get("auto_map")
    return {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, dict) else {}


_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _contained(file: str, folder: str, path: str) -> None:
    """The model's own code is run only from inside its folder once links are resolved (or, for a snapshot of
    huggingface_hub's cache, from its repository's blobs), and only from files this user (or root) owns that others
    cannot write: a symlinked subfolder or module leading elsewhere is refused."""
    import stat

    real, inside = os.path.realpath(file), os.path.realpath(folder)
    roots = [inside]
    snapshots = os.path.dirname(inside)
    if os.path.basename(snapshots) == "snapshots" and os.path.basename(os.path.dirname(snapshots)).startswith(
            ("models--", "datasets--", "spaces--")):  # huggingface_hub's cache: a snapshot's files link to its blobs
        roots.append(os.path.join(os.path.dirname(snapshots), "blobs"))
    if not any(os.path.commonpath([real, root]) == root for root in roots):
        raise SourceError(f"{path}: the model's code {os.path.relpath(file, folder)} leads outside {folder} "
                          f"(to {real})", hint="copy the model's .py files into its folder itself")
    try:
        st = os.stat(real)
    except OSError:
        return  # a relative import that is not there: transformers says so when it imports
    if st.st_uid not in (os.getuid(), 0) or st.st_mode & stat.S_IWOTH:
        raise SourceError(f"{path}: the model's code {os.path.relpath(file, folder)} is owned by another user or "
                          "writable by others, so anyone could have changed it", hint=f"chmod o-w {real}")


def remote_class(ref: str, path: str) -> Any:
    """The class `ref` (`modeling_x.MyModel`) from the .py files beside `path` (a config.json), imported the way
    transformers' trust_remote_code does (copied into its modules cache, relative imports included), offline."""
    folder = os.path.dirname(os.path.abspath(path))
    if "--" in ref:
        raise SourceError(f"{path}: auto_map points at code in another repository ({ref.split('--')[0]})",
                          hint="put that repository's .py files beside config.json and name them in auto_map")
    if not _DOTTED.fullmatch(ref):
        raise SourceError(f"{path}: auto_map names {ref!r}, not module.Class of a file beside config.json",
                          hint='write e.g. "AutoModelForCausalLM": "modeling_x.MyModel"')
    module_file = ref.split(".", 1)[0] + ".py"
    if not os.path.isfile(os.path.join(folder, module_file)):
        raise SourceError(f"{path}: auto_map names {ref}, but there is no {module_file} in {folder}",
                          hint="put the model's .py files beside its config.json")
    _import_transformers()
    from transformers.dynamic_module_utils import get_class_from_dynamic_module, get_relative_import_files

    module_path = os.path.join(folder, module_file)
    _contained(module_path, folder, path)
    try:
        imported = get_relative_import_files(module_path)
    except OSError as e:
        raise SourceError(f"{path}: {module_file} imports a module that is not in {folder} ({e.strerror}: "
                          f"{os.path.basename(str(e.filename))})", hint="put the model's .py files beside its "
                          "config.json") from None
    for file in imported:
        _contained(file, folder, path)

    try:
        with _quiet():
            return get_class_from_dynamic_module(ref, folder, local_files_only=True)
    except ImportError as e:
        import transformers

        if getattr(e, "name", None) and str(e.name).startswith("transformers") or "from 'transformers" in str(e):
            # code written for another transformers (the Hub's DeepSeek-V3 modeling file imports
            # is_torch_fx_available, gone in transformers 5)
            hint = (f"{module_file} was written for another transformers than this {transformers.__version__}: run "
                    "archviz where that version is installed, or build transformers' own class of the model type "
                    f"(without {option('trust-remote-code')})")
        else:
            hint = "install the packages it names"
        raise SourceError(f"{path}: {module_file} cannot be imported: {e}", hint=hint) from None
    except Exception as e:  # noqa: BLE001 - the folder's own code raised while importing
        raise SourceError(f"{path}: importing {module_file} raised {type(e).__name__}: {e}",
                          hint=f"install what it needs; {option('debug')} shows the traceback") from e


def _remote_model_class(config: Any, path: str) -> Any:
    """With trust_remote_code: the model class config.json's auto_map names (the causal LM, else one of its
    `architectures`, else the base model), or None when auto_map names no model."""
    code = auto_map({"auto_map": getattr(config, "auto_map", None)})
    archs = set(getattr(config, "architectures", None) or ())
    named = [v for k, v in sorted(code.items()) if k.startswith("AutoModel") and v.rsplit(".", 1)[-1] in archs]
    ref = code.get("AutoModelForCausalLM") or (named[0] if named else None) or code.get("AutoModel")
    return remote_class(ref, path) if ref else None


def _source(cls: Any) -> str:
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return ""


def _fields(config_class: Any) -> tuple[Any, str]:
    return config_class(), _source(config_class)


def _split_overrides(config_class: Any, overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`overrides` keys of the config itself, and keys of its text_config (a composite config's text model)."""
    if not overrides:
        return {}, {}
    top: dict[str, Any] = {}
    text: dict[str, Any] = {}
    text_class = (getattr(config_class, "sub_configs", None) or {}).get("text_config")
    try:
        default, source = _fields(config_class)
        # the text config the default holds (a sub_configs entry of AutoConfig cannot be made by itself: fuyu's)
        text_default = getattr(default, "text_config", None) if text_class is not None else None
        if text_class is not None and text_default is None:
            text_default, text_source = _fields(text_class)
        else:
            text_source = _source(type(text_default)) if text_default is not None else ""
    except Exception as e:  # noqa: BLE001 - transformers' own default fails its validators (gemma4_assistant)
        raise SourceError(f"{option('set')}: transformers' own default {config_class.__name__} fails its validation, "
                          f"so no key can be checked against it (transformers': {one_line(str(e))})",
                          hint="write the fields into a config.json, the ones it names fixed, and give its path as the "
                          f"source instead of hf:<type> with {option('set')}") from None
    for key, value in overrides.items():
        # A field, or a legacy key the config's constructor reads (deepseek_v4: compress_ratios).
        if hasattr(default, key) or f'"{key}"' in source:  # `config` took any key
            top[key] = value
        elif text_default is not None and (hasattr(text_default, key) or f'"{key}"' in text_source):
            text[key] = value
        else:
            known = sorted(default.to_dict())
            raise SourceError(f"{option('set')} {key}: {config_class.__name__} has no field {key!r}",
                              hint=suggest(key, known) or "see the config's fields")
    return top, text


def _config_for(cls: Any, config: Any) -> Any:
    """The config `cls` is built from. A causal LM of a composite model (Qwen3.5, Llama 4) takes the text config, as
    transformers' AutoModelForCausalLM.from_config does; one whose config class is another sub-config of the
    composite takes that one (MusicgenForCausalLM: the `decoder` of a MusicgenConfig, where from_config gives it the
    whole and dies on a missing field). The parent's quantization_config goes with it."""
    want = getattr(cls, "config_class", None)
    subs = getattr(config, "sub_configs", None) or {}
    if want is None or isinstance(config, want):
        return config
    if subs.get("text_config") is want:
        text = config.get_text_config()
    else:
        names = [k for k, v in subs.items() if v is want and isinstance(getattr(config, k, None), want)]
        if len(names) != 1:
            return config
        text = getattr(config, names[0])
    quant = getattr(config, "quantization_config", None)
    if quant is not None:
        text.quantization_config = quant
    return text


def model_class(config: Any, where: str = "config.json") -> Any:
    transformers = _import_transformers()
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES, MODEL_MAPPING_NAMES,
    )

    archs = getattr(config, "architectures", None) or ()
    for arch in archs:
        cls = getattr(transformers, arch, None) if isinstance(arch, str) and arch.isidentifier() else None
        if isinstance(cls, type) and hasattr(cls, "_from_config"):  # a model class, not any name transformers has
            return cls
    if archs and not getattr(config, "auto_map", None):  # the folder's own classes (auto_map) are noted by build
        names = ", ".join(shown(str(a), 60) for a in archs)
        close = suggest(str(archs[0]), [n for n in dir(transformers) if n.endswith(("Model", "LM", "LMHeadModel"))
                                        or "For" in n])
        raise SourceError(f"{where}: architectures names {names}, which transformers {transformers.__version__} "
                          "has no model class of", hint=(close + "; " if close else "") + "fix the class name, or "
                          "remove \"architectures\" to build the model type's default class")
    causal = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    if causal and "ForCausalLM" in causal:
        return getattr(transformers, causal)
    # A vision-language model is released as its image-text-to-text class (the base model and the LM head that its
    # checkpoint holds), as AutoModelForImageTextToText loads it.
    vlm = MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(config.model_type)
    relative = getattr(transformers, vlm, None) if isinstance(vlm, str) else None
    if relative is not None and getattr(relative, "config_class", None) is type(config):
        return relative
    # A relative's class (ShieldGemma 2 -> Gemma 3's) is kept for a type that has no class of its own
    # (PP-Chart2Table -> GOT-OCR2's), as AutoModelForImageTextToText loads it.
    base = MODEL_MAPPING_NAMES.get(config.model_type)
    if isinstance(base, (tuple, list)):
        base = base[0]
    if base and hasattr(transformers, base):
        return getattr(transformers, base)
    if causal:
        return getattr(transformers, causal)
    own = _own_model_class(type(config))
    if isinstance(own, type):
        return own
    if relative is not None:
        return relative
    example = own[0] if own else "<ModelClass>"
    hint = f"it could be one of {', '.join(own)}; " if own else ""
    raise SourceError(f"no transformers model class for model_type {config.model_type!r}",
                      hint=hint + f'name the class in a config.json ("architectures": ["{example}"]) and pass that')


_TASK_HEAD = re.compile(r"For[A-Z]")  # ...ForCausalLM, ...ForDepthEstimation; not ...QFormerModel


def _own_model_class(config_class: type) -> type | list[str]:
    """The model class of a config that transformers' Auto mappings leave out (a sub-model such as
    `clvp_encoder` or `owlvit_vision_model`): the class in the config's modeling module that declares this config
    class and is not a task head (`...For...`), or the task model when it is the only class. Where several do, the
    one named after the config (`ClvpEncoderConfig` -> `ClvpEncoder` or `ClvpEncoderModel`); else the names found,
    for the message."""
    import importlib

    from transformers import PreTrainedModel

    name = config_class.__module__.replace(".configuration_", ".modeling_")
    if name == config_class.__module__:
        return []
    try:
        module = importlib.import_module(name)
    except Exception:  # an optional dependency missing, or no such module
        return []
    declared = [v for k, v in vars(module).items()
                if inspect.isclass(v) and issubclass(v, PreTrainedModel) and v.__module__ == module.__name__
                and getattr(v, "config_class", None) is config_class and not k.endswith("PreTrainedModel")]
    found = [v for v in declared if not _TASK_HEAD.search(v.__name__)]
    if not found and len(declared) == 1:  # a model type that has only its task model (depth_anything, vitpose)
        return declared[0]
    if len(found) == 1:
        return found[0]
    base = config_class.__name__.removesuffix("Config")
    for wanted in (f"{base}Model", base):
        for cls in found:
            if cls.__name__ == wanted:
                return cls
    return sorted(cls.__name__ for cls in found or declared)


def _quantization_note(config: Any, applied: bool = False) -> str | None:
    """A config.json's quantization_config is what from_pretrained applies when it loads the weights (on a GPU; on a
    CPU it dequantizes): from_config, like archviz by default, builds the unquantized modules. Say which was built,
    so that no one reads the dtypes and stored bytes as the checkpoint's when they are not."""
    q = getattr(config, "quantization_config", None)
    if q is None:
        return None
    q = q.to_dict() if hasattr(q, "to_dict") else q
    if not isinstance(q, dict):
        return None
    shown = ", ".join(f"{k} {json.dumps(q[k])}" for k in ("quant_method", "fmt", "bits", "weight_block_size",
                                                             "group_size") if q.get(k) is not None)
    if applied:
        return (f"laid out as config.json's quantization_config says ({shown or 'given'}; {option('quantized')}): the "
                "modules transformers' quantizer puts in before from_pretrained loads the weights, whose dtypes, "
                "scales and "
                "stored bytes are shown (archviz check compares them with a checkpoint's); the meta pass runs "
                "through the unquantized modules they replace")
    return (f"config.json's quantization_config ({shown or 'given'}) is not applied: modules are built as "
            f"from_config builds them, unquantized, and the dtypes and stored bytes are theirs ({option('quantized')} "
            "lays them out as it says); archviz check pairs a checkpoint's quantized weights with their scales")


def _quantize(model: Any, config: Any, spec: str, dtype: Any) -> Callable[[], Any]:
    """Replace modules as transformers' quantizer for config.quantization_config does before from_pretrained loads
    weights (on meta: no weights, no kernels). Returns a context manager factory under which the replaced modules
    are back in place, for the meta pass (quantized modules call kernels meta cannot run; shapes are the same)."""
    import torch

    q = config.quantization_config
    method = (q.get("quant_method") if isinstance(q, dict) else getattr(q, "quant_method", None)) or "?"
    before = dict(model.named_modules())
    try:
        from transformers.quantizers import AutoHfQuantizer

        quantizer = AutoHfQuantizer.from_config(q, pre_quantized=True)
        with torch.device("meta"), _quiet():
            quantizer.preprocess_model(model=model, dtype=dtype, device_map=None, checkpoint_files=None,
                                       use_kernels=False)
    except Exception as e:  # noqa: BLE001 - a quantizer that needs a package, or refuses this model
        raise SourceError(f"{spec}: {option('quantized')}: transformers' {method!r} quantizer cannot lay out this "
                          f"model ({type(e).__name__}: {str(e)[:300]})",
                          hint=f"drop {option('quantized')} to document the unquantized modules") from None
    after = dict(model.named_modules())
    replaced = {p for p, m in after.items() if p and before.get(p) is not None and before[p] is not m}
    parts = {p: p.split(".") for p in replaced}  # keep the outermost: children of a new module are new too
    top = sorted(p for p in replaced if not any(".".join(parts[p][:i]) in replaced for i in range(1, len(parts[p]))))
    if not top:
        why = ("dequantizes on a machine without its GPU kernels, as from_pretrained would here"
               if getattr(quantizer.quantization_config, "dequantize", False) else "replaced no module of this model")
        raise SourceError(f"{spec}: {option('quantized')}: transformers' {method!r} quantizer {why}",
                          hint=f"drop {option('quantized')}: the unquantized build is what there is to show")
    swaps = [(p, before[p], after[p]) for p in top]

    @contextlib.contextmanager
    def unquantized() -> Any:
        for path, old, _ in swaps:
            model.set_submodule(path, old)
        try:
            yield
        finally:
            for path, _, new in swaps:
                model.set_submodule(path, new)

    return unquantized


def _sub_config_hint(e: BaseException, config: Any) -> str | None:
    """For code that reads a field a sub-config lacks (dbrx: `attn_config.rope_theta`, which transformers 5's
    DbrxAttentionConfig does not have): the override that gives it, the sub-config as a JSON object."""
    obj, name = getattr(e, "obj", None), getattr(e, "name", None)
    if not isinstance(e, AttributeError) or obj is None or obj is config or not isinstance(name, str):
        return None
    field = next((k for k, v in vars(config).items() if v is obj), None)
    if field is None:
        return None
    return (f"config.{field} ({type(obj).__name__}) has no field {name!r} in this config; give it with {option('set')} "
            f"'{field}={{\"{name}\": VALUE}}'")


def build(spec: str, options: BuildOptions) -> Built:
    with _quiet():
        config, name = load_config(spec, options)
    return built_from_config(spec, config, name, options)


def built_from_config(spec: str, config: Any, name: str, options: BuildOptions) -> Built:
    """The model of a transformers config object built on meta (`build` after reading SOURCE's config; a
    `PretrainedConfig` handed to `archviz.load`)."""
    import torch

    from .meta import CUDA_HINT, build_failure_hint, is_cuda_insistence, meta_build, unset_field_hint

    path = "" if spec.startswith("hf:") else os.path.join(spec, "config.json") if os.path.isdir(spec) else spec
    code = auto_map({"auto_map": getattr(config, "auto_map", None)}) if path else {}
    cls = _remote_model_class(config, path) if code and options.trust_remote_code else None
    code_notes: list[str] = []
    if cls is None:
        cls = model_class(config, path or spec)
        if code:
            code_notes.append(f"config.json names its own code (auto_map: {', '.join(sorted(set(code.values())))}); "
                              f"built with transformers' own {cls.__name__}; pass {option('trust-remote-code')} to "
                              "build the folder's classes instead")
    config = _config_for(cls, config)
    quant = _quantization_note(config, options.quantized)
    if quant:
        code_notes.append(quant)
    elif options.quantized:
        raise SourceError(f"{spec}: {option('quantized')}, but this config has no quantization_config",
                          hint=f"drop {option('quantized')}: it lays out the modules as a config.json's "
                               "quantization_config says")
    dtype = getattr(config, "dtype", None)
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype, None)
    kwargs = {"dtype": dtype} if isinstance(dtype, torch.dtype) else {}
    try:
        with meta_build(options.device) as notes, _quiet():
            model = cls._from_config(config, **kwargs)
    except Exception as e:  # noqa: BLE001
        if is_cuda_insistence(e):
            raise SourceError(f"{spec}: {cls.__name__} insists on CUDA: {e}", hint=CUDA_HINT) from None
        fields = {k: v for k, v in config.to_dict().items() if isinstance(k, str)}
        aliases = {k: v for k, v in (getattr(config, "attribute_map", None) or {}).items()
                   if isinstance(k, str) and isinstance(v, str)}
        raise SourceError(f"{spec}: building {cls.__name__} raised {type(e).__name__}: {e}",
                          hint=unset_field_hint(e, fields, aliases) or _sub_config_hint(e, config) or
                          build_failure_hint(e, fields, aliases)) from e
    model.eval()
    unquantized = _quantize(model, config, spec, kwargs.get("dtype")) if options.quantized else None
    return dataclasses.replace(model_built(model, spec, name, code_notes + list(notes.items)),
                               overrides=dict(options.overrides), unquantized=unquantized)


def model_built(model: Any, spec: str, name: str, notes: list[str]) -> Built:
    """A transformers model, built here on meta or handed in alive (`archviz.load(model)`), as a `Built`: its
    config's JSON-able fields, the folders of its code, what from_pretrained consults to name its tensors."""
    config = model.config
    transformers = _import_transformers()
    site = os.path.dirname(os.path.dirname(transformers.__file__))
    cfg = json.loads(json.dumps({k: v for k, v in config.to_dict().items() if _jsonable(v)}))
    roots: tuple[str, ...] = (os.path.dirname(transformers.__file__),)
    display: tuple[tuple[str, str], ...] = ((site, ""),)
    own = sys.modules.get(type(model).__module__)
    if own is not None and getattr(own, "__file__", None) and not own.__file__.startswith(site):
        # the folder's own code (trust_remote_code), run from transformers' modules cache: named by its file name
        roots += (os.path.dirname(own.__file__),)
        display = ((os.path.dirname(own.__file__), ""),) + display
    return Built(model=model, spec=spec, kind="hf", name=name, config=cfg, overrides={}, notes=notes, roots=roots,
                 display_roots=display, args=config, versions=_versions("transformers"), loading=loading_facts)


def loading_facts(modules: list[tuple[str, Any]]) -> dict[str, Any]:
    """What `from_pretrained` consults to put checkpoint names on this model (`modules`: (path, module) in pre-order,
    the root first, as the walk lists them), as JSON-able facts: the base-model prefix, the sub-models whose
    conversion mappings apply (path, class, model_type, custom code) and the patterns of unexpected keys it ignores.
    The mappings themselves are looked up when a checkpoint is compared (`archviz.checkpoint.hf_live`): building
    transformers' table of them costs more than a small model's walk."""
    from transformers import PreTrainedModel

    model = modules[0][1]
    subs = [[path, type(m).__name__, getattr(m.config, "model_type", None) or None, bool(m.is_custom_code())]
            for path, m in modules if isinstance(m, PreTrainedModel)]
    ignore = getattr(model, "_keys_to_ignore_on_load_unexpected", None) or ()
    return {"base_model_prefix": getattr(model, "base_model_prefix", "") or "", "submodels": subs,
            "ignore_unexpected": sorted(ignore)}


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False

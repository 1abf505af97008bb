"""The forward's inputs for the pass: defaults from the signature (token ids of [B, T]), `input name=spec`, and
the hints when an input is missing."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import re
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from ..errors import ShapeError, option
from ..sources import Built
from ..input_specs import MAX_ELEMENTS, check_input_specs, expand_input_files
from ..sources.meta import unset_field_hint
from .arguments import beside_token_ids
from .flex import block_mask_arguments, causal_block_mask
from .structured import (RecordsDefault, _LIST_OF_DICTS, _annotation_text, dataclass_argument, filled_dataclass,
                         records_default, records_value, scalar_defaults, structured_forms)


@contextlib.contextmanager
def cache_off(model: Any) -> Iterator[None]:
    """transformers models whose top forward takes `use_cache` only through **kwargs read it from their config
    (`merge_with_config_defaults`): one pass needs no KV cache, and some models cannot build one for their default
    layers (granitemoehybrid's all-Mamba default dies in `get_seq_length`), so every config the modules hold says
    `use_cache=False` for the pass, and what it said before afterwards."""
    saved: dict[int, tuple[Any, Any]] = {}
    for mod in model.modules():
        cfg = getattr(mod, "config", None)
        if cfg is not None and id(cfg) not in saved and getattr(cfg, "use_cache", None) is not None:
            saved[id(cfg)] = (cfg, cfg.use_cache)
    try:
        for cfg, _ in saved.values():
            cfg.use_cache = False
        yield
    finally:
        for cfg, value in saved.values():
            cfg.use_cache = value


_SIZE_KEYS = ("image_size", "img_size", "input_size", "latent_size", "sample_size", "resolution")
_CHANNEL_KEYS = ("num_channels", "in_chans", "in_channels", "latent_channels", "n_channels")
_FRAME_KEYS = ("num_frames", "frames", "n_frames", "video_length")
_CONSUMERS = (torch.nn.Embedding, torch.nn.EmbeddingBag, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d,
              torch.nn.Linear)


@dataclass(frozen=True)
class InputDefault:
    """The default first input of a forward that takes no token ids: its dims after B (ints, "T" for a time axis
    the pass sizes), what it is in words, and where its sizes came from."""
    dims: tuple[int | str, ...]
    what: str
    where: str


def _positive(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def first_consumer(model: Any) -> Any:
    """The module that first takes the forward's input, in the order the code made them: the first embedding,
    convolution or Linear wherever it sits in the tree (a class token, position table or scale the root or a
    container holds is no consumer), or None."""
    for m in model.modules():
        if isinstance(m, _CONSUMERS):
            return m
    return None


def _holds_a_table(model: Any, first: Any) -> bool:
    """A 2-D parameter held by a module with children (a hand-made embedding table `wte`), or a leaf module with
    parameters before `first` (a ParallelEmbedding of its own making): such a model may read token ids without an
    nn.Embedding."""
    for m in model.modules():
        if m is first:
            return False
        own = list(m.parameters(recurse=False))
        if own and (not any(True for _ in m.children()) or any(p.dim() == 2 for p in own)):
            return True
    return False


def image_default(built: Built) -> tuple[tuple[int, int, int], str] | None:
    """For a model whose forward takes images (a factory's or reference model's, a transformers model's
    pixel_values): ((C, H, W), where the sizes came from), from
    timm's `pretrained_cfg["input_size"]`, else the config's (or factory arguments') image size and channels, else
    the channels of the first Conv2d that takes the input (`first_consumer`) at 224 x 224. None for everything
    else."""
    model = built.model
    for attr in ("pretrained_cfg", "default_cfg"):
        cfg = getattr(model, attr, None)
        size = cfg.get("input_size") if isinstance(cfg, dict) else None
        if isinstance(size, (tuple, list)) and len(size) == 3 and all(isinstance(d, int) and d > 0 for d in size):
            return (size[0], size[1], size[2]), f"{type(model).__name__}.{attr}['input_size']"
    config = {**_constructor_sizes(built), **(built.config if isinstance(built.config, dict) else {})}
    first = first_consumer(model)
    if built.kind != "hf" and isinstance(first, (torch.nn.Conv1d, torch.nn.Conv3d)):
        return None  # a spectrogram, a video: not an image, whatever the config's sizes
    size_key = next((k for k in _SIZE_KEYS if k in config), None)
    if size_key is not None:
        size = config[size_key]
        hw = (size, size) if isinstance(size, int) else tuple(size)[-2:] if isinstance(size, (list, tuple)) else None
        ch_key = next((k for k in _CHANNEL_KEYS if _positive(config.get(k))), None)
        channels = config[ch_key] if ch_key else first.in_channels if isinstance(first, torch.nn.Conv2d) else 3
        if hw and len(hw) == 2 and all(_positive(d) for d in hw):
            return (channels, hw[0], hw[1]), f"the config's {size_key}" + (f" and {ch_key}" if ch_key else "")
    if isinstance(first, torch.nn.Conv2d):
        side = _side_from_positions(model, first)
        if side is not None:
            return (first.in_channels, side, side), (f"the first Conv2d's in_channels and its patches, as many as "
                                                     f"the position table {side // first.stride[0]}² holds")
        sized = _size_attribute(model, first)
        if sized is not None:
            return (first.in_channels, sized[0], sized[0]), f"the first Conv2d's in_channels at {sized[1]}"
        return (first.in_channels, 224, 224), "the first Conv2d's in_channels, at 224 x 224"
    if isinstance(first, torch.nn.Linear) and built.kind != "hf":
        return _linear_patches(model, first)
    return None


def _constructor_sizes(built: Built) -> dict[str, Any]:
    """A model file's class's image size and channels by its constructor's defaults (`img_size=16`), where no
    config names them: for a class archviz built itself (a factory may pass others)."""
    try:
        params = inspect.signature(type(built.model).__init__).parameters if built.kind == "reference" else {}
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in params.items() if k in (*_SIZE_KEYS, *_CHANNEL_KEYS)
            and (_positive(p.default) or isinstance(p.default, (tuple, list)))}


def _size_attribute(model: Any, first: Any) -> tuple[int, str] | None:
    """(side, where) of the image size a module holding the first consumer keeps as an attribute (an image
    encoder's `self.img_size = img_size`), the nearest holder first; None where none keeps one."""
    path = next((n for n, m in model.named_modules() if m is first), "")
    parts = path.split(".")
    for i in range(len(parts) - 1, -1, -1):
        holder = ".".join(parts[:i])
        module = model.get_submodule(holder)
        for key in _SIZE_KEYS:
            v = getattr(module, key, None)
            v = v[0] if isinstance(v, (tuple, list)) and len(v) == 2 and v[0] == v[1] else v
            if _positive(v):
                return v, f"{holder or type(model).__name__}.{key} = {v}"
    return None


def _linear_patches(model: Any, first: torch.nn.Linear) -> tuple[tuple[int, int, int], str] | None:
    """An image cut into patches by a reshape and embedded by a Linear of C·p² inputs (`Rearrange('b c (h p1) (w
    p2) -> b (h w) (p1 p2 c)')`, then Linear(p·p·C, D)), where a position table [n² (+ 1), D] says how many:
    (C, n·p, n·p), C the first of 3, 1, 4 that makes p whole. None where no table says so, or an embedding table
    takes token ids."""
    if any(isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) for m in model.modules()):
        return None
    for _, rows in position_tables(model, first.out_features):
        for n in (rows - 1, rows):
            side = math.isqrt(n)
            if side < 2 or side * side != n:
                continue
            for channels in (3, 1, 4):
                patch = math.isqrt(first.in_features // channels)
                if channels * patch * patch == first.in_features and patch > 1:
                    return (channels, side * patch, side * patch), (
                        f"the first Linear's {first.in_features} inputs ({channels} channels × {patch}² patch) "
                        f"and the position table's {side}² patches")
    return None


def position_tables(model: Any, width: int) -> list[tuple[str, int]]:
    """(name, rows N) of the tables [N, width] or [1, N, width] (N > 1) among the model's parameters and buffers
    that are no layer's weight: learned or fixed position tables (a class token's one row left out); a grid table
    [1, n, n, width] holds n² rows. A layer's weight is any tensor a torch.nn layer holds (a convolution's, an
    LSTM's [4·H, width] input weights, an attention's packed projection), not only a consumer's."""
    out = []
    for name, t in (*model.named_parameters(), *model.named_buffers()):
        shape = tuple(t.shape)
        rows = shape[0] if len(shape) == 2 else shape[1] if len(shape) == 3 and shape[0] == 1 else \
            shape[1] * shape[2] if len(shape) == 4 and shape[0] == 1 and shape[1] == shape[2] else 0  # [1, n, n, D]
        if rows > 1 and shape[-1] == width and not _layer_weight(model.get_submodule(name.rpartition(".")[0])):
            out.append((name, rows))
    return out


def _layer_weight(owner: Any) -> bool:
    """Whether the tensors `owner` holds are a layer's weights: a consumer's, or any layer torch.nn defines (an
    RNN, an attention, a weight-norm parametrization); a user's module, or a torch.nn container of parameters,
    may hold a position table."""
    if isinstance(owner, _CONSUMERS):
        return True
    containers = (torch.nn.ParameterList, torch.nn.ParameterDict, torch.nn.Sequential, torch.nn.ModuleList,
                  torch.nn.ModuleDict)
    return type(owner).__module__.startswith("torch.nn.") and not isinstance(owner, containers)


def _window(model: Any, first: torch.nn.Conv1d) -> tuple[int, str] | None:
    """(frames, where) of the fixed window a Conv1d front end takes (an audio encoder's 3,000 mel frames): the rows
    N of a position table [N, D] (or [1, N, D]) of the front end's output width, times the strides of its chain of
    Conv1d (each taking the last one's channels)."""
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv1d)]
    chain = [first]
    for m in convs[convs.index(first) + 1:]:
        if m.in_channels != chain[-1].out_channels:
            break
        chain.append(m)
    stride = math.prod(m.stride[0] for m in chain)
    width = chain[-1].out_channels
    where = next(n for n, m in model.named_modules() if m is first)
    tables = position_tables(model, width)  # the front end's own first: an ancestor's (an encoder's), not a decoder's
    for name, rows in [t for t in tables if f"{where}.".startswith(t[0].rpartition(".")[0] + ".") or
                       "." not in t[0]] or tables:
        return rows * stride, f"the position table {name} ({rows:,} rows) × the front end's stride {stride}"
    return None


def _side_from_positions(model: Any, conv: torch.nn.Conv2d) -> int | None:
    """The image side a patch embedding (a Conv2d whose stride is its kernel) is made for, where a learned position
    table [N, D] or [1, N, D] of its width holds N = n² patches (or n² + 1 with a class token): n × the stride."""
    stride = conv.stride[0]
    if conv.stride != conv.kernel_size or conv.stride[0] != conv.stride[1] or stride < 2:
        return None
    for _, rows in position_tables(model, conv.out_channels):
        for n in (rows, rows - 1):
            root = math.isqrt(n)
            if root > 1 and root * root == n:
                return root * stride
    return None


def consumer_default(built: Built) -> InputDefault | None:
    """The default first input of a model file's (or factory's) forward, from the module that first takes it: an
    image batch (`image_default`); a Conv1d's [B, C, T] (mel bins or features over time); a Conv3d's video
    [B, C, frames, H, W] from the config's frames and image size; a Linear's features [B, T, in_features] where
    the model has no embedding table. None: token ids."""
    image = image_default(built)
    if image is not None:
        latent = built.kind != "hf" and image[0][0] not in (1, 3)  # 4 channels of a diffusion model's latent
        return InputDefault(image[0], "a latent (or image) batch" if latent else "an image batch", image[1])
    if built.kind == "hf":
        return None
    first = first_consumer(built.model)
    config = built.config if isinstance(built.config, dict) else {}
    name = type(first).__name__
    if isinstance(first, torch.nn.Conv1d):
        window = _window(built.model, first)
        if window is not None:  # a fixed window, as the position table after the front end holds it
            return InputDefault((first.in_channels, window[0]), f"a batch of {first.in_channels}-channel windows",
                                f"{name}(in_channels={first.in_channels}) and {window[1]}")
        return InputDefault((first.in_channels, "T"), f"a batch of {first.in_channels}-channel sequences",
                            f"the first module that takes it, {name}(in_channels={first.in_channels})")
    if isinstance(first, torch.nn.Conv3d):
        size = next((config[k] for k in _SIZE_KEYS if _positive(config.get(k))), 224)
        frames = next((config[k] for k in _FRAME_KEYS if _positive(config.get(k))), 16)
        return InputDefault((first.in_channels, frames, size, size), "a video batch",
                            f"{name}(in_channels={first.in_channels}) and the config's frames and size "
                            f"(else 16 × 224 × 224)")
    if isinstance(first, torch.nn.Linear) and not _holds_a_table(built.model, first) and \
            not any(isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) for m in built.model.modules()):
        return InputDefault(("T", first.in_features), "features",
                            f"the first module that takes it, {name}(in_features={first.in_features})")
    return None


# Required arguments after the first that a conditioned model (a diffusion transformer) takes, by what they are:
# a timestep or noise level per sample (float [B]), a class label per sample (int64 [B]).
_TIMESTEP = re.compile(r"(t|ts|time|times|timesteps?|sigmas?|noise_levels?|noise_labels?)", re.I)
_LABEL = re.compile(r"(y|labels?|class_labels?|class_ids?|classes)", re.I)


def _config_sized(name: str, config: dict[str, Any] | None, B: int, T: int | None) -> tuple[Any, str] | None:
    """An optional argument `name=None` whose config gives its width as `{name}_dim` (a UNet's `context` and
    `context_dim`: its cross-attention's conditioning): [B, T, width] float32, with its note."""
    dim = (config or {}).get(f"{name}_dim")
    if not isinstance(dim, int) or isinstance(dim, bool) or dim <= 0:
        return None
    return torch.zeros((B, T or 1, dim), dtype=torch.float32, device="meta"), \
        f"{name}=[B, T, {dim}] float32 (its config's {name}_dim)"


def conditioning(model: Any, B: int, T: int | None = None, config: dict[str, Any] | None = None
                 ) -> tuple[list[Any], list[str]]:
    """The forward's required positional arguments after the first, where each is a timestep ([B] float32), a
    class label ([B] int64), what the code says it is (archviz/shapes/arguments.py: the width of the submodule
    it is handed to, position ids, a guidance strength; an optional timestep or guidance is given too) or, given `T`,
    token ids [B, T] for a tensor argument named as token ids are (`tokens`, `text_ids`, `caption`) of a model whose
    nn.Embedding is not what takes the first input (an audio encoder's Conv1d does; a decoder's token table takes
    these), and notes saying so; stops at the first that is none of these."""
    from .arguments import GUIDANCE, ForwardReading, further_default, token_ids_default

    try:
        params = list(inspect.signature(model.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return [], []
    out: list[Any] = []
    notes: list[str] = []
    reading = None
    for p in params:
        if p.kind is not p.POSITIONAL_OR_KEYWORD:
            break
        if p.default is not inspect.Parameter.empty and not (p.default is None and (GUIDANCE.fullmatch(p.name)
                                                                                    or _TIMESTEP.fullmatch(p.name))):
            sized = _config_sized(p.name, config, B, T) if p.default is None else None
            if sized is None:
                break
            out.append(sized[0])
            notes.append(sized[1])
            continue
        if _TIMESTEP.fullmatch(p.name):
            out.append(torch.zeros((B,), dtype=torch.float32, device="meta"))
            notes.append(f"{p.name}=[B] float32 (a timestep per sample)")
            continue
        made = token_ids_default(model, first_consumer(model), p, B, T) if T is not None else None
        if made is None:  # the submodule it is handed to says what it is
            reading = reading or ForwardReading(model)
            made = further_default(model, p.name, reading, B, 1 if T is None else T)
        if made is None and _LABEL.fullmatch(p.name):
            made = torch.zeros((B,), dtype=torch.long, device="meta"), f"{p.name}=[B] int64 (a class label per sample)"
        if made is None:
            break
        out.append(made[0])
        notes.append(made[1])
    return out, notes


def forward_arguments(model: Any) -> str | None:
    """The forward's arguments as `name` (required) or `name=default`, for a hint."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    shown = [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}" for p in params
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)]
    return f"{type(model).__name__}.forward({', '.join(shown)})" if shown else None


def default_inputs(built: Built, B: int, T: int) -> tuple[tuple, dict]:
    model = built.model
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params]
    ids = torch.zeros((B, T), dtype=torch.long, device="meta")
    if built.kind == "hf":
        named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if named and "input_ids" not in named:  # a vision or audio model (a bare (*args, **kwargs) proves nothing)
            first = named[0]
            image = image_default(built) if first == "pixel_values" else None
            if image is not None:  # ViT, ConvNeXt, ResNet...: an image batch [B, C, H, W] from the config
                return (), {"pixel_values": torch.zeros((B, *image[0]), dtype=torch.float32, device="meta")}
            raise ShapeError(f"{type(model).__name__}.forward takes no token ids (its first input is {first})",
                             hint=f"give its inputs with {option('input')}, e.g. {option('input')} "
                                  f"{first}={_input_example(built, first)}")
        rows = _ids_rows_per_sequence(model)
        kwargs: dict[str, Any] = {"input_ids": ids if rows == 1 else ids.new_zeros((B * rows, T))}
        if "use_cache" in names:
            kwargs["use_cache"] = False
        return (), kwargs
    if not params:
        raise ShapeError(f"{type(model).__name__}.forward takes no inputs archviz can guess",
                         hint=f"give them with {option('input')} name=B,T,512[:dtype]")
    records = records_first(built)
    if records is not None:  # forward(batched_input: list[dict]): B records of the keys the code reads
        return (records_value(records, B),), _plain_kwargs(model, names[:1], {})
    first = consumer_default(built)
    if first is not None:  # an image, spectrogram, video or feature batch instead of token ids
        x = torch.zeros((B, *(T if d == "T" else d for d in first.dims)), dtype=torch.float32, device="meta")
        args = (x, *conditioning(model, B, T, built.config)[0])
        return args, _plain_kwargs(model, names[:len(args)], {})
    args: list[Any] = [ids[0] if built.tokens_1d else ids]  # gpt-oss's forward takes tokens [T]
    held = dataclass_argument(model)
    if held is not None and held[0] == names[0]:  # forward(self, inputs: Batch): the token ids in its fields
        args = [filled_dataclass(held[1], {}, args[0])]
    elif not built.tokens_1d:  # forward(src, tgt): a decoder's token ids beside the source's
        args.extend(beside_token_ids(model, B, T)[0])
    kwargs = {name: causal_block_mask(B, T) for name in block_mask_arguments(model)}  # flex attention's masks
    if "start_pos" in names[1:]:
        kwargs["start_pos"] = 0
    kwargs.update(sequence_lengths(model, B, T, built.tokens_1d))
    return tuple(args), _plain_kwargs(model, names[:len(args)], kwargs)


def _plain_kwargs(model: Any, positional: list[str], kwargs: dict) -> dict:
    """`kwargs` with a value for each required bool/int/float/str argument of the forward left unfilled
    (`structured.scalar_defaults`)."""
    return {**kwargs, **{s.name: s.value for s in scalar_defaults(model, {*positional, *kwargs})}}


def records_first(built: Built) -> RecordsDefault | None:
    """The made-up records of a forward whose first argument is a list of dicts its code reads keys of (annotated
    so, or not at all), each holding the image the model's first consumer takes; None otherwise."""
    try:
        first = next(iter(inspect.signature(built.model.forward).parameters.values()), None)
    except (TypeError, ValueError):
        return None
    text = _annotation_text(first.annotation) if first is not None else ""
    if built.kind == "hf" or first is None or not (_LIST_OF_DICTS.search(text) or first.annotation is first.empty):
        return None
    image = image_default(built)
    return records_default(built.model, first.name, image[0] if image else None)


_IDS_SHAPE = re.compile(r"\binput_ids \(`[^`]*` of shape `\(batch_size \* (\w+), sequence_length\)`")


def _ids_rows_per_sequence(model: Any) -> int:
    """Rows of token ids a sequence takes, as the forward's docstring gives input_ids' shape: `(batch_size *
    num_codebooks, sequence_length)` (MusicgenForCausalLM: one row per codebook, from the config), else 1."""
    m = _IDS_SHAPE.search(getattr(model.forward, "__doc__", None) or "")
    n = getattr(getattr(model, "config", None), m.group(1), None) if m else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1


def sequence_lengths(model: Any, B: int, T: int, tokens_1d: bool) -> dict[str, list[int]]:
    """The forward's `List[int]` arguments (`int_list_arguments`: mistral-inference's seqlens), each the length of
    every sequence: [T] for token ids [T] (one sequence), [T] × B for [B, T]."""
    return {name: [T] if tokens_1d else [T] * B for name, _ in int_list_arguments(model)}


_INT_LIST = re.compile(r"(?:typing\.)?(?:List|list|Sequence|Tuple|tuple)\[int(?:, ?\.\.\.)?\]")


def int_list_arguments(model: Any) -> list[tuple[str, str]]:
    """(name, annotation) of the forward's required arguments after the first that its annotation says are a list
    of ints (`seqlens: List[int]`): the pass gives them the sequences' lengths, summing to the token count."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    out = []
    for p in params:
        if p.default is not inspect.Parameter.empty or p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        text = p.annotation if isinstance(p.annotation, str) else \
            getattr(p.annotation, "__name__", "") if isinstance(p.annotation, type) else str(p.annotation)
        if _INT_LIST.fullmatch(text.replace("typing.", "")):
            out.append((p.name, text.replace("typing.", "")))
    return out


def list_notes(built: Built, kwargs: dict, given: set[str]) -> list[str]:
    """A note for each list of sequence lengths the pass made up (`int_list_arguments`) and passes in `kwargs`,
    none given (`given`: the names the inputs gave)."""
    what = "[T]: one sequence of the T token ids" if built.tokens_1d else "[T] × B: B sequences of T"
    return [f"{name}={what}, made up from {type(built.model).__name__}.forward's annotation {annotation} (lengths "
            f"summing to the token count); {option('input')} {name}=list:... gives others, e.g. {name}=list:T or "
            f"{name}=list:512,512" for name, annotation in int_list_arguments(built.model) if name in kwargs and name not in given]


# Forward inputs archviz does not make up: other modalities (their sizes come from a preprocessor) and a decoder's
# own token ids, each with an example input.
_MODALITY_INPUTS = {"pixel_values": "B,3,224,224:float32", "pixel_values_videos": "B,2,3,224,224:float32",
                    "input_features": "B,80,3000:float32", "input_values": "B,16000:float32", "bbox": "B,T,4",
                    "decoder_input_ids": "B,T"}


def missing_input_hint(built: Built, given: dict, error: BaseException | None = None) -> str | None:
    """For a failed pass: the model's forward takes an image or audio input, or decoder token ids, that were not
    given (CLIP, BLIP, LongT5): name them, with an example (sized from the config's image size where it has one).
    Else the forward's inputs the error names that were not given (LXMERT: "`visual_feats` cannot be `None`")."""
    import re

    try:
        params = inspect.signature(built.model.forward).parameters
    except (TypeError, ValueError):
        return None
    missing = [n for n in _MODALITY_INPUTS if n in params and n not in given]
    if not missing:
        text = str(error) if error is not None else ""
        asks = re.search(r"none|missing|required|specify|provide|must (?:be )?pass", text, re.I)
        named = set(re.findall(r"\w+", text)) if asks else set()
        asked = [n for n in params if n in named and n not in given and n not in ("self", "args", "kwargs")]
        if not asked:
            return None
        return (f"{type(built.model).__name__}.forward's {', '.join(asked)} {'was' if len(asked) == 1 else 'were'} "
                f"not given: give {'it' if len(asked) == 1 else 'them'} with {option('input')} name=dims[:dtype] "
                f"(dims are ints, B or T; e.g. {option('input')} {asked[0]}=B,T,64:float32); {option('debug')} shows "
                "the traceback")
    first = missing[0]
    return (f"{type(built.model).__name__}.forward also takes {', '.join(missing)}, which archviz does not make up: "
            f"give {'it' if len(missing) == 1 else 'them'} with {option('input')}, e.g. {option('input')} {first}="
            f"{_input_example(built, first)}; {option('debug')} shows the traceback")


def none_hint(error: BaseException, built: Built) -> str | None:
    """For a pass that died on a None: the config field left unset that it comes from (see `unset_field_hint`),
    else both likely causes."""
    config = built.config if isinstance(built.config, dict) else {}
    if not isinstance(error, (TypeError, AttributeError)) or "NoneType" not in str(error):
        return None
    return unset_field_hint(error, config) or (
        f"a value the forward reads is None: a forward input not given ({option('input')} name=B,T,...) or a config "
        f"field left unset ({option('set')} FIELD=VALUE); {option('debug')} shows the traceback")


def _input_example(built: Built, name: str) -> str:
    """An input value for a forward input archviz does not make up; pixel_values sized from the config's image
    size and channels where it has them."""
    if name == "pixel_values":
        vision = built.config.get("vision_config") if isinstance(built.config.get("vision_config"), dict) else {}
        size = vision.get("image_size") or built.config.get("image_size")
        channels = vision.get("num_channels") or built.config.get("num_channels") or 3
        if isinstance(size, int) and isinstance(channels, int):
            return f"B,{channels},{size},{size}:float32"
    return _MODALITY_INPUTS.get(name, "B,3,224,224:float32")


def parse_inputs(specs: list[str], B: int, T: int, sizes: dict[str, int] | None = None) -> tuple[tuple, dict]:
    """`input name=B,T,512:float32` (repeatable): forward keyword arguments as meta tensors; dims are ints, the
    symbols B and T, or a dim the user names with its size (`x=B,3,H=224,W=224`: H and W, sized 224 unless `sizes`
    says otherwise); the dtype defaults to int64 for [B, T] and float32 otherwise. `name=int:5` passes a number,
    `name=none` passes None, `name=list:T,T` a list of ints. A spec that is wrong is a ShapeError (`check_input_specs`)."""
    pass_sizes = (B, T, sizes or {})
    return (), {name: _value(name, kind, payload, pass_sizes) for name, kind, payload in check_input_specs(specs)}


def _value(name: str, kind: str, payload: Any, pass_sizes: tuple[int, int, dict[str, int]]) -> Any:
    """One read input spec made for the pass: a meta tensor, a number, None, a list of ints, or a list of dicts
    (or one dict) of such values."""
    B, T, sizes = pass_sizes
    if kind == "list":  # per-sequence lengths (seqlens=list:T,T): B and T at this pass's sizes
        return [B if x == "B" else T if x == "T" else x for x in payload]
    if kind == "records":  # batched_input=[{image: 3,1024,1024}]; inputs={tokens: B,T}
        one = lambda r: {k: _value(f"{name}[{k!r}]", kd, pl, pass_sizes) for k, (kd, pl) in r.items()}  # noqa: E731
        return [one(r) for r in payload] if isinstance(payload, tuple) else one(payload)
    if kind != "tensor":
        return payload
    dims_spec, dtype = payload
    dims = [B if d == "B" else T if d == "T" else sizes.get(d[0], d[1]) if isinstance(d, tuple) else d
            for d in dims_spec]
    for d, size in zip(dims_spec, dims):
        if size is None:  # a dim named without a size (x=B,3,H,W) that no default input sizes: see default_sizes
            raise ShapeError(f"{option('input')} {name}=...: dim {d[0]!r} has no size to take",
                             hint=f"name it with its size, e.g. {d[0]}=224")
    if math.prod(dims) > MAX_ELEMENTS:  # torch would overflow computing its storage size
        raise ShapeError(f"{option('input')} {name}=...: {' × '.join(map(str, dims))} elements at B={B}, T={T} are "
                         f"more than any input holds (at most {MAX_ELEMENTS:,})",
                         hint="give fewer or smaller dims, e.g. B,T,512")
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):  # a name this torch has not
        raise ShapeError(f"{option('input')} {name}=...:{dtype}: torch {torch.__version__} has no dtype {dtype!r}",
                         hint="e.g. float32, bfloat16, int64")
    return torch.zeros(dims, dtype=torch_dtype, device="meta")


_NAMED = re.compile(r"(?!(?:B|T)=)[A-Za-z_]\w*=\d+")
_BARE = re.compile(r"(?!(?:B|T)$)[A-Za-z_]\w*")  # a dim named without its size: H in x=B,3,H,W


def _bare_dims(spec: str) -> list[tuple[int, str]]:
    """(position, name) of the dims `spec` names without a size; none in `name=int:5` or `name=none`."""
    rest = spec.partition("=")[2]
    dims_text = rest.partition(":")[0]
    if dims_text in ("int", "float", "bool", "list") or rest.strip().lower() == "none":
        return []
    return [(i, d) for i, d in enumerate(d.strip() for d in dims_text.split(",")) if _BARE.fullmatch(d)]


def default_sizes(built: Built, specs: list[str] | None, B: int, T: int) -> dict[str, int]:
    """{name: size} for the dims an input spec names without a size (`x=B,3,H,W`): each takes the size of the same dim
    of the default input it stands in for -- the same argument, of as many dims (a vision model's image batch
    [B, C, H, W] from its config) -- so `H=224` need not be written. One line with the fix where none has one."""
    wanted = [(spec, i, d) for spec in expand_input_files(specs) for i, d in _bare_dims(spec)]
    if not wanted:
        return {}
    try:
        base = default_inputs(built, B, T)
    except ShapeError:
        base = ((), {})
    try:
        params = [p.name for p in inspect.signature(built.model.forward).parameters.values()]
    except (TypeError, ValueError):
        params = []
    shapes = {name: tuple(v.shape) for name, v in (*zip(params, base[0]), *base[1].items())
              if isinstance(v, torch.Tensor)}
    image = _config_image(built)
    out: dict[str, int] = {}
    for spec, i, d in wanted:
        name, _, rest = spec.partition("=")
        dims = [x.strip() for x in rest.partition(":")[0].split(",")]
        shape = shapes.get(name)
        if shape is None or len(shape) != len(dims):
            # another name for the one default of that rank (the image a factory's forward takes as `x`), else the
            # image batch the config's (or its vision config's) image size and channels make
            others = [n for n, s in shapes.items() if len(s) == len(dims)]
            shape = shapes[others[0]] if len(others) == 1 and name not in shapes else \
                (B, *image) if image is not None and len(dims) == 4 else None
        if shape is None:
            fixed = ",".join(f"{x}={224 if x in ('H', 'W') else 64}" if x == d else x for x in dims)
            raise ShapeError(f"{option('input')} {spec!r}: dim {d!r} is not an int, B or T, and has no size to take "
                             f"(no default input {name} of {len(dims)} dims, nor an image size in the config)",
                             hint=f"name it with its size, e.g. {option('input')} {name}={fixed}")
        out.setdefault(d, int(shape[i]))
    return out


def _config_image(built: Built) -> tuple[int, int, int] | None:
    """(C, H, W) of the image batch the model's config describes, its vision config's where it has one (CLIP)."""
    hit = image_default(built)
    if hit is not None:
        return hit[0]
    vision = built.config.get("vision_config") if isinstance(built.config, dict) else None
    size = vision.get("image_size") if isinstance(vision, dict) else None
    channels = vision.get("num_channels", 3) if isinstance(vision, dict) else 3
    if isinstance(size, int) and isinstance(channels, int) and size > 0:
        return channels, size, size
    return None


def spec_symbols(specs: list[str] | None) -> set[str]:
    """The symbols (B, T, and dims the user named) that input specs size their tensors by."""
    used: set[str] = set()
    for spec in expand_input_files(specs):
        if spec.partition("=")[2].strip()[:1] in ("[", "{"):  # a list of dicts, or a dict: B and T in their dims
            for _, _, payload in check_input_specs([spec]):
                for record in payload if isinstance(payload, tuple) else (payload,):
                    used.update(d for kind, pl in record.values() if kind == "tensor" for d in pl[0]
                                if d in ("B", "T"))
            continue
        dims_text, _, items = spec.partition("=")[2].partition(":")
        if dims_text.strip() == "list":  # seqlens=list:T,T
            used.update(x.strip() for x in items.split(",") if x.strip() in ("B", "T"))
            continue
        for d in (d.strip() for d in dims_text.split(",")):
            if d in ("B", "T"):
                used.add(d)
            elif _NAMED.fullmatch(d):
                used.add(d.split("=")[0])
        used.update(d for _, d in _bare_dims(spec))
    return used


def named_sizes(specs: list[str] | None, sizes: dict[str, int] | None = None) -> dict[str, int]:
    """{name: size} of the dims the user named in input specs (`H=224`, or `H` sized by `sizes`), in the order
    the specs name them."""
    out: dict[str, int] = {}
    for spec in expand_input_files(specs):
        dims_text = spec.partition("=")[2].partition(":")[0]
        for d in (d.strip() for d in dims_text.split(",")):
            if _NAMED.fullmatch(d):
                name, size = d.split("=")
                out.setdefault(name, int(size))
            elif sizes and d in sizes and _BARE.fullmatch(d):
                out.setdefault(d, sizes[d])
    return out


def merge_inputs(model: Any, base: tuple[tuple, dict], given: dict[str, Any]) -> tuple[tuple, dict]:
    """The default inputs with the given ones added, a given name replacing the default of that name -- also the
    default token ids passed positionally to the forward's first parameter (`input pixels=B,T,24` stands in for
    them, `input decoder_input_ids=B,T` comes beside them)."""
    args, kwargs = base
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    held = dataclass_argument(model)
    if held is not None and isinstance(given.get(held[0]), dict):  # inputs={tokens: B,T}: the dataclass of them
        default = next((a for p, a in zip(params, args) if p.name == held[0]), None)
        ids = next((getattr(default, f.name) for f in dataclasses.fields(default)
                    if isinstance(getattr(default, f.name), torch.Tensor)), None) if default is not None else None
        given = {**given, held[0]: filled_dataclass(held[1], given[held[0]], ids)}
    bound = {p.name: a for p, a in zip(params, args) if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD}
    if len(bound) == len(args) and any(name in bound for name in given):
        return (), {**bound, **kwargs, **given}
    if args and params and params[0].kind is inspect.Parameter.VAR_POSITIONAL and _stands_in(args[0], given):
        return (), {**kwargs, **given}  # forward(*args, **kwargs): the given input in place of the default's
    return tuple(args), {**kwargs, **given}


def input_tensors(values: Any) -> list[Any]:
    """The tensors in a forward's input values: tensors themselves, the fields of a dataclass of inputs, the items
    of lists and dicts of them (a list of dicts of images)."""
    out: list[Any] = []
    stack = list(values)
    while stack:
        v = stack.pop(0)
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            stack.extend(getattr(v, f.name) for f in dataclasses.fields(v))
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return out


def _stands_in(default: Any, given: dict[str, Any]) -> bool:
    """A given input takes the place of the default first input of a `forward(*args, **kwargs)`: a tensor of as
    many dims and the same kind (token ids, floats)."""
    return isinstance(default, torch.Tensor) and any(
        isinstance(v, torch.Tensor) and v.dim() == default.dim() and
        v.dtype.is_floating_point == default.dtype.is_floating_point for v in given.values())

"""torch.ao.quantization's eager conversion answered while a model is built on meta.

A quantizable model's factory (`quantize=True`) sets a qconfig, `prepare`s the float model (observers), runs a
calibration forward and `convert`s it (int8 weights packed with their scales); `quantize_dynamic` converts with no
calibration. On meta the observers cannot read their values (`Tensor.item()`) and packed int8 weights cannot be made.
Inside `conversion_answered(answer)`, `prepare` only propagates the qconfig (no observers: nothing to calibrate on
meta), and `convert` (which `quantize_dynamic` calls) swaps each module the real one would for a module of the
converted class that keeps its weight as an int8 meta tensor, its bias, and the shape of its weight's scales and
zero points (per tensor or per output channel, from the qconfig's weight observer), and runs the float module in the
meta pass. The walker counts them as it counts a real converted module (walk/converted.py): one parameter per weight
value, the scales apart. `answer(what, how)` notes each call.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable, Iterator

import torch

NOTE = "converted by torch.ao.quantization: counted as int8 weights, scales apart"
#: The modules whose prepare and convert a meta build answers (torch.quantization is the old name of the same).
_MODULES = ("torch.ao.quantization", "torch.ao.quantization.quantize", "torch.quantization",
            "torch.quantization.quantize")


class _ConvertedOnMeta(torch.nn.Module):
    """A converted weighted module on meta (mixed in before the converted class, whose name and kind it takes): its
    weights as int8 meta tensors (one `weight`, or a dynamic RNN's per gate set and layer), its biases, the shapes of
    its weights' scales and zero points."""

    def __init__(self, float_module: torch.nn.Module, weights: dict[str, torch.Tensor], biases: dict[str, Any],
                 qconfig: Any, output_qparams: bool) -> None:
        torch.nn.Module.__init__(self)
        object.__setattr__(self, "float_module", float_module)  # runs the meta pass; not a submodule: not counted
        observer = qconfig.weight()
        dtype = getattr(observer, "dtype", torch.qint8)
        quantized = dtype in (torch.qint8, torch.quint8, torch.qint32)
        self.weight_dtype = str(dtype).replace("torch.", "")
        self.weights = {n: torch.empty(w.shape, dtype=torch.int8 if quantized else dtype, device="meta")
                        for n, w in weights.items()}
        self.biases = {n: torch.empty(b.shape, dtype=b.dtype, device="meta") for n, b in biases.items()}
        scheme = str(getattr(observer, "qscheme", ""))
        per_channel, axis = "per_channel" in scheme, getattr(observer, "ch_axis", 0)
        kinds = ("float32", "float32") if scheme.endswith("float_qparams") else ("float64", "int64")
        self.qparams = {n: ((f"{n}_scale", shape, kinds[0]), (f"{n}_zero_point", shape, kinds[1])) if quantized else ()
                        for n, w in weights.items() for shape in [(w.shape[axis],) if per_channel else ()]}
        self.output_qparams = output_qparams
        self.scale, self.zero_point = 1.0, 0

    def _weight_bias(self) -> Any:
        if list(self.weights) == ["weight"]:
            return self.weights["weight"], self.biases.get("bias")
        return {"weight": self.weights, "bias": self.biases}  # as a dynamic RNN answers

    def _weight_qparams(self, name: str) -> tuple:
        return self.qparams[name]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.float_module(*args, **kwargs)

    def extra_repr(self) -> str:
        return f"{', '.join(self.weights)}: {self.weight_dtype}, built on meta"


class _RunsFloat(torch.nn.Module):
    """Mixed in before a converted class with no packed weight (a Quantize, an activation) made on meta by its own
    `from_float`: the meta pass runs the float module it was made from."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.float_module(*args, **kwargs)


class _QParamsAnswered(torch.nn.Module):
    """A module's activation observer where none ran: scale 1, zero point 0, of the qconfig's activation dtype."""

    def __init__(self, qconfig: Any) -> None:
        super().__init__()
        observer = qconfig.activation()
        self.dtype = getattr(observer, "dtype", torch.quint8)
        self.qscheme = getattr(observer, "qscheme", torch.per_tensor_affine)

    def calculate_qparams(self) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor([1.0], device="cpu"), torch.tensor([0], device="cpu")

    def forward(self, x: Any) -> Any:
        return x


_CLASSES: dict[type, type] = {}


def _on_meta(target: type, base: type) -> type:
    """`base` mixed in before the converted class `target`: its name, module and kind, meta's answers."""
    made = _CLASSES.get(target)
    if made is None:
        made = _CLASSES[target] = type(target.__name__, (base, target), {"__module__": target.__module__})
    return made


def _weights_and_biases(module: torch.nn.Module) -> tuple[dict[str, Any], dict[str, Any]]:
    """A float (or fused) module's weights and biases by the names its converted module gives them: its `weight`
    and `bias`, or its first weighted part's (Conv + ReLU fused), where a batch norm fused in (Conv + BN, folded at
    conversion) gives a bias of one value per output channel; an RNN's per gate set and layer."""
    parts = list(module.modules())
    for m in parts:
        w = m._parameters.get("weight")
        if isinstance(w, torch.Tensor):
            bias = m._parameters.get("bias")
            if bias is None and any(isinstance(p, torch.nn.modules.batchnorm._BatchNorm) for p in parts):
                bias = torch.empty(w.shape[0], dtype=w.dtype, device="meta")
            return {"weight": w}, ({} if bias is None else {"bias": bias})
    own = [(n, p) for n, p in module._parameters.items() if p is not None]
    return ({n: p for n, p in own if n.startswith("weight")}, {n: p for n, p in own if n.startswith("bias")})


def _swapped(module: torch.nn.Module, mapping: dict, qat: dict, kept: set[str]) -> torch.nn.Module | None:
    """What the real convert would put in `module`'s place, made on meta; None where it would keep it, or where its
    converted class cannot be made on meta (its class name added to `kept`). A fused Conv + BN that `prepare_qat`
    would have swapped for its QAT module (not run on meta) converts as that would."""
    target = mapping.get(type(module)) or mapping.get(qat.get(type(module)))
    qconfig = getattr(module, "qconfig", None)
    if target is None or qconfig is None:
        return None
    weights, biases = _weights_and_biases(module)
    packs = callable(getattr(target, "_weight_bias", None))  # Linear, Conv: their output is quantized too
    if weights and (packs or callable(getattr(target, "weight", None))):  # an Embedding: its weight only
        return _on_meta(target, _ConvertedOnMeta)(module, weights, biases, qconfig, packs)
    saved = getattr(module, "activation_post_process", None)
    module.activation_post_process = _QParamsAnswered(qconfig)
    try:
        made = target.from_float(module)
    except Exception:  # noqa: BLE001 - a converted class that cannot be made on meta: the float module stays
        kept.add(type(module).__name__)
        return None
    finally:
        del module.activation_post_process
        if saved is not None:
            module.activation_post_process = saved
    if made is module:
        return None
    made.__class__ = _on_meta(type(made), _RunsFloat)
    object.__setattr__(made, "float_module", module)  # not a submodule: not counted
    return made


def _convert_children(module: torch.nn.Module, mapping: dict, qat: dict, kept: set[str]) -> None:
    for name, child in list(module.named_children()):
        new = _swapped(child, mapping, qat, kept)
        if new is None:
            _convert_children(child, mapping, qat, kept)
        else:
            module._modules[name] = new


@contextlib.contextmanager
def conversion_answered(answer: Callable[[str, str], None]) -> Iterator[None]:
    """`prepare` and `convert` of torch.ao.quantization answered on meta inside (see the module doc)."""
    import importlib

    from torch.ao.quantization import propagate_qconfig_
    from torch.ao.quantization.quantization_mappings import (
        get_default_qat_module_mappings,
        get_default_static_quant_module_mappings,
    )

    def prepare(model: torch.nn.Module, inplace: bool = False, *args: Any, **kwargs: Any) -> torch.nn.Module:
        model = model if inplace else copy.deepcopy(model)
        propagate_qconfig_(model, qconfig_dict=None)
        answer("torch.ao.quantization.prepare", "answered without observers: nothing to calibrate on meta")
        return model

    def prepare_qat(model: torch.nn.Module, mapping: dict | None = None, inplace: bool = False) -> torch.nn.Module:
        return prepare(model, inplace)  # no QAT modules either: `convert` maps the fused float ones as it would them

    def convert(model: torch.nn.Module, mapping: dict | None = None, inplace: bool = False, *args: Any,
                **kwargs: Any) -> torch.nn.Module:
        model = model if inplace else copy.deepcopy(model)
        kept: set[str] = set()
        _convert_children(model, get_default_static_quant_module_mappings() if mapping is None else mapping,
                          get_default_qat_module_mappings(), kept)
        answer("torch.ao.quantization.convert", NOTE)
        if kept:
            answer("torch.ao.quantization.convert", f"left {', '.join(sorted(kept))} unconverted on meta (its "
                   "converted class cannot be made there): counted as the float module")
        return model

    saved = []
    for name in _MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for attr, fn in (("prepare", prepare), ("prepare_qat", prepare_qat), ("convert", convert)):
            if hasattr(mod, attr):
                saved.append((mod, attr, getattr(mod, attr)))
                setattr(mod, attr, fn)
    try:
        yield
    finally:
        for mod, attr, fn in reversed(saved):
            setattr(mod, attr, fn)

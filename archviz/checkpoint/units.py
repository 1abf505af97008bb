"""Both sides of a comparison as units: each checkpoint tensor with the scales that travel with it, and the
model's tensors by name (weights, scales, buffers, aliases)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from archviz.records import ALIAS, BUFFER, SCALE, ModelRecord, TensorRecord

from .records import CheckpointInventory, TensorInfo
from .rules import Fuse, Rules

#: safetensors dtype code → torch dtype name (as records spell them).
CK_TO_TORCH = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "I32": "int32", "U32": "uint32",
    "I64": "int64", "U64": "uint64", "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64",
    "C64": "complex64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz", "F4": "float4_e2m1fn",
    "F6_E2M3": "float6_e2m3fn", "F6_E3M2": "float6_e3m2fn",
}


FP8_CK = {"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}


INT_CK = {"BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64"}


FLOAT_TORCH = {"float16", "bfloat16", "float32", "float64"}


QUANT_TORCH = {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn_x2"}


NON_PARAM_LABELS = {"buffer", "table", "tied copy"}


@dataclass
class Unit:
    """One checkpoint tensor with the quantization scales that belong to it."""

    info: TensorInfo
    scales: list[TensorInfo] = field(default_factory=list)
    packed: bool = False  # fp4 values packed two per byte in I8/U8
    mapped: str = ""  # name after the renames
    target: str | None = None  # the model tensor it lands on
    fuse: Fuse | None = None
    split: tuple[str, ...] = ()  # the other model tensors a splitting conversion fills from this one
    assigned: bool = False
    scales_ok: bool | None = None  # its scales fit its shape (check_scales), once a verdict has worked it out

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def logical_shape(self) -> tuple[int, ...]:
        s = self.info.shape
        return s[:-1] + (s[-1] * 2,) if self.packed and s else s

    @property
    def elements(self) -> int:
        return math.prod(self.info.shape) * (2 if self.packed else 1)

    @property
    def names(self) -> list[str]:
        return [self.info.name] + [s.name for s in self.scales]


def checkpoint_units(inv: CheckpointInventory, rules: Rules) -> list[Unit]:
    tensors = inv.tensors
    scale_of: dict[str, str] = {}
    suffixes = tuple(sfx for sfx, _ in rules.scale_suffixes)
    scale_dtypes, quantized = rules.scale_dtypes, rules.quantized_dtypes
    for name, t in tensors.items():
        if not name.endswith(suffixes) or t.dtype not in scale_dtypes:
            continue
        for suffix, wsuffix in rules.scale_suffixes:
            if name.endswith(suffix):
                w = name[: -len(suffix)] + wsuffix
                wt = tensors.get(w)
                if wt is not None and w != name and wt.dtype in quantized:
                    scale_of[name] = w
                    break
    units: dict[str, Unit] = {}
    for name, t in tensors.items():
        if name not in scale_of:
            units[name] = Unit(t)
    for s, w in scale_of.items():
        units[w].scales.append(tensors[s])
    fp4 = rules.fp4_block
    for u in units.values():
        if u.info.dtype in ("I8", "U8") and u.scales and u.info.shape:
            shp = u.info.shape
            for s in u.scales:
                if (s.shape[:-1] == shp[:-1] and s.shape and s.shape[-1] * fp4 == 2 * shp[-1]
                        and s.dtype == "F8_E8M0"):
                    u.packed = True
    return list(units.values())


@dataclass
class ModelTensor:
    name: str
    module: str
    rec: TensorRecord
    scales: list[tuple[str, TensorRecord]] = field(default_factory=list)


def model_index(record: ModelRecord) -> tuple[dict[str, ModelTensor], dict[str, str], dict[str, ModelTensor]]:
    """(targets: name → tensor (weights, biases, tables, persistent buffers, orphan scales),
    aliases: alias name → counted name, others: non-persistent buffers and paired scales by name).

    What goes where depends on a module's own tensors only: worked out once per tensors tuple (a records file gives
    one tuple to every module that has the same tensors), then applied to each module's path."""
    targets: dict[str, ModelTensor] = {}
    aliases: dict[str, str] = {}
    others: dict[str, ModelTensor] = {}
    plans: dict[int, tuple[tuple[int, TensorRecord], ...]] = {}
    keep = []  # the tuples whose ids are plans' keys
    for path, ts in zip(record.column("path"), record.column("tensors")):  # (a records file's modules not made)
        if not ts:
            continue
        plan = plans.get(id(ts))
        if plan is None:
            plan = plans[id(ts)] = _plan(ts)
            keep.append(ts)
        prefix = f"{path}." if path else ""
        for op, t in plan:
            full = prefix + t.name
            if op == _TARGET:
                targets[full] = ModelTensor(full, path, t)
            elif op == _OTHER:
                others[full] = ModelTensor(full, path, t)
            elif op == _ALIAS:
                aliases[full] = t.alias_of  # type: ignore[assignment]
            else:  # a scale beside its weight
                owner = targets.get(prefix + t.scales)  # type: ignore[operator]
                if owner is not None:
                    owner.scales.append((full, t))
                    others[full] = ModelTensor(full, path, t)
                else:
                    targets[full] = ModelTensor(full, path, t)
    return targets, aliases, others


_TARGET, _OTHER, _ALIAS, _SCALE = range(4)


def _plan(tensors: tuple[TensorRecord, ...]) -> tuple[tuple[int, TensorRecord], ...]:
    """Where each of a module's tensors goes, in the order ``model_index`` files them: the module's tensors, then
    its scales that sit beside a weight."""
    local = {t.name: t for t in tensors}
    out: list[tuple[int, TensorRecord]] = []
    paired = []
    for t in tensors:
        if t.kind == ALIAS:
            if t.alias_of:
                out.append((_ALIAS, t))
            continue
        if t.kind == BUFFER and not t.persistent:
            out.append((_OTHER, t))
            continue
        if t.kind == SCALE and t.scales and t.scales in local and local[t.scales].kind != SCALE:
            paired.append((_SCALE, t))
            continue
        out.append((_TARGET, t))
    return tuple(out + paired)

"""Both sides of a comparison as units: each checkpoint tensor with the scales that travel with it, and the
model's tensors by name (weights, scales, buffers, aliases)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from archviz.records import ALIAS, BUFFER, SCALE, ModelRecord, TensorRecord

from .records import CheckpointInventory, TensorInfo
from .rules import Fuse, Rules
from .templates import HOLE, split_name

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


@dataclass(slots=True)
class Unit:
    """One checkpoint tensor with the quantization scales that belong to it."""

    info: TensorInfo
    scales: tuple[TensorInfo, ...] = ()
    packed: bool = False  # fp4 values packed two per byte in I8/U8
    mapped: str = ""  # name after the renames
    target: str | None = None  # the model tensor it lands on
    fuse: Fuse | None = None
    split: tuple[str, ...] = ()  # the other model tensors a splitting conversion fills from this one
    assigned: bool = False
    scales_ok: bool | None = None  # its scales fit its shape (check_scales), once a verdict has worked it out
    template: str = ""  # its name's split_name (set when it is mapped), for the compact tensor list
    nums: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def stored_bytes(self) -> int | None:
        """Bytes the tensor and its scales occupy on disk (a GGML type's whole blocks, ggml_types.py); None where a
        dtype's size is not known."""
        try:
            return self.info.nbytes + sum(s.nbytes for s in self.scales)
        except KeyError:
            return None

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
    units = {name: Unit(t) for name, t in tensors.items() if name not in scale_of}
    owners = []
    for s, w in scale_of.items():
        u = units[w]
        if not u.scales:
            owners.append(u)
        u.scales += (tensors[s],)
    fp4 = rules.fp4_block
    for u in owners:  # (fp4 packing needs a scale)
        if u.info.dtype in ("I8", "U8") and u.info.shape:
            shp = u.info.shape
            for s in u.scales:
                if (s.shape[:-1] == shp[:-1] and s.shape and s.shape[-1] * fp4 == 2 * shp[-1]
                        and s.dtype == "F8_E8M0"):
                    u.packed = True
    return list(units.values())


@dataclass(slots=True)
class ModelTensor:
    name: str
    module: str
    rec: TensorRecord
    scales: tuple[tuple[str, TensorRecord], ...] = ()
    template: str = ""  # split_name(name) (built from its module's path's)
    nums: tuple[str, ...] = ()
    row: int = -1  # its module's place in the record
    kind_key: tuple[int, int] | None = None  # (its module's tensors, its place among them): alike for alike modules


def model_index(record: ModelRecord, filed: list[int] | None = None
                ) -> tuple[dict[str, ModelTensor], dict[str, str], dict[str, ModelTensor]]:
    """(targets: name → tensor (weights, biases, tables, persistent buffers, orphan scales),
    aliases: alias name → counted name, others: non-persistent buffers and paired scales by name).

    What goes where depends on a module's own tensors only: worked out once per tensors tuple (a records file gives
    one tuple to every module that has the same tensors), then applied to each module's path. ``filed``, when
    given, gets the number of names filed (more than the three dicts hold when two modules' tensors share a name)."""
    targets: dict[str, ModelTensor] = {}
    aliases: dict[str, str] = {}
    others: dict[str, ModelTensor] = {}
    plans: dict[int, tuple[tuple[int, TensorRecord, str, tuple[str, ...], tuple[int, int]], ...]] = {}
    keep = []  # the tuples whose ids are plans' keys
    n_filed = 0
    splits = _path_splits(record)
    for row, (path, ts) in enumerate(zip(record.column("path"), record.column("tensors"))):
        if not ts:  # (a records file's modules are not made)
            continue
        plan = plans.get(id(ts))
        if plan is None:
            plan = plans[id(ts)] = _plan(ts)
            keep.append(ts)
        n_filed += len(plan)
        prefix = f"{path}." if path else ""
        p_template, p_nums = splits[row] if splits is not None else split_name(path)
        p_template = f"{p_template}." if path else ""
        for op, t, local, local_nums, key in plan:
            full = prefix + t.name
            if op == _TARGET:
                targets[full] = ModelTensor(full, path, t, (), p_template + local, p_nums + local_nums, row, key)
            elif op == _OTHER:
                others[full] = ModelTensor(full, path, t, (), p_template + local, p_nums + local_nums, row)
            elif op == _ALIAS:
                aliases[full] = t.alias_of  # type: ignore[assignment]
            else:  # a scale beside its weight
                owner = targets.get(prefix + t.scales)  # type: ignore[operator]
                if owner is not None:
                    owner.scales += ((full, t),)
                    others[full] = ModelTensor(full, path, t, (), p_template + local, p_nums + local_nums, row)
                else:
                    targets[full] = ModelTensor(full, path, t, (), p_template + local, p_nums + local_nums, row, key)
    if filed is not None:
        filed.append(n_filed)
    return targets, aliases, others


def _path_splits(record: ModelRecord) -> list[tuple[str, tuple[str, ...]]] | None:
    """Each module's path's ``split_name``, built from its parent's (a compact records file keeps the tree as
    parents and names); None for other records."""
    tree = getattr(record.modules, "tree", None)
    if tree is None:
        return None
    parents, names = tree()
    out: list[tuple[str, tuple[str, ...]]] = []
    for parent, name in zip(parents, names):
        hole = name.isdigit() and name.isascii()
        if parent < 0:
            out.append((name, ()) if not hole else (HOLE, (name,)))
            continue
        t, nums = out[parent]
        if not t and not nums:  # a child of the root ("" splits to "")
            out.append((HOLE, (name,)) if hole else (name, ()))
        elif hole:
            out.append((f"{t}.{HOLE}", nums + (name,)))
        else:
            out.append((f"{t}.{name}", nums))
    return out


_TARGET, _OTHER, _ALIAS, _SCALE = range(4)


def _plan(tensors: tuple[TensorRecord, ...]) -> tuple[tuple[int, TensorRecord, str, tuple[str, ...], tuple[int, int]], ...]:
    """Where each of a module's tensors goes, in the order ``model_index`` files them: the module's tensors, then
    its scales that sit beside a weight; each with its name's split_name and its kind key."""
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
    key = id(tensors)
    return tuple((op, t, *split_name(t.name), (key, j)) for j, (op, t) in enumerate(out + paired))

"""Compare a model's records with a checkpoint's headers: tensor by tensor, module by module.

    >>> rec = archviz.load("config.json")                                  # doctest: +SKIP
    >>> rec = compare(rec, open_checkpoint("model.safetensors"))           # doctest: +SKIP
    >>> rec.extra("checkpoint")["verdict"]                                 # doctest: +SKIP
    'match'

How a checkpoint tensor finds its model tensor (see ``rules.py``): the renames of the best-scoring ruleset, then the
prefix step; failing that a fuse rule (per-expert tensors → one stacked tensor, compared by sums). For a transformers
model one candidate ruleset is transformers' own (``hf_live.py``): its conversions join tensors (compared by sums) or
split one into several model tensors (compared with their sum). Quantization scales
pair with their weight by name (``X.weight_scale_inv`` / ``X.scale`` → ``X.weight``) and travel with it; each is
checked against the weight's shape and the block size. fp4 values packed two per byte in ``I8`` count twice.
A dtype difference (bf16 on disk, fp32 in the model; fp8 on disk dequantized at load) is a note, never a mismatch.

Verdicts per tensor: ``match`` · ``mismatch`` (counts or shapes differ; both numbers kept) · ``missing`` (the model
has it, the checkpoint does not) · ``checkpoint-only`` (explained by a label such as ``mtp``, ``mtp copy``,
``buffer``, or ``unmapped``). The result is stored in the record as the ``checkpoint`` extra (JSON-able); module
verdicts aggregate up the module tree, so every ancestor path carries its subtree's verdict and counts.
"""

from __future__ import annotations

import functools
import math
import os
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from archviz.gcpause import collector_paused
from archviz.errors import CheckpointError
from archviz.format import ranges
from archviz.records import ALIAS, BIAS, BUFFER, SCALE, WEIGHT, ModelRecord, TensorRecord

from .records import CheckpointInventory, TensorInfo
from .hf_live import FACTS_KEY, live_ruleset
from .rules import IDENTITY, Fuse, Rules, Ruleset, load_rules, renamer

__all__ = ["EXTRA_KEY", "CK_TO_TORCH", "compare", "check", "compress_names"]

EXTRA_KEY = "checkpoint"

#: safetensors dtype code → torch dtype name (as records spell them).
CK_TO_TORCH = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "I32": "int32", "U32": "uint32",
    "I64": "int64", "U64": "uint64", "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64",
    "C64": "complex64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz", "F4": "float4_e2m1fn",
    "F6_E2M3": "float6_e2m3fn", "F6_E3M2": "float6_e3m2fn",
}
_FP8_CK = {"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}
_INT_CK = {"BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64"}
_FLOAT_TORCH = {"float16", "bfloat16", "float32", "float64"}
_QUANT_TORCH = {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn_x2"}
_NON_PARAM_LABELS = {"buffer", "table", "tied copy"}
COMPACT_ABOVE = 1000  # entries; above this the tensors list is collapsed over layer/expert indices


# ---------------------------------------------------------------------------------------------------------------------
# The checkpoint side: tensors grouped with their scales


@dataclass
class _Unit:
    """One checkpoint tensor with the quantization scales that belong to it."""

    info: TensorInfo
    scales: list[TensorInfo] = field(default_factory=list)
    packed: bool = False  # fp4 values packed two per byte in I8/U8
    mapped: str = ""  # name after the renames
    target: str | None = None  # the model tensor it lands on
    fuse: Fuse | None = None
    split: tuple[str, ...] = ()  # the other model tensors a splitting conversion fills from this one
    assigned: bool = False

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


def _units(inv: CheckpointInventory, rules: Rules) -> list[_Unit]:
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
    units: dict[str, _Unit] = {}
    for name, t in tensors.items():
        if name not in scale_of:
            units[name] = _Unit(t)
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


# ---------------------------------------------------------------------------------------------------------------------
# The model side


@dataclass
class _ModelTensor:
    name: str
    module: str
    rec: TensorRecord
    scales: list[tuple[str, TensorRecord]] = field(default_factory=list)


def _model_index(record: ModelRecord) -> tuple[dict[str, _ModelTensor], dict[str, str], dict[str, _ModelTensor]]:
    """(targets: name → tensor (weights, biases, tables, persistent buffers, orphan scales),
    aliases: alias name → counted name, others: non-persistent buffers and paired scales by name)."""
    targets: dict[str, _ModelTensor] = {}
    aliases: dict[str, str] = {}
    others: dict[str, _ModelTensor] = {}
    for m in record.modules:
        prefix = f"{m.path}." if m.path else ""
        local = {t.name: t for t in m.tensors}
        for t in m.tensors:
            full = prefix + t.name
            if t.kind == ALIAS:
                if t.alias_of:
                    aliases[full] = t.alias_of
                continue
            if t.kind == BUFFER and not t.persistent:
                others[full] = _ModelTensor(full, m.path, t)
                continue
            if t.kind == SCALE and t.scales and t.scales in local and local[t.scales].kind != SCALE:
                continue
            targets[full] = _ModelTensor(full, m.path, t)
        for t in m.tensors:
            if t.kind == SCALE and t.scales and t.scales in local and local[t.scales].kind != SCALE:
                full = prefix + t.name
                owner = targets.get(prefix + t.scales)
                if owner is not None:
                    owner.scales.append((full, t))
                    others[full] = _ModelTensor(full, m.path, t)
                else:
                    targets[full] = _ModelTensor(full, m.path, t)
    return targets, aliases, others


# ---------------------------------------------------------------------------------------------------------------------
# Mapping


class _Resolver:
    """Finds a model name for a renamed checkpoint name: as is, then with a common prefix added or removed."""

    def __init__(self, names: set[str], prefixes: Sequence[str]):
        self.names = names
        self.ops: list[tuple[str, str]] = [("add", p) for p in prefixes] + [("strip", p) for p in prefixes]
        self.last: tuple[str, str] | None = None
        self.hits: dict[tuple[str, str], int] = {}

    def _apply(self, op: tuple[str, str], name: str) -> str | None:
        kind, p = op
        if kind == "add":
            return p + name
        return name[len(p):] if name.startswith(p) else None

    def resolve(self, name: str) -> str | None:
        if name in self.names:
            return name
        if self.last is not None:
            c = self._apply(self.last, name)
            if c is not None and c in self.names:
                self.hits[self.last] = self.hits.get(self.last, 0) + 1
                return c
        for op in self.ops:
            c = self._apply(op, name)
            if c is not None and c in self.names:
                self.last = op
                self.hits[op] = self.hits.get(op, 0) + 1
                return c
        return None

    def place(self, name: str) -> str:
        """Where a name with no model tensor would sit in the model's namespace (the most used prefix op)."""
        if not self.hits:
            return name
        op = max(self.hits.items(), key=lambda kv: kv[1])[0]
        return self._apply(op, name) or name


def _map(units: Iterable[_Unit], ruleset: Ruleset, user: Ruleset | None, resolver: _Resolver,
         write: bool) -> int:
    """Map units with one ruleset; returns how many land on a model tensor. ``write`` stores the result."""
    hits = 0
    fuse = (user.fuse if user else ()) + ruleset.fuse
    rename = renamer(user, ruleset)
    mapper = ruleset.mapper
    resolve = resolver.resolve
    for u in units:
        name = rename(u.info.name)
        via: Fuse | None = None
        split: tuple[str, ...] = ()
        if mapper is not None:
            name, via, others = mapper(name)
            if others:
                split = tuple(resolve(o) or "" for o in others)
        target = resolve(name)
        if target is None:
            via = None
            for f in fuse:
                t = f.target(name)
                if t is not None:
                    target = resolve(t)
                    if target is not None:
                        via = f
                        break
        if target is not None:
            hits += 1
        if write:
            u.mapped, u.target, u.fuse = name, target, via
            u.split = split if target is not None and split and all(split) else ()
    return hits


def _relevant(rs: Ruleset, sample: Sequence[_Unit], config: Mapping[str, Any]) -> bool:
    """Whether a ruleset has anything to say about these names (a rename, ignore or explain rule that applies)."""
    rename = renamer(rs)
    for u in sample:
        n = u.name
        if rename(n) != n or (rs.mapper is not None and rs.mapper(n)[0] != n):
            return True
        if any(x.regex.search(n) for x in rs.explain) or any(x.matches(n, config) for x in rs.ignore):
            return True
    return False


def _choose(units: list[_Unit], rules: Rules, record: ModelRecord, resolver: _Resolver,
            extra: tuple[Ruleset, ...] = ()) -> tuple[Ruleset, dict[str, int]]:
    """The ruleset that maps the most of an even sample of the checkpoint's tensors; ties go to a user's ruleset,
    then one made for the config's model_type whose rules apply to these names, then any whose rules apply, then
    file order (the hand-written rulesets, then transformers' own conversions)."""
    config = dict(record.source.config)
    model_type = config.get("model_type")
    sample = units
    if len(sample) > 3000:
        step = len(sample) / 3000
        sample = [sample[int(i * step)] for i in range(3000)]
    scores: dict[str, int] = {}
    tried: list[tuple[int, int, Ruleset]] = []
    for order, rs in enumerate((IDENTITY,) + rules.rulesets + extra):
        if rs.source_kinds and record.source.kind not in rs.source_kinds:
            continue
        hits = _map(sample, rs, rules.user, resolver, write=False)
        scores[rs.name] = hits
        tried.append((hits, order, rs))
    top = max(h for h, _, _ in tried)

    def preference(t: tuple[int, int, Ruleset]) -> tuple[bool, bool, bool, int]:
        relevant = _relevant(t[2], sample, config)  # a ruleset that changes nothing here is identity by another name
        return (t[2].name in rules.user_rulesets, relevant and bool(model_type and model_type in t[2].model_types),
                relevant, -t[1])

    best = max((t for t in tried if t[0] == top), key=preference)
    return best[2], scores


# ---------------------------------------------------------------------------------------------------------------------
# Notes and checks


def _shape(s: Sequence[int]) -> str:
    return "[" + ", ".join(str(x) for x in s) + "]"


def _ck_desc(u: _Unit) -> str:
    d = u.info.dtype
    if u.packed:
        return f"fp4 packed 2 per byte in {d}"
    return f"fp8 {d}" if d in _FP8_CK else d


def _block(config: Mapping[str, Any], rules: Rules) -> tuple[int, int]:
    q = config.get("quantization_config")
    if isinstance(q, Mapping):
        b = q.get("weight_block_size")
        if isinstance(b, (list, tuple)) and len(b) == 2 and all(isinstance(x, int) and x > 0 for x in b):
            return int(b[0]), int(b[1])
    return rules.fp8_block


def _check_scales(u: _Unit, block: tuple[int, int], fp4: int) -> tuple[bool, str | None]:
    """Each scale against the weight's shape and the block size: (ok, note)."""
    return _scales_verdict(u.info.shape, u.info.dtype, u.packed,
                           tuple((s.name.rsplit(".", 1)[-1], s.dtype, s.shape) for s in u.scales), block, fp4)


@functools.lru_cache(maxsize=8192)
def _scales_verdict(w: tuple[int, ...], dtype: str, packed: bool, scales: tuple[tuple[str, str, tuple[int, ...]], ...],
                    block: tuple[int, int], fp4: int) -> tuple[bool, str | None]:
    if not scales:
        if dtype in _FP8_CK:
            return True, "fp8 weight with no scale tensor beside it"
        return True, None
    notes = []
    ok = True
    for sname, sdtype, sshape in scales:
        if packed:
            exp = w[:-1] + (math.ceil(2 * w[-1] / fp4),)
            how = f"1×{fp4} fp4 blocks"
        elif len(w) >= 2:
            exp = w[:-2] + (math.ceil(w[-2] / block[0]), math.ceil(w[-1] / block[1]))
            how = f"{block[0]}×{block[1]} blocks"
        else:
            exp = (math.ceil(w[0] / block[1]),) if w else ()
            how = f"{block[1]}-blocks"
        if sshape == exp:
            notes.append(f"{sdtype} scale {_shape(sshape)} ({how})")
        elif len(sshape) <= 1 and math.prod(sshape) == 1:
            notes.append(f"{sdtype} per-tensor scale")
        else:
            ok = False
            notes.append(f"scale {sname} {_shape(sshape)} does not fit weight {_shape(w)} in {how} "
                         f"(expected {_shape(exp)})")
    return ok, "; ".join(notes)


def _dtype_note(model_dtype: str, units: Sequence[_Unit], scale_text: str | None) -> tuple[str | None, str | None]:
    """(full note, short tag) for a dtype difference, or (None, None) when the dtypes agree."""
    kinds = tuple(sorted({(u.info.dtype, u.packed, bool(u.scales)) for u in units}))
    return _dtype_note_key(model_dtype, kinds, scale_text)


@functools.lru_cache(maxsize=8192)
def _dtype_note_key(model_dtype: str, kinds: tuple[tuple[str, bool, bool], ...], scale_text: str | None
                    ) -> tuple[str | None, str | None]:
    def desc(dtype: str, packed: bool) -> str:
        if packed:
            return f"fp4 packed 2 per byte in {dtype}"
        return f"fp8 {dtype}" if dtype in _FP8_CK else dtype

    ck = sorted({desc(d, p) for d, p, _ in kinds})
    ck_torch = {CK_TO_TORCH.get(d, d) for d, _, _ in kinds}
    packed = any(p for _, p, _ in kinds)
    quant = any(p or d in _FP8_CK or sc for d, p, sc in kinds)
    if ck_torch == {model_dtype} and not packed:
        return None, None
    if model_dtype == "float4_e2m1fn_x2" and all(p for _, p, _ in kinds):
        return (f"fp4 on both sides: {ck[0]} on disk, {model_dtype} in the model"
                + (f"; {scale_text}" if scale_text else "")), "fp4: packed I8 on disk, float4_e2m1fn_x2 in the model"
    disk = "/".join(ck)
    if quant and model_dtype in _FLOAT_TORCH:
        full = f"{disk} on disk" + (f" with {scale_text}" if scale_text else "") + \
               f", {model_dtype} in the model: dequantized at load"
        short = "fp4" if packed else disk.split(" ")[0]
        return full, f"{short} on disk, {model_dtype} in the model (dequantized at load)"
    if model_dtype in _QUANT_TORCH and not quant:
        return f"{disk} on disk, {model_dtype} in the model: quantized at load", \
               f"{disk} on disk, {model_dtype} in the model (quantized at load)"
    full = f"stored {disk}, {model_dtype} in the model" + (f"; {scale_text}" if scale_text else "")
    return full, f"stored {disk}, {model_dtype} in the model"


# ---------------------------------------------------------------------------------------------------------------------
# Entries


@dataclass
class _Entry:
    model: str | None
    module: str | None  # model module path (or where a checkpoint-only tensor would sit)
    checkpoint: list[str]
    verdict: str
    kind: str  # model tensor kind, or the checkpoint-only label
    model_elements: int
    checkpoint_elements: int
    parameter: bool  # counts as parameters
    model_shape: tuple[int, ...] | None = None
    checkpoint_shape: tuple[int, ...] | None = None
    model_dtype: str | None = None
    checkpoint_dtype: str | None = None
    note: str | None = None
    tag: str | None = None  # short, generic form of the note for module summaries
    explained: bool = True  # checkpoint-only: a rule or label explains it
    fused: int = 0  # number of checkpoint tensors summed (fused entries)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "model": self.model, "checkpoint": self.checkpoint, "verdict": self.verdict, "kind": self.kind,
            "model_elements": self.model_elements, "checkpoint_elements": self.checkpoint_elements,
            "note": self.note,
        }
        if self.model_shape is not None:
            d["model_shape"] = list(self.model_shape)
        if self.checkpoint_shape is not None:
            d["checkpoint_shape"] = list(self.checkpoint_shape)
        if self.model_dtype:
            d["model_dtype"] = self.model_dtype
        if self.checkpoint_dtype:
            d["checkpoint_dtype"] = self.checkpoint_dtype
        if self.fused:
            d["fused"] = self.fused
        return d


def _counts_text(n: int, shape: Sequence[int] | None) -> str:
    return f"{n:,}" + (f" {_shape(shape)}" if shape is not None else "")


def _direct(mt: _ModelTensor, u: _Unit, block: tuple[int, int], rules: Rules, ruleset: Ruleset,
            user: Ruleset | None, resolver: _Resolver) -> _Entry:
    t = mt.rec
    # A packed model tensor meets an unrecognised I8/U8 with its stored shape: the checkpoint holds fp4 pairs too.
    if (not u.packed and u.info.dtype in ("I8", "U8") and t.packing and t.shape == u.info.shape
            and t.elements == 2 * math.prod(u.info.shape)):
        u.packed = True
    m_shape = tuple(t.logical_shape or t.shape)
    c_shape = u.logical_shape
    ok_scales, scale_text = _check_scales(u, block, rules.fp4_block)
    notes: list[str] = []
    tags: list[str] = []
    verdict = "match"
    if m_shape != c_shape or t.elements != u.elements:
        verdict = "mismatch"
        notes.append(f"model {_counts_text(t.elements, m_shape)}, checkpoint {_counts_text(u.elements, c_shape)}")
        tags.append(notes[-1])
    if not ok_scales:
        verdict = "mismatch"
        notes.append(scale_text or "bad scale")
        tags.append("scale shape does not fit the weight's blocks")
    # model-side scales against the checkpoint's
    if mt.scales:
        ck_scales = {}
        for s in u.scales:
            n = user.rename(s.name) if user is not None else s.name
            ck_scales[resolver.resolve(ruleset.rename(n)) or n] = s
        for sname, srec in mt.scales:
            s = ck_scales.get(sname) or (u.scales[0] if len(u.scales) == 1 and len(mt.scales) == 1 else None)
            if s is None:
                notes.append(f"the model's scale {sname.rsplit('.', 1)[-1]} {_shape(srec.shape)} has no checkpoint "
                             "scale (quantized at load?)")
                tags.append("model scale without a checkpoint scale")
            elif tuple(srec.shape) != s.shape:
                verdict = "mismatch"
                notes.append(f"scale {sname.rsplit('.', 1)[-1]}: model {_shape(srec.shape)}, checkpoint "
                             f"{_shape(s.shape)}")
                tags.append("scale shapes differ")
            elif CK_TO_TORCH.get(s.dtype) != srec.dtype:
                notes.append(f"scale stored {s.dtype}, {srec.dtype} in the model")
                tags.append(f"scale stored {s.dtype}, {srec.dtype} in the model")
    dnote, dtag = _dtype_note(t.dtype, [u], scale_text if ok_scales else None)
    if dnote:
        notes.append(dnote)
        tags.append(dtag or dnote)
    for ex in ruleset.explain + (user.explain if user else ()):
        if ex.applies(mt.name, u.name, t.dtype, u.info.dtype):
            notes.append(ex.note)
    param = t.kind in (WEIGHT, BIAS)
    return _Entry(mt.name, mt.module, u.names, verdict, t.kind, t.elements, u.elements, param,
                  m_shape if verdict != "match" else None, c_shape if verdict != "match" else None, t.dtype,
                  u.info.dtype, "; ".join(notes) or None, "; ".join(dict.fromkeys(tags)) or None)


def _fused(mt: _ModelTensor, units: list[_Unit], block: tuple[int, int], rules: Rules) -> _Entry:
    t = mt.rec
    total = sum(u.elements for u in units)
    notes: list[str] = []
    verdict = "match" if total == t.elements else "mismatch"
    abouts = sorted({u.fuse.about for u in units if u.fuse is not None and u.fuse.about})
    head = f"fused from {len(units):,} checkpoint tensors, compared by sums"
    if len(units) == 1:
        head = "converted at load from 1 checkpoint tensor, compared by counts"
    if abouts:
        head += f" ({'; '.join(abouts)})"
    if verdict == "mismatch":
        notes.append(f"model {_counts_text(t.elements, t.logical_shape or t.shape)}, checkpoint sum {total:,} over "
                     f"{len(units):,} tensors")
    notes.append(head)
    bad = 0
    scale_texts = set()
    for u in units:
        ok, text = _check_scales(u, block, rules.fp4_block)
        if not ok:
            bad += 1
            if bad == 1:
                notes.append(f"{u.name}: {text}")
        elif text:
            scale_texts.add(text)
    if bad:
        verdict = "mismatch"
        notes.append(f"{bad:,} scales do not fit their weights")
    scale_text = "; ".join(sorted(scale_texts)) if len(scale_texts) == 1 else (
        "scales per tensor" if scale_texts else None)
    dnote, dtag = _dtype_note(t.dtype, units, scale_text)
    if dnote:
        notes.append(dnote)
    tag = "fused per-expert tensors (by sums)" + (f"; {dtag}" if dtag else "")
    if verdict == "mismatch":
        tag = notes[0]
    dtypes = "/".join(sorted({u.info.dtype for u in units}))
    return _Entry(mt.name, mt.module, compress_names(n for u in units for n in u.names), verdict, t.kind, t.elements,
                  total, t.kind in (WEIGHT, BIAS), tuple(t.logical_shape or t.shape) if verdict != "match" else None,
                  None, t.dtype, dtypes, "; ".join(notes), tag, fused=len(units))


def _split(mts: list[_ModelTensor], units: list[_Unit], rules: Rules) -> list[_Entry]:
    """Model tensors a conversion fills by splitting checkpoint tensors (a fused qkv into q, k, v): one entry each,
    with the group's verdict by sums; each shows its share of the checkpoint's elements (its own count when the sums
    agree, else in proportion)."""
    model_total = sum(mt.rec.elements for mt in mts)
    ck_total = sum(u.elements for u in units)
    verdict = "match" if model_total == ck_total else "mismatch"
    abouts = sorted({u.fuse.about for u in units if u.fuse is not None and u.fuse.about})
    head = (f"split at load from {len(units):,} checkpoint tensor{'s' if len(units) != 1 else ''} into "
            f"{len(mts)} model tensors ({', '.join(mt.name.rsplit('.', 2)[-2] for mt in mts)}), compared by sums"
            + (f" ({'; '.join(abouts)})" if abouts else ""))
    notes = [head] if verdict == "match" else [f"model sum {model_total:,} over {len(mts)} tensors, checkpoint "
                                               f"{ck_total:,}", head]
    names = compress_names(n for u in units for n in u.names)
    dtypes = "/".join(sorted({u.info.dtype for u in units}))
    out: list[_Entry] = []
    given = 0
    for i, mt in enumerate(mts):
        t = mt.rec
        if verdict == "match":
            share = t.elements
        else:
            share = ck_total - given if i == len(mts) - 1 else ck_total * t.elements // max(model_total, 1)
        given += share
        dnote, dtag = _dtype_note(t.dtype, units, None)
        note = "; ".join(notes + ([dnote] if dnote else []))
        tag = notes[0] if verdict == "mismatch" else "split at load (by sums)" + (f"; {dtag}" if dtag else "")
        out.append(_Entry(mt.name, mt.module, names, verdict, t.kind, t.elements, share, t.kind in (WEIGHT, BIAS),
                          tuple(t.logical_shape or t.shape) if verdict != "match" else None, None, t.dtype, dtypes,
                          note, tag, fused=len(units)))
    return out


def _label(u: _Unit, rules: Rules, ruleset: Ruleset, config: Mapping[str, Any], others: Mapping[str, _ModelTensor]
           ) -> tuple[str, str]:
    """(label, about) for a checkpoint-only unit; label "unmapped" when nothing explains it. A user's ignore rules
    come first, then what the model says (a non-persistent buffer of that name), then the ruleset's and the common
    labels."""
    for lab in rules.user.ignore if rules.user else ():
        if lab.matches(u.name, config) or lab.matches(u.mapped, config):
            return lab.label, lab.about
    o = others.get(u.target) if u.target else None
    if o is not None and o.rec.kind == BUFFER:
        return "buffer", f"the model holds {o.name} as a non-persistent buffer (not loaded)"
    if o is not None and o.rec.kind == SCALE:
        return "scale", f"a scale the model holds beside {o.name.rsplit('.', 1)[0]}, its weight not quantized on disk"
    for lab in ruleset.ignore + rules.labels:
        if lab.matches(u.name, config) or lab.matches(u.mapped, config):
            return lab.label, lab.about
    if u.info.dtype in _INT_CK and not u.packed:
        return "unmapped", "an integer tensor (table or buffer) the model does not hold"
    return "unmapped", "no model tensor of this name after the rules"


# ---------------------------------------------------------------------------------------------------------------------
# Compact names: layers.{0-60}.ffn.experts.{0-255}.w1.weight


_DIGITS = re.compile(r"\d+")


def _template(name: str) -> tuple[str, tuple[int, ...]]:
    """("layers.{}.ffn.experts.{}.w1.weight", (3, 17)) for "layers.3.ffn.experts.17.w1.weight"."""
    parts = name.split(".")
    nums = []
    for i, p in enumerate(parts):
        if p.isdigit() and p.isascii():
            nums.append(int(p))
            parts[i] = "{}"
    return (".".join(parts), tuple(nums)) if nums else (name, ())


def _fill(template: str, parts: Sequence[str]) -> str:
    pieces = template.split("{}")
    out = [pieces[0]]
    for p, rest in zip(parts, pieces[1:]):
        out.append(p)
        out.append(rest)
    return "".join(out)


def _collapse_indices(template: str, idx: list[tuple[int, ...]]) -> list[str]:
    if len(idx) == 1:
        return [_fill(template, [str(x) for x in idx[0]])]
    k = len(idx[0])
    uniq = [sorted({t[i] for t in idx}) for i in range(k)]
    if math.prod(len(u) for u in uniq) == len(set(idx)):
        return [_fill(template, [str(u[0]) if len(u) == 1 else "{" + ranges(u) + "}" for u in uniq])]
    # not a full product: split on the first index and try again
    groups: dict[int, list[tuple[int, ...]]] = {}
    for t in idx:
        groups.setdefault(t[0], []).append(t)
    out = []
    for first, sub in groups.items():
        t1 = template.replace("{}", str(first), 1)
        out.extend(_collapse_indices(t1, [s[1:] for s in sub]) if k > 1 else [t1])
    return out


def compress_names(names: Iterable[str]) -> list[str]:
    """Names that differ only in integer path components, written once with index ranges, in first-seen order."""
    groups: dict[str, list[tuple[int, ...]]] = {}
    for n in names:
        t, nums = _template(n)
        groups.setdefault(t, []).append(nums)
    out: list[str] = []
    for t, idx in groups.items():
        out.extend(_collapse_indices(t, idx) if idx[0] else [t])
    return out


def _compact(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Collapse entries that differ only in integer path components (layers, experts) into one with a count."""
    keyed: dict[tuple, list[dict[str, Any]]] = {}
    for e in entries:
        name = e["model"] if e["model"] is not None else (e["checkpoint"][0] if e["checkpoint"] else "")
        ck = e["checkpoint"]
        key = (_template(name)[0], _template(ck[0])[0] if ck else None, len(ck), e["verdict"], e["kind"],
               e["model_elements"], e["checkpoint_elements"], _DIGITS.sub("#", e["note"]) if e.get("note") else None,
               tuple(e.get("model_shape") or ()), tuple(e.get("checkpoint_shape") or ()), e.get("model_dtype"),
               e.get("checkpoint_dtype"))
        keyed.setdefault(key, []).append(e)
    out = []
    for group in keyed.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        first = dict(group[0])
        if first["model"] is not None:
            models = compress_names(e["model"] for e in group)
            first["model"] = models[0] if len(models) == 1 else " | ".join(models)
        first["checkpoint"] = compress_names(c for e in group for c in e["checkpoint"])
        first["count"] = len(group)
        out.append(first)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Module aggregation


#: Levels of a checkpoint-only path below the model's own modules that get a module row each (the MTP layer's
#: ``model.layers.61.shared_head.head`` needs 3). Deeper levels are counted in the deepest row kept, so a hostile
#: name of 40,000 dots costs 40,000 steps, not 40,000 paths of 40,000 characters.
EXTRA_DEPTH = 8


def _ancestors(path: str, known: Mapping[str, Any] | None = None) -> Iterable[str]:
    """``path`` and each of its ancestors, ending with ``""``. With ``known`` (the model's module paths, closed
    under taking a parent): of a path not in it, only the model's modules and at most :data:`EXTRA_DEPTH` levels
    below them (a truncated path stands for everything under it)."""
    if known is None or path in known:
        yield path
        while path:
            path = path.rsplit(".", 1)[0] if "." in path else ""
            yield path
        return
    kept = [""]
    extra = 0
    at = path.find(".")
    while at != -1 and extra < EXTRA_DEPTH:
        prefix = path[:at]
        if prefix not in known:
            extra += 1
        kept.append(prefix)
        at = path.find(".", at + 1)
    if at == -1 and extra < EXTRA_DEPTH:
        kept.append(path)
    yield from reversed(kept)


def _modules(record: ModelRecord, entries: list[_Entry]) -> dict[str, dict[str, Any]]:
    stats: dict[str, list[Any]] = {}
    order = {m.path: i for i, m in enumerate(record.modules)}
    # [model, checkpoint, ck_only, match, mismatch, missing, ck_explained, ck_unexplained, notes]
    for e in entries:
        path = e.module or ""
        note = None
        if e.verdict in ("mismatch", "missing") or (e.verdict == "checkpoint-only" and not e.explained):
            local = (e.model or (e.checkpoint[0] if e.checkpoint else "?"))
            local = local[len(path) + 1:] if path and local.startswith(path + ".") else local
            note = f"{local}: {e.verdict}" + (f" ({e.tag})" if e.tag else "")
        elif e.verdict == "checkpoint-only":
            note = f"checkpoint-only: {e.kind}"
        elif e.tag:
            note = e.tag
        for p in _ancestors(path, order):
            s = stats.get(p)
            if s is None:
                s = stats[p] = [0, 0, 0, 0, 0, 0, 0, 0, {}]
            if e.verdict == "checkpoint-only":
                s[2] += e.checkpoint_elements if e.parameter else 0
                s[6 if e.explained else 7] += 1
            else:
                if e.parameter:
                    s[0] += e.model_elements
                    if e.verdict != "missing":
                        s[1] += e.checkpoint_elements
                s[{"match": 3, "mismatch": 4, "missing": 5}[e.verdict]] += 1
            if note is not None and len(s[8]) < 4:
                s[8][note] = None
            elif note is not None and note not in s[8]:
                s[8]["…"] = None
    out: dict[str, dict[str, Any]] = {}
    for p in sorted(stats, key=lambda p: (order.get(p, len(order)), p)):
        model, ck, ck_only, n_match, n_mis, n_missing, n_expl, n_unexpl, notes = stats[p]
        if n_mis or n_unexpl:
            verdict = "mismatch"
        elif n_match == 0 and n_missing == 0:
            verdict = "checkpoint-only"
        elif n_missing and n_match == 0:
            verdict = "missing"
        elif n_missing:
            verdict = "partial"
        else:
            verdict = "match"
        d: dict[str, Any] = {"verdict": verdict, "model": model, "checkpoint": ck}
        # A matching module whose notes are its parent's says nothing new (256 experts × 3 projections of the same
        # "fp4 on disk" note would be most of the JSON); mismatches always keep theirs.
        parent = (p.rsplit(".", 1)[0] if "." in p else "") if p else None
        if notes and not (verdict == "match" and parent is not None and stats.get(parent, [None] * 9)[8] == notes):
            d["notes"] = [n for n in notes if n != "…"] + (["… more notes below"] if "…" in notes else [])
        if ck_only:
            d["checkpoint_only"] = ck_only
        if p not in order:
            d["in_model"] = False
        out[p] = d
    return out


# ---------------------------------------------------------------------------------------------------------------------
# compare


def compare(record: ModelRecord, inventory: CheckpointInventory | str | os.PathLike[str],
            rules: Rules | str | os.PathLike[str] | None = None, *, compact: bool | None = None) -> ModelRecord:
    """Compare ``record`` with a checkpoint's headers; returns the record with the ``checkpoint`` extra set.

    ``inventory`` may be a :class:`CheckpointInventory` or anything ``open_checkpoint`` accepts; ``rules`` a
    :class:`Rules` or a user rules file (added to the built-in rules). ``compact`` collapses the per-tensor list over
    layer/expert indices (default: when it has more than ``COMPACT_ABOVE`` entries).
    """
    if not isinstance(inventory, CheckpointInventory):
        from .sources import open_checkpoint

        inventory = open_checkpoint(inventory)
    # Hundreds of thousands of small objects, none cyclic: the cyclic collector would only rescan them.
    with collector_paused():
        return _compare(record, inventory, rules, compact)


def _compare(record: ModelRecord, inventory: CheckpointInventory, rules: Rules | str | os.PathLike[str] | None,
             compact: bool | None) -> ModelRecord:
    if rules is None:
        rules = load_rules()
    elif not isinstance(rules, Rules):
        rules = load_rules(rules)
    config = dict(record.source.config)
    block = _block(config, rules)

    targets, aliases, others = _model_index(record)
    units = _units(inventory, rules)
    all_names = set(targets) | set(aliases) | set(others)
    resolver = _Resolver(all_names, rules.prefixes)
    live, live_note = (None, None)
    if record.source.kind == "hf":
        live, live_note = live_ruleset(record.extra(FACTS_KEY), config.get("model_type"), all_names,
                                       (u.name for u in units))
    ruleset, scores = _choose(units, rules, record, resolver, (live,) if live is not None else ())
    resolver = _Resolver(all_names, rules.prefixes)
    _map(units, ruleset, rules.user, resolver, write=True)

    # Targets: model name → units. Aliases land on the counted tensor; a second copy is a tied copy.
    by_target: dict[str, list[_Unit]] = {}
    splits: dict[tuple[str, ...], list[_Unit]] = {}  # model tensors filled together by splitting conversions
    split_of: dict[str, tuple[str, ...]] = {}
    leftovers: list[tuple[_Unit, str | None]] = []  # (unit, label override)
    for u in units:
        tgt = u.target
        if tgt is None:
            leftovers.append((u, None))
            continue
        if tgt in aliases:
            tgt = aliases[tgt]
            u.target = tgt
        if tgt in others:  # a non-persistent buffer or a paired scale: nothing to load it into
            leftovers.append((u, None))
            continue
        if tgt not in targets:
            leftovers.append((u, None))
            continue
        if u.split and all(s in targets for s in u.split):
            group = (tgt,) + u.split
            for member in group:
                split_of[member] = group
            splits.setdefault(group, []).append(u)
            continue
        by_target.setdefault(tgt, []).append(u)

    entries: list[_Entry] = []
    for name, mt in targets.items():
        group = split_of.get(name)
        if group is not None:
            if name == group[0]:  # the whole group at its first member
                us = splits[group] + [u for m in group for u in by_target.get(m, ())]
                entries.extend(_split([targets[m] for m in group], us, rules))
                for u in us:
                    u.assigned = True
            continue
        us = by_target.get(name)
        t = mt.rec
        if not us:
            entries.append(_Entry(name, mt.module, [], "missing", t.kind, t.elements, 0, t.kind in (WEIGHT, BIAS),
                                  tuple(t.logical_shape or t.shape), None, t.dtype, None,
                                  f"the checkpoint has no tensor for {name} "
                                  f"({_counts_text(t.elements, t.logical_shape or t.shape)})",
                                  "missing from the checkpoint"))
            continue
        fused = [u for u in us if u.fuse is not None]
        direct = [u for u in us if u.fuse is None]
        if len(direct) > 1 and not fused:
            # several checkpoint tensors on one name: the first is it, the rest tied copies when the same shape
            same = [u for u in direct[1:] if u.logical_shape == direct[0].logical_shape]
            for u in same:
                leftovers.append((u, "tied copy"))
            direct = [direct[0]] + [u for u in direct[1:] if u not in same]
        if len(direct) == 1 and not fused:
            entries.append(_direct(mt, direct[0], block, rules, ruleset, rules.user, resolver))
        else:
            entries.append(_fused(mt, direct + fused, block, rules))
        for u in us:
            u.assigned = True

    ck_only: list[dict[str, Any]] = []
    for u, override in leftovers:
        if override:
            label, about = override, "a second copy of a tensor the model ties to another"
        else:
            label, about = _label(u, rules, ruleset, config, others)
        explained = label != "unmapped"
        param = label not in _NON_PARAM_LABELS and label != "scale" and (
            u.packed or u.info.dtype not in _INT_CK | {"F8_E8M0"})
        place = u.mapped if u.target is None else u.target
        placed = resolver.place(place) if u.target is None else place
        module = placed.rsplit(".", 1)[0] if "." in placed else ""
        note = about
        if u.scales:
            note += f"; {_ck_desc(u)} with {len(u.scales)} scale(s)"
        entries.append(_Entry(None, module, u.names, "checkpoint-only", label, 0, u.elements, param,
                              None, u.logical_shape, None, u.info.dtype, note, label, explained))
        ck_only.append({"name": u.name, "kind": label, "dtype": u.info.dtype, "shape": list(u.info.shape),
                        "elements": u.elements, "explained": explained,
                        **({"scales": [s.name for s in u.scales]} if u.scales else {})})

    result = _result(record, inventory, entries, ck_only, ruleset, scores, rules, units, block, compact)
    if live_note:
        result["rules"]["notes"] = [live_note]
    return record.with_extra(EXTRA_KEY, result)


def _result(record: ModelRecord, inv: CheckpointInventory, entries: list[_Entry], ck_only: list[dict[str, Any]],
            ruleset: Ruleset, scores: Mapping[str, int], rules: Rules, units: list[_Unit], block: tuple[int, int],
            compact: bool | None) -> dict[str, Any]:
    matched = sum(e.model_elements for e in entries if e.verdict == "match" and e.parameter)
    mismatched = sum(e.model_elements for e in entries if e.verdict == "mismatch" and e.parameter)
    missing = sum(e.model_elements for e in entries if e.verdict == "missing" and e.parameter)
    ck_only_el = sum(e.checkpoint_elements for e in entries if e.verdict == "checkpoint-only")
    ck_params = sum(e.checkpoint_elements for e in entries if e.parameter and e.verdict != "missing")
    counts = {"match": 0, "mismatch": 0, "missing": 0, "checkpoint-only": 0}
    for e in entries:
        counts[e.verdict] += 1
    unexplained = sum(1 for e in entries if e.verdict == "checkpoint-only" and not e.explained)
    scales_paired = sum(len(u.scales) for u in units)
    bad_scales = sum(1 for u in units if u.scales and not _check_scales(u, block, rules.fp4_block)[0])
    verdict = "match" if not (counts["mismatch"] or counts["missing"] or unexplained) else "mismatch"
    labels: dict[str, int] = {}
    for c in ck_only:
        labels[c["kind"]] = labels.get(c["kind"], 0) + 1
    summary = {
        "model_parameters": record.summary.parameters,
        "checkpoint_parameters": ck_params,
        "matched": matched,
        "mismatched": mismatched,
        "missing": missing,
        "checkpoint_only": ck_only_el,
        "notes_count": sum(1 for e in entries if e.note and e.verdict != "checkpoint-only"),
        "tensors": counts,
        "checkpoint_tensors": len(inv.tensors),
        "checkpoint_only_kinds": labels,
        "unexplained": unexplained,
        "scales": {"paired": scales_paired, "weights_with_bad_scales": bad_scales},
    }
    tensors = [e.to_json() for e in entries]
    if compact or (compact is None and len(tensors) > COMPACT_ABOVE):
        tensors = _compact(tensors)
        ck_list = _compact_ck(ck_only)
    else:
        ck_list = ck_only
    return {
        "source": inv.source,
        "revision": inv.revision,
        "model": inv.metadata.get("model"),
        "verdict": verdict,
        "summary": summary,
        "rules": {"ruleset": ruleset.describe(), "scores": dict(scores), "files": [os.path.basename(f) for f in
                                                                                   rules.files],
                  "fp8_block": list(block), "fp4_block": rules.fp4_block},
        "tensors": tensors,
        "modules": _modules(record, entries),
        "checkpoint_only": ck_list,
    }


def _compact_ck(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keyed: dict[tuple, list[dict[str, Any]]] = {}
    for c in items:
        key = (_template(c["name"])[0], c["kind"], c["dtype"], tuple(c["shape"]), c["explained"])
        keyed.setdefault(key, []).append(c)
    out = []
    for group in keyed.values():
        first = {k: v for k, v in group[0].items() if k != "scales"}
        if len(group) > 1:
            names = compress_names(c["name"] for c in group)
            first["name"] = names[0] if len(names) == 1 else " | ".join(names)
            first["count"] = len(group)
        out.append(first)
    return out


def check(record: ModelRecord, ck_spec: CheckpointInventory | str | os.PathLike[str],
          rules_file: str | os.PathLike[str] | None = None) -> ModelRecord:
    """``compare`` with a checkpoint spec and an optional user rules file."""
    if isinstance(ck_spec, str) and not ck_spec:
        raise CheckpointError("no checkpoint given", hint="pass a .safetensors file, folder, index or manifest")
    return compare(record, ck_spec, load_rules(rules_file))


class _CallableModule(types.ModuleType):
    """``archviz.checkpoint.compare`` is this module *and* callable as :func:`compare`, so both
    ``archviz.checkpoint.compare(record, ck)`` and ``archviz.checkpoint.compare.compare(record, ck)`` work (the
    package exports the module, not a function of the same name that would hide it)."""

    def __call__(self, record: ModelRecord, inventory: CheckpointInventory | str | os.PathLike[str],
                 rules: Rules | str | os.PathLike[str] | None = None, *, compact: bool | None = None) -> ModelRecord:
        return compare(record, inventory, rules, compact=compact)


sys.modules[__name__].__class__ = _CallableModule

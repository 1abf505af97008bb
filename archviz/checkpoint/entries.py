"""One verdict per model tensor (`Entry`): direct, fused (per-expert tensors stacked) or split (one tensor into
several), with the scale checks, dtype notes and the checkpoint-only labels."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Sequence

from archviz.records import BIAS, BUFFER, SCALE, WEIGHT

from .compact import compress_names
from .mapping import Resolver
from .rules import Rules, Ruleset, full_renamer
from .units import CK_TO_TORCH, FLOAT_TORCH, FP8_CK, INT_CK, QUANT_TORCH, ModelTensor, Unit


def _shape(s: Sequence[int]) -> str:
    return "[" + ", ".join(str(x) for x in s) + "]"


def ck_desc(u: Unit) -> str:
    d = u.info.dtype
    if u.packed:
        return f"fp4 packed 2 per byte in {d}"
    return f"fp8 {d}" if d in FP8_CK else d


def block_size(config: Mapping[str, Any], rules: Rules) -> tuple[int, int]:
    q = config.get("quantization_config")
    if isinstance(q, Mapping):
        b = q.get("weight_block_size")
        if isinstance(b, (list, tuple)) and len(b) == 2 and all(isinstance(x, int) and x > 0 for x in b):
            return int(b[0]), int(b[1])
    return rules.fp8_block


def check_scales(u: Unit, block: tuple[int, int], fp4: int) -> tuple[bool, str | None]:
    """Each scale against the weight's shape and the block size: (ok, note)."""
    return _scales_verdict(u.info.shape, u.info.dtype, u.packed,
                           tuple((s.name.rsplit(".", 1)[-1], s.dtype, s.shape) for s in u.scales), block, fp4)


@functools.lru_cache(maxsize=8192)
def _scales_verdict(w: tuple[int, ...], dtype: str, packed: bool, scales: tuple[tuple[str, str, tuple[int, ...]], ...],
                    block: tuple[int, int], fp4: int) -> tuple[bool, str | None]:
    if not scales:
        if dtype in FP8_CK:
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


def _dtype_note(model_dtype: str, units: Sequence[Unit], scale_text: str | None) -> tuple[str | None, str | None]:
    """(full note, short tag) for a dtype difference, or (None, None) when the dtypes agree."""
    kinds = tuple(sorted({(u.info.dtype, u.packed, bool(u.scales)) for u in units}))
    return _dtype_note_key(model_dtype, kinds, scale_text)


@functools.lru_cache(maxsize=8192)
def _dtype_note_key(model_dtype: str, kinds: tuple[tuple[str, bool, bool], ...], scale_text: str | None
                    ) -> tuple[str | None, str | None]:
    def desc(dtype: str, packed: bool) -> str:
        if packed:
            return f"fp4 packed 2 per byte in {dtype}"
        return f"fp8 {dtype}" if dtype in FP8_CK else dtype

    ck = sorted({desc(d, p) for d, p, _ in kinds})
    ck_torch = {CK_TO_TORCH.get(d, d) for d, _, _ in kinds}
    packed = any(p for _, p, _ in kinds)
    quant = any(p or d in FP8_CK or sc for d, p, sc in kinds)
    if ck_torch == {model_dtype} and not packed:
        return None, None
    if model_dtype == "float4_e2m1fn_x2" and all(p for _, p, _ in kinds):
        return (f"fp4 on both sides: {ck[0]} on disk, {model_dtype} in the model"
                + (f"; {scale_text}" if scale_text else "")), "fp4: packed I8 on disk, float4_e2m1fn_x2 in the model"
    disk = "/".join(ck)
    if quant and model_dtype in FLOAT_TORCH:
        full = f"{disk} on disk" + (f" with {scale_text}" if scale_text else "") + \
               f", {model_dtype} in the model: dequantized at load"
        short = "fp4" if packed else disk.split(" ")[0]
        return full, f"{short} on disk, {model_dtype} in the model (dequantized at load)"
    if model_dtype in QUANT_TORCH and not quant:
        return f"{disk} on disk, {model_dtype} in the model: quantized at load", \
               f"{disk} on disk, {model_dtype} in the model (quantized at load)"
    full = f"stored {disk}, {model_dtype} in the model" + (f"; {scale_text}" if scale_text else "")
    return full, f"stored {disk}, {model_dtype} in the model"


@dataclass
class Entry:
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
    checkpoint_bytes: int | None = None  # bytes its checkpoint tensors (and their scales) occupy on disk
    members: ClassVar[Any] = None  # one pair (a FamilyEntry, families.py, has many)
    # (model tensor, checkpoint unit, the verdict it shares) of a direct entry: the compact tensor list reads their
    # names' splits, and the rest of its key once per verdict
    pair: tuple[ModelTensor, Unit, Any] | None = field(default=None, repr=False, compare=False)

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
        if self.checkpoint_bytes is not None:
            d["checkpoint_bytes"] = self.checkpoint_bytes
        return d


def counts_text(n: int, shape: Sequence[int] | None) -> str:
    return f"{n:,}" + (f" {_shape(shape)}" if shape is not None else "")


def scale_renamer(ruleset: Ruleset, user: Ruleset | None) -> Callable[[str], tuple[str, str]]:
    """A scale's name → (its name after the user's renames, that after the ruleset's too)."""
    first, second = full_renamer(user), full_renamer(ruleset)

    def both(name: str) -> tuple[str, str]:
        n = first(name)
        return n, second(n)

    return both


class DirectEntries:
    """One model tensor against one checkpoint unit, for every pair of a comparison, worked out once per kind of pair.

    What a verdict depends on beyond the names (the model tensor's record, the checkpoint tensor's dtype, shape,
    packing and scales, which checkpoint scale each model scale met, which explain rules apply) is the memo's key;
    45,000 expert projections of one shape are a handful of keys. The name-dependent steps still run for each pair:
    the fp4 repacking test, the pairing of scales (one on each side pair as they are; otherwise by their names after
    the renames, looked up without counting toward where unmapped tensors are placed), the explain rules (their
    patterns only where their dtypes apply)."""

    def __init__(self, block: tuple[int, int], rules: Rules, ruleset: Ruleset, user: Ruleset | None,
                 resolver: Resolver):
        self.block, self.rules, self.ruleset, self.user, self.resolver = block, rules, ruleset, user, resolver
        self.scale_rename = scale_renamer(ruleset, user)
        self.explains = ruleset.explain + (user.explain if user else ())
        self.memo: dict[tuple, tuple] = {}
        self.keep: list[Any] = []  # the records whose ids are in keys
        self.by_dtypes: dict[tuple[str, str], tuple[Any, ...]] = {}  # (model, checkpoint dtype) → explains to test

    def explains_for(self, model_dtype: str, checkpoint_dtype: str) -> tuple[Any, ...]:
        """The explain rules whose dtype conditions hold for a pair of these dtypes (their patterns to be matched)."""
        dtypes = (model_dtype, checkpoint_dtype)
        explains = self.by_dtypes.get(dtypes)
        if explains is None:
            explains = self.by_dtypes[dtypes] = tuple(ex for ex in self.explains if ex.dtypes_apply(*dtypes))
        return explains

    def _met(self, mt: ModelTensor, u: Unit) -> tuple[int, ...]:
        """Per model scale, the index of the checkpoint scale of its name, or -1."""
        if len(u.scales) == 1 and len(mt.scales) == 1:
            return (0,)  # one scale on each side: they pair whatever their names
        if not u.scales:
            return (-1,) * len(mt.scales)
        ck_scales: dict[str, int] = {}
        lookup, rename = self.resolver.lookup, self.scale_rename
        for i, s in enumerate(u.scales):
            n = rename(s.name)
            ck_scales[lookup(n[1]) or n[0]] = i
        return tuple(ck_scales.get(sname, -1) for sname, _ in mt.scales)

    def __call__(self, mt: ModelTensor, u: Unit) -> Entry:
        t = mt.rec
        info = u.info
        if (not u.packed and info.dtype in ("I8", "U8") and t.packing and t.shape == info.shape
                and t.elements == 2 * math.prod(info.shape)):
            u.packed = True
        met = self._met(mt, u) if mt.scales else ()
        explains = self.explains_for(t.dtype, info.dtype)
        applies = tuple(ex.matches(mt.name, u.name) for ex in explains) if explains else ()
        scales = u.scales
        key = (id(t), info.dtype, info.shape, u.packed,
               (((s := scales[0]).name.rpartition(".")[2], s.dtype, s.shape),) if len(scales) == 1 else
               tuple((s.name.rpartition(".")[2], s.dtype, s.shape) for s in scales),
               tuple((sname.rpartition(".")[2], id(srec)) for sname, srec in mt.scales) if mt.scales else (),
               met, applies)
        proto = self.memo.get(key)
        if proto is None:
            self.keep.append(t)
            self.keep.extend(srec for _, srec in mt.scales)
            e = _direct(mt, u, self.block, self.rules, met, [ex for ex, a in zip(explains, applies) if a])
            proto = self.memo[key] = (e.verdict, e.kind, e.model_elements, e.checkpoint_elements, e.parameter,
                                      e.model_shape, e.checkpoint_shape, e.model_dtype, e.checkpoint_dtype, e.note,
                                      e.tag), check_scales(u, self.block, self.rules.fp4_block)[0], \
                e.checkpoint_bytes
        u.scales_ok = proto[1]
        return Entry(mt.name, mt.module, u.names, *proto[0], checkpoint_bytes=proto[2], pair=(mt, u, proto))


def missing_entry(mt: ModelTensor, unheld: str | None = None) -> Entry:
    """A model tensor the checkpoint has no tensor for: "missing", or "model-only" where the checkpoint's format
    has no place for it (``unheld``: why), the mirror of an explained checkpoint-only tensor."""
    t = mt.rec
    shape = tuple(t.logical_shape or t.shape)
    if unheld:
        return Entry(mt.name, mt.module, [], "model-only", t.kind, t.elements, 0, t.kind in (WEIGHT, BIAS), shape,
                     None, t.dtype, None, unheld, unheld)
    return Entry(mt.name, mt.module, [], "missing", t.kind, t.elements, 0, t.kind in (WEIGHT, BIAS), shape, None,
                 t.dtype, None, f"the checkpoint has no tensor for {mt.name} ({counts_text(t.elements, shape)})",
                 "missing from the checkpoint")


def _direct(mt: ModelTensor, u: Unit, block: tuple[int, int], rules: Rules, met: tuple[int, ...],
            explains: Sequence[Any]) -> Entry:
    """The verdict of one model tensor against one checkpoint unit, with the scales already met (``met``: per model scale, the index of its checkpoint
    scale or -1) and the explain rules that apply."""
    t = mt.rec
    m_shape = tuple(t.logical_shape or t.shape)
    c_shape = u.logical_shape
    ok_scales, scale_text = check_scales(u, block, rules.fp4_block)
    notes: list[str] = []
    tags: list[str] = []
    verdict = "match"
    if m_shape != c_shape or t.elements != u.elements:
        verdict = "mismatch"
        notes.append(f"model {counts_text(t.elements, m_shape)}, checkpoint {counts_text(u.elements, c_shape)}")
        tags.append(notes[-1])
    if not ok_scales:
        verdict = "mismatch"
        notes.append(scale_text or "bad scale")
        tags.append("scale shape does not fit the weight's blocks")
    for (sname, srec), i in zip(mt.scales, met):
        s = u.scales[i] if i >= 0 else None
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
    for ex in explains:
        notes.append(ex.note)
    param = t.kind in (WEIGHT, BIAS)
    return Entry(mt.name, mt.module, u.names, verdict, t.kind, t.elements, u.elements, param,
                 m_shape if verdict != "match" else None, c_shape if verdict != "match" else None, t.dtype,
                 u.info.dtype, "; ".join(notes) or None, "; ".join(dict.fromkeys(tags)) or None,
                 checkpoint_bytes=u.stored_bytes)


def fused_entry(mt: ModelTensor, units: list[Unit], block: tuple[int, int], rules: Rules) -> Entry:
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
        notes.append(f"model {counts_text(t.elements, t.logical_shape or t.shape)}, checkpoint sum {total:,} over "
                     f"{len(units):,} tensors")
    notes.append(head)
    bad = 0
    scale_texts = set()
    for u in units:
        ok, text = check_scales(u, block, rules.fp4_block)
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
    return Entry(mt.name, mt.module, compress_names(n for u in units for n in u.names), verdict, t.kind, t.elements,
                  total, t.kind in (WEIGHT, BIAS), tuple(t.logical_shape or t.shape) if verdict != "match" else None,
                  None, t.dtype, dtypes, "; ".join(notes), tag, fused=len(units), checkpoint_bytes=_stored(units))


def split_entries(mts: list[ModelTensor], units: list[Unit], rules: Rules) -> list[Entry]:
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
    out: list[Entry] = []
    given = given_bytes = 0
    stored = _stored(units)
    for i, mt in enumerate(mts):
        t = mt.rec
        if verdict == "match":
            share = t.elements
        else:
            share = ck_total - given if i == len(mts) - 1 else ck_total * t.elements // max(model_total, 1)
        given += share
        part = None  # its share of the stored bytes, in proportion (exact where it takes whole blocks)
        if stored is not None:
            part = stored - given_bytes if i == len(mts) - 1 else stored * share // max(ck_total, 1)
            given_bytes += part
        dnote, dtag = _dtype_note(t.dtype, units, None)
        note = "; ".join(notes + ([dnote] if dnote else []))
        tag = notes[0] if verdict == "mismatch" else "split at load (by sums)" + (f"; {dtag}" if dtag else "")
        out.append(Entry(mt.name, mt.module, names, verdict, t.kind, t.elements, share, t.kind in (WEIGHT, BIAS),
                          tuple(t.logical_shape or t.shape) if verdict != "match" else None, None, t.dtype, dtypes,
                          note, tag, fused=len(units), checkpoint_bytes=part))
    return out


def _stored(units: Sequence[Unit]) -> int | None:
    """Bytes the units (and their scales) occupy on disk, or None where a dtype's size is not known."""
    sizes = [u.stored_bytes for u in units]
    return None if None in sizes else sum(sizes)  # type: ignore[arg-type]


def checkpoint_only_label(u: Unit, rules: Rules, ruleset: Ruleset, config: Mapping[str, Any],
                          others: Mapping[str, ModelTensor]) -> tuple[str, str]:
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
    if u.info.dtype in INT_CK and not u.packed:
        return "unmapped", "an integer tensor (table or buffer) the model does not hold"
    return "unmapped", "no model tensor of this name after the rules"

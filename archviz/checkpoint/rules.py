"""Name-mapping rules between a model and a checkpoint, loaded from data files.

Direction: **checkpoint name → model name**, as a loader sees it. A *ruleset* holds

- ``renames``: ``[regex, replacement]`` pairs applied in order, each to the result of the previous one;
- ``fuse``: ``{"from": regex, "into": replacement}``: checkpoint tensors whose renamed name matches become one fused
  model tensor (e.g. per-expert ``experts.{e}.w1/w3`` → ``experts.gate_up_proj``), compared by element sums;
- ``ignore``: ``{"pattern": regex, "label": ...}``: tensors the loader skips on purpose (an MTP layer), reported as
  checkpoint-only *and explained*;
- ``explain``: ``{"pattern": regex, "note": ...}``: a note added to a model tensor's verdict (e.g. "dequantized at load").

After the renames, the prefix step tries the name as is, then with each common prefix added or removed
(``model.``, ``bert.``, ...). Built-in rulesets live in ``archviz/checkpoint/rules/*.json``
(``common.json``: prefixes, scale pairing, labels; ``transformers.json``; ``deepseek-reference.json``). A user rules
file (JSON, or TOML on Python ≥ 3.11) has the same form: its ``rulesets`` join the candidates (and win ties), and its
top-level ``renames`` / ``fuse`` / ``ignore`` / ``explain`` / ``labels`` / ``prefixes`` apply before every candidate's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from archviz.errors import ArchvizError
from archviz.records.recordcheck import fail, refused_as, want_int, want_list, want_str, want_strs, want_table
from archviz.files.safeio import MiB, read_regular
from archviz.files.safejson import loads as bounded_loads
from archviz.files.safetoml import load_file as load_toml

from .templates import split_name

__all__ = ["RULES_FORMAT", "BUILTIN_DIR", "digit_blind", "renamer", "full_renamer", "Rename", "Fuse", "Label", "Explain", "Ruleset", "Rules", "load_rules"]

RULES_FORMAT = "archviz-rules/1"
BUILTIN_DIR = Path(__file__).resolve().with_name("rules")
_META = set(".^$*+?{}[]\\|()")


#: Largest rules file read (the built-in ones are a few KB).
MAX_RULES_BYTES = 16 * MiB


class RulesError(ArchvizError):
    """A rules file is unusable (exit 2)."""


def _rules_error(message: str) -> RulesError:
    return RulesError(message, hint="see the rules format in docs/ci-recipe.md")


def _literal(pattern: str) -> tuple[str, str] | None:
    """(mode, text) when a regex is a plain literal, optionally anchored: mode is "in", "start", "end" or "exact"."""
    p = pattern
    start = p.startswith("^")
    end = p.endswith("$") and not p.endswith("\\$")
    if start:
        p = p[1:]
    if end:
        p = p[:-1]
    out = []
    i = 0
    while i < len(p):
        c = p[i]
        if c == "\\":
            if i + 1 < len(p) and p[i + 1] in _META | {".", "-", "_", "/"}:
                out.append(p[i + 1])
                i += 2
                continue
            return None
        if c in _META:
            return None
        out.append(c)
        i += 1
    text = "".join(out)
    mode = "exact" if start and end else "start" if start else "end" if end else "in"
    return mode, text


_DIGIT_SENSITIVE = re.compile(r"\\[dDwWsSbB]|\[|\d|(?<!\\)\.")


def digit_blind(pattern: str, replace: str = "") -> bool:
    """Whether a rename cannot tell one run of digits from another: no digits, no \\d \\w \\s \\b classes, no
    ``[...]`` and no unescaped ``.``. Such renames may be applied once per name template (indices elided).
    Digits in the replacement are plain text (``.gate_proj.`` → ``.w1.``) unless it has escapes (``\\1``, ``\\0``)."""
    return not _DIGIT_SENSITIVE.search(pattern) and ("\\" not in replace or not any(c.isdigit() for c in replace))


@dataclass(frozen=True)
class Rename:
    pattern: str
    replace: str
    regex: re.Pattern[str] = field(repr=False, compare=False)
    quick: tuple[str, str] | None = field(default=None, repr=False, compare=False)
    blind: bool = field(default=False, repr=False, compare=False)

    def apply(self, name: str) -> str:
        q = self.quick
        if q is not None:
            mode, text = q
            if mode == "in":
                if text not in name:
                    return name
            elif mode == "start":
                if not name.startswith(text):
                    return name
            elif mode == "end":
                if not name.endswith(text):
                    return name
            elif name != text:
                return name
        return self.regex.sub(self.replace, name)


@dataclass(frozen=True)
class Fuse:
    pattern: str
    into: str
    about: str
    regex: re.Pattern[str] = field(repr=False, compare=False)

    def target(self, name: str) -> str | None:
        m = self.regex.search(name)
        if m is None:
            return None
        # m.expand(into) parses the template anew on every call (a third of a 671B comparison); sub() caches the
        # parsed template. It replaces the same leftmost match: cut the expansion out from between its context.
        out = self.regex.sub(self.into, name, count=1)
        return out[m.start():len(out) - (len(name) - m.end())]


@dataclass(frozen=True)
class Label:
    """Explains a checkpoint-only tensor. ``when`` (optional): the regex group ``layer`` must be at least the first
    config value found among ``layer_at_least`` keys, and one of the ``positive`` config keys must be > 0."""

    pattern: str
    label: str
    about: str
    regex: re.Pattern[str] = field(repr=False, compare=False)
    when: Mapping[str, Any] | None = None

    def matches(self, name: str, config: Mapping[str, Any]) -> bool:
        m = self.regex.search(name)
        if not m:
            return False
        if not self.when:
            return True
        layer = m.groupdict().get("layer")
        if layer is None:
            return False
        first = _first_int(config, self.when.get("layer_at_least", ()))
        if first is None or int(layer) < first:
            return False
        positive = self.when.get("positive")
        if positive:
            n = _first_int(config, positive)
            if not n or n <= 0 or int(layer) >= first + n:
                return False
        return True


def _first_int(config: Mapping[str, Any], keys: Iterable[str]) -> int | None:
    for k in keys:
        v = config.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


@dataclass(frozen=True)
class Explain:
    """A note for a model tensor (or its checkpoint tensor) whose name matches ``pattern``, optionally only when the
    checkpoint stores it in one of ``checkpoint_dtypes`` and the model holds one of ``model_dtypes``."""

    pattern: str
    note: str
    regex: re.Pattern[str] = field(repr=False, compare=False)
    checkpoint_dtypes: tuple[str, ...] = ()
    model_dtypes: tuple[str, ...] = ()

    def dtypes_apply(self, model_dtype: str, checkpoint_dtype: str) -> bool:
        """Whether the dtype conditions hold (the pattern still to be matched)."""
        return not ((self.checkpoint_dtypes and checkpoint_dtype not in self.checkpoint_dtypes)
                    or (self.model_dtypes and model_dtype not in self.model_dtypes))

    def matches(self, model_name: str, checkpoint_name: str) -> bool:
        """Whether the pattern matches either name (the dtype conditions aside)."""
        return bool(self.regex.search(model_name) or self.regex.search(checkpoint_name))

    def applies(self, model_name: str, checkpoint_name: str, model_dtype: str, checkpoint_dtype: str) -> bool:
        return self.dtypes_apply(model_dtype, checkpoint_dtype) and self.matches(model_name, checkpoint_name)


@dataclass(frozen=True)
class Ruleset:
    name: str
    about: str = ""
    provenance: str = ""
    file: str = ""
    model_types: tuple[str, ...] = ()
    source_kinds: tuple[str, ...] = ()
    renames: tuple[Rename, ...] = ()
    fuse: tuple[Fuse, ...] = ()
    ignore: tuple[Label, ...] = ()
    explain: tuple[Explain, ...] = ()
    # A name mapper run after the renames: name -> (model name, the conversion that joins it, or None, the other
    # model names a splitting conversion fills). transformers' own conversions come this way (hf_live.py).
    mapper: Callable[[str], tuple[str, "Fuse | None", tuple[str, ...]]] | None = field(
        default=None, repr=False, compare=False)
    # Model tensors the checkpoint's format has no place for, with why (a GGUF architecture's tensor set lacks
    # them, gguf_names.py): left out by every converter, so "model-only", not "missing".
    unheld: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def rename(self, name: str) -> str:
        for r in self.renames:
            name = r.apply(name)
        if self.mapper is not None:
            name = self.mapper(name)[0]
        return name


    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "about": self.about, "provenance": self.provenance, "file": self.file}


def renamer(*rulesets: Ruleset | None) -> Callable[[str], str]:
    """A function applying the renames of ``rulesets`` in order. When every rename is digit-blind, results are
    memoised per name template (numeric path components elided), so 15,000 expert names cost a handful of regexes."""
    apply, blind = chained_renames(rulesets)
    if apply is None:
        return lambda n: n
    if not blind:
        return apply
    templated = _templated(apply)
    return lambda n: templated(n, *split_name(n))


def split_renamer(*rulesets: Ruleset | None) -> Callable[[str, str, tuple[str, ...]], str]:
    """:func:`renamer` for a name given with its :func:`~archviz.checkpoint.templates.split_name` (a caller that
    keeps the split for later, as compare does for its compact tensor list): ``f(name, template, nums)``."""
    apply, blind = chained_renames(rulesets)
    if apply is None:
        return lambda n, t, nums: n
    if not blind:
        return lambda n, t, nums: apply(n)
    return _templated(apply)


def chained_renames(rulesets: tuple[Ruleset | None, ...]) -> tuple[Callable[[str], str] | None, bool]:
    """(all the rulesets' renames applied in order, or None when there are none; whether all are digit-blind)."""
    renames = [r for rs in rulesets if rs is not None for r in rs.renames]
    if not renames:
        return None, True

    def apply(n: str) -> str:
        for r in renames:
            n = r.apply(n)
        return n

    return apply, all(r.blind for r in renames)


def _templated(apply: Callable[[str], str]) -> Callable[[str, str, tuple[str, ...]], str]:
    """``apply`` memoised per name template: the template renamed once, each name filled in (or, where the rename
    moves an index, the name renamed as it is)."""
    cache: dict[str, list[str]] = {}

    def templated(n: str, t: str, nums: tuple[str, ...]) -> str:
        pieces = cache.get(t)
        if pieces is None:
            pieces = cache[t] = apply(t).split("\x00")
        if len(pieces) != len(nums) + 1:
            return apply(n)
        if not nums:
            return pieces[0]
        out = [pieces[0]]
        for num, rest in zip(nums, pieces[1:]):
            out.append(num)
            out.append(rest)
        return "".join(out)

    return templated


def full_renamer(rs: Ruleset | None) -> Callable[[str], str]:
    """``rs.rename`` as a function (identity for ``None``): its renames through :func:`renamer` (memoised per name
    template when digit-blind), then its mapper."""
    if rs is None:
        return lambda n: n
    rename, mapper = renamer(rs), rs.mapper
    if mapper is None:
        return rename
    return lambda n: mapper(rename(n))[0]


IDENTITY = Ruleset(name="identity", about="checkpoint names are the model's names (after the prefix step)")


@dataclass(frozen=True)
class Rules:
    """Everything a comparison needs: candidate rulesets, prefixes, scale pairing and checkpoint-only labels."""

    rulesets: tuple[Ruleset, ...]
    prefixes: tuple[str, ...]
    labels: tuple[Label, ...]
    scale_suffixes: tuple[tuple[str, str], ...]
    quantized_dtypes: frozenset[str]
    scale_dtypes: frozenset[str]
    fp8_block: tuple[int, int]
    fp4_block: int
    user: Ruleset | None = None  # top-level renames/fuse/ignore/explain of a user file, applied before any ruleset
    user_rulesets: tuple[str, ...] = ()  # names of rulesets that came from a user file (they win ties)
    files: tuple[str, ...] = ()

    @classmethod
    def default(cls) -> "Rules":
        return load_rules(None)

    def with_user(self, path: str | os.PathLike[str]) -> "Rules":
        with refused_as(_rules_error):
            return _merge_user(self, path)


# ---------------------------------------------------------------------------------------------------------------------
# Loading


def _compile(where: str, pattern: Any) -> re.Pattern[str]:
    want_str(f"{where} pattern", pattern, nonempty=True)
    try:
        return re.compile(pattern)
    except re.error as e:
        raise RulesError(f"{where}: bad regex {pattern!r} ({e})", hint="patterns are Python regular expressions") \
            from None


def _check_replacement(where: str, regex: re.Pattern[str], repl: Any) -> str:
    want_str(f"{where} replacement", repl)
    try:
        regex.sub(repl, "")  # parses the template: bad escapes and group references fail here, match or not
    except (re.error, IndexError) as e:
        raise RulesError(f"{where}: bad replacement {repl!r} for {regex.pattern!r} ({e})") from None
    return repl


def _list(where: str, obj: Mapping[str, Any], key: str) -> list[Any]:
    return want_list(f"{where} {key}", obj.get(key, []))


def _renames(where: str, obj: Mapping[str, Any]) -> tuple[Rename, ...]:
    out = []
    for i, item in enumerate(_list(where, obj, "renames")):
        w = f"{where} renames[{i}]"
        if isinstance(item, Mapping):
            item = [item.get("pattern", item.get("from")), item.get("replace", item.get("to"))]
        if not isinstance(item, list) or len(item) != 2:
            raise RulesError(f"{w}: a rename is [pattern, replacement] or {{pattern, replace}}")
        rx = _compile(w, item[0])
        repl = _check_replacement(w, rx, item[1])
        out.append(Rename(item[0], repl, rx, _literal(item[0]), digit_blind(item[0], repl)))
    return tuple(out)


def _fuse(where: str, obj: Mapping[str, Any]) -> tuple[Fuse, ...]:
    out = []
    for i, item in enumerate(_list(where, obj, "fuse")):
        w = f"{where} fuse[{i}]"
        if not isinstance(item, Mapping) or "from" not in item or "into" not in item:
            raise RulesError(f"{w}: a fuse rule is {{from: regex, into: replacement}}")
        rx = _compile(w, item["from"])
        out.append(Fuse(item["from"], _check_replacement(w, rx, item["into"]), str(item.get("about", "")), rx))
    return tuple(out)


def _labels(where: str, obj: Mapping[str, Any], key: str) -> tuple[Label, ...]:
    out = []
    for i, item in enumerate(_list(where, obj, key)):
        w = f"{where} {key}[{i}]"
        if isinstance(item, str):
            item = {"pattern": item}
        if not isinstance(item, Mapping) or "pattern" not in item:
            raise RulesError(f"{w}: a label is {{pattern: regex, label: text}}")
        when = item.get("when")
        if when is not None:
            want_table(f"{w} when", when, what="an object")
        label = want_str(f"{w} label", item.get("label", "ignored by rule"), nonempty=True)
        if label == "unmapped":
            fail(f"{w} label", "a label other than 'unmapped'", label)
        out.append(Label(item["pattern"], label, str(item.get("about", "")), _compile(w, item["pattern"]), when))
    return tuple(out)


def _explains(where: str, obj: Mapping[str, Any]) -> tuple[Explain, ...]:
    out = []
    for i, item in enumerate(_list(where, obj, "explain")):
        w = f"{where} explain[{i}]"
        if not isinstance(item, Mapping) or "pattern" not in item:
            raise RulesError(f"{w}: an explain rule is {{pattern: regex, note: text}}")
        want_str(f"{w} note", item.get("note"))
        out.append(Explain(item["pattern"], item["note"], _compile(w, item["pattern"]),
                           _strs(w, item, "checkpoint_dtypes"), _strs(w, item, "model_dtypes")))
    return tuple(out)


def _strs(where: str, obj: Mapping[str, Any], key: str) -> tuple[str, ...]:
    return tuple(want_strs(f"{where} {key}", obj.get(key, [])))


def _ruleset(where: str, obj: Any, file: str) -> Ruleset:
    want_table(where, obj, what="a ruleset: an object with a non-empty 'name'")
    want_str(f"{where} name", obj.get("name"), nonempty=True)
    where = f"{where} ({obj['name']})"
    return Ruleset(
        name=obj["name"], about=str(obj.get("about", "")), provenance=str(obj.get("provenance", "")), file=file,
        model_types=_strs(where, obj, "model_types"), source_kinds=_strs(where, obj, "source_kinds"),
        renames=_renames(where, obj), fuse=_fuse(where, obj), ignore=_labels(where, obj, "ignore"),
        explain=_explains(where, obj),
    )


def _read(path: Path) -> Any:
    where = str(path)
    if not os.path.lexists(where):
        raise RulesError(f"rules file {where} does not exist", hint="pass a .json (or .toml) rules file")
    if os.path.isdir(where):
        raise RulesError(f"rules file {where} is a folder", hint="pass a .json (or .toml) rules file")
    # a regular file (a FIFO or a device is refused unopened) of bounded size
    if path.suffix.lower() == ".toml":
        return load_toml(where, what="rules", max_bytes=MAX_RULES_BYTES, error=RulesError, hint="fix the line it "
                         "names, or write the rules as JSON")
    raw = read_regular(where, max_bytes=MAX_RULES_BYTES, what="rules", error=RulesError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RulesError(f"{where}: not valid JSON (not UTF-8 at byte {e.start})",
                         hint="rules files are JSON (or .toml)") from None
    return bounded_loads(text, where=where, error=RulesError, hint="rules files are JSON (or .toml)")


def _check_format(where: str, obj: Any) -> Mapping[str, Any]:
    if type(obj) is not dict:
        raise RulesError(f"{where}: a rules file is a JSON object")
    fmt = obj.get("format", RULES_FORMAT)
    if fmt != RULES_FORMAT:
        raise RulesError(f"{where}: unsupported rules format {fmt!r}; this archviz reads {RULES_FORMAT}")
    known = {"format", "about", "rulesets", "renames", "fuse", "ignore", "explain", "labels", "prefixes", "scales",
             "name", "provenance"}
    unknown = sorted(set(obj) - known)
    if unknown:
        raise RulesError(f"{where}: unknown key {unknown[0]!r}", hint=f"known keys: {', '.join(sorted(known))}")
    return obj


def _scales(where: str, obj: Mapping[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    s = obj.get("scales")
    if s is None:
        return base
    want_table(f"{where} scales", s, what="an object")
    out = dict(base)
    if "suffixes" in s:
        for i, x in enumerate(want_list(f"{where} scales.suffixes", s["suffixes"])):
            if len(want_strs(f"{where} scales.suffixes[{i}]", x, nonempty=True)) != 2:
                fail(f"{where} scales.suffixes[{i}]", "[scale suffix, weight suffix]", x)
        out["suffixes"] = tuple(tuple(x) for x in s["suffixes"])
    for key in ("quantized_dtypes", "scale_dtypes"):
        if key in s:
            out[key] = frozenset(_strs(f"{where} scales", s, key))
    if "fp8_block" in s:
        b = want_list(f"{where} scales.fp8_block", s["fp8_block"])
        if len(b) != 2:
            fail(f"{where} scales.fp8_block", "[rows, columns]", b)
        out["fp8_block"] = (want_int(f"{where} scales.fp8_block[0]", b[0], minimum=1),
                            want_int(f"{where} scales.fp8_block[1]", b[1], minimum=1))
    if "fp4_block" in s:
        out["fp4_block"] = want_int(f"{where} scales.fp4_block", s["fp4_block"], minimum=1)
    return out


def load_rules(user_file: str | os.PathLike[str] | None = None) -> Rules:
    """The built-in rules (``archviz/checkpoint/rules/*.json``), plus a user rules file when given; a field of the
    wrong type is a RulesError naming the file and the field (archviz.records.recordcheck)."""
    with refused_as(_rules_error):
        return _load_rules(user_file)


def _load_rules(user_file: str | os.PathLike[str] | None) -> Rules:
    common_path = BUILTIN_DIR / "common.json"
    common = _check_format(str(common_path), _read(common_path))
    scales = _scales(str(common_path), common, {})
    rulesets: list[Ruleset] = []
    files = [str(common_path)]
    for path in sorted(BUILTIN_DIR.glob("*.json")):
        if path.name == "common.json":
            continue
        obj = _check_format(str(path), _read(path))
        files.append(str(path))
        for i, rs in enumerate(_list(str(path), obj, "rulesets")):
            rulesets.append(_ruleset(f"{path.name} rulesets[{i}]", rs, path.name))
    rules = Rules(
        rulesets=tuple(rulesets),
        prefixes=_strs(str(common_path), common, "prefixes"),
        labels=_labels(str(common_path), common, "labels"),
        scale_suffixes=scales["suffixes"],
        quantized_dtypes=scales["quantized_dtypes"],
        scale_dtypes=scales["scale_dtypes"],
        fp8_block=scales["fp8_block"],
        fp4_block=scales["fp4_block"],
        files=tuple(files),
    )
    if user_file is not None:
        rules = _merge_user(rules, user_file)
    return rules


def _merge_user(rules: Rules, path: str | os.PathLike[str]) -> Rules:
    p = Path(os.fspath(path))
    where = str(p)
    obj = _check_format(where, _read(p))
    user_sets = [_ruleset(f"{where} rulesets[{i}]", rs, p.name) for i, rs in enumerate(_list(where, obj, "rulesets"))]
    top = Ruleset(name=str(obj.get("name") or f"user:{p.name}"), about=str(obj.get("about", "")),
                  provenance=str(obj.get("provenance", where)), file=p.name, renames=_renames(where, obj),
                  fuse=_fuse(where, obj), ignore=_labels(where, obj, "ignore"), explain=_explains(where, obj))
    has_top = bool(top.renames or top.fuse or top.ignore or top.explain)
    scales = _scales(where, obj, {"suffixes": rules.scale_suffixes, "quantized_dtypes": rules.quantized_dtypes,
                                  "scale_dtypes": rules.scale_dtypes, "fp8_block": rules.fp8_block,
                                  "fp4_block": rules.fp4_block})
    if not user_sets and not has_top and not obj.get("labels") and not obj.get("prefixes") and "scales" not in obj:
        raise RulesError(f"{where}: no rules in this file",
                         hint="give 'renames', 'fuse', 'ignore', 'explain', 'labels', 'prefixes' or 'rulesets'")
    prev = rules.user
    if prev is not None and has_top:
        top = Ruleset(name=f"{prev.name}+{top.name}", about=top.about, provenance=top.provenance, file=top.file,
                      renames=prev.renames + top.renames, fuse=prev.fuse + top.fuse, ignore=prev.ignore + top.ignore,
                      explain=prev.explain + top.explain)
    elif not has_top:
        top = prev  # type: ignore[assignment]
    return Rules(
        rulesets=tuple(user_sets) + rules.rulesets,
        prefixes=_strs(where, obj, "prefixes") + rules.prefixes,
        labels=_labels(where, obj, "labels") + rules.labels,
        scale_suffixes=scales["suffixes"],
        quantized_dtypes=scales["quantized_dtypes"],
        scale_dtypes=scales["scale_dtypes"],
        fp8_block=scales["fp8_block"],
        fp4_block=scales["fp4_block"],
        user=top,
        user_rulesets=rules.user_rulesets + tuple(r.name for r in user_sets),
        files=rules.files + (where,),
    )

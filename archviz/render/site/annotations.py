"""Annotations for the explorer: per node a title, a description, and claims tied to quoted lines of the code.

A TOML file (read with tomllib):

    [[node]]
    path = "layers.*.attn.wo_b"        # a glob over module paths; or node = "<node id>", or class = "RowParallelLinear"
    model = "dsv41like"                # optional: only this model (its name or its page folder)
    title = "Output projection"
    description = "Map the group features to the model width."

    [[node.claim]]
    id = "attention-forward"           # names the claim in errors
    file = "model.py"                  # a display path of the model's source (as pages show it)
    lines = [765, 789]                 # or "765-789", or one line number
    quote = "x = self.wo_b(o.flatten(2))"
    text = "Queries through the latent ... then to the model width."

Every claim is checked when the site is built: the quoted phrase (whitespace-insensitive) must still be inside the
cited lines, or the build fails naming the claim — evidence cannot silently go stale when the code moves.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ...errors import ArchvizError, option
from ...records.recordcheck import fail, refused_as, want_list, want_str, want_table

_NODE_KEYS = {"path", "node", "class", "model", "title", "description", "claim"}
_CLAIM_KEYS = {"id", "file", "lines", "quote", "text"}


@dataclass(frozen=True)
class Claim:
    id: str
    file: str
    start: int
    end: int
    quote: str
    text: str


@dataclass(frozen=True)
class NodeNote:
    selector: tuple[str, str]  # ("path" | "node" | "class", value)
    model: str | None
    title: str | None
    description: str | None
    claims: tuple[Claim, ...]

    def label(self) -> str:
        return f'{self.selector[0]} = "{self.selector[1]}"'


@dataclass(frozen=True)
class Annotations:
    source: str  # the file it came from
    notes: tuple[NodeNote, ...]

    @property
    def folder(self) -> str:
        return os.path.dirname(os.path.abspath(self.source))


def _bad(where: str, what: str, hint: str = "see the annotations format in archviz/render/site/annotations.py") -> ArchvizError:
    return ArchvizError(f"{where}: {what}", hint=hint)


def _lines(v: Any, path: str) -> tuple[int, int]:
    if type(v) is int:
        a = b = v
    elif type(v) is str and re.fullmatch(r"\s*\d+\s*(?:[-–]\s*\d+\s*)?", v):
        nums = [int(x) for x in re.findall(r"\d+", v)]
        a, b = nums[0], nums[-1]
    elif type(v) is list and len(v) == 2 and all(type(x) is int for x in v):
        a, b = v
    else:
        fail(path, '[first, last], "first-last" or a line number', v)
    if a < 1 or b < a:
        fail(path, "a range of lines (1-based, first ≤ last)", f"{a}–{b}")
    return a, b


def parse_annotations(data: Mapping[str, Any], source: str) -> Annotations:
    """The annotations of a decoded TOML document; a field of the wrong type, an unknown key or a missing one is an
    ArchvizError naming the file and the field (archviz.records.recordcheck)."""
    with refused_as(lambda m: _bad(os.path.basename(source), m)):
        return _parse(data, source)


def _parse(data: Mapping[str, Any], source: str) -> Annotations:
    want_table("", dict(data), {"node", "version"})
    notes = []
    for i, d in enumerate(want_list("node", data.get("node", [])), 1):
        where = f"node #{i}"
        want_table(where, d, _NODE_KEYS)
        sels = [k for k in ("path", "node", "class") if k in d]
        if len(sels) != 1:
            fail(where, "give exactly one of `path`, `node`, `class`")
        sel = (sels[0], want_str(f"{where}.{sels[0]}", d[sels[0]], nonempty=True))
        where = f"node[{sel[0]}={sel[1]!r}]"
        claims = []
        for j, c in enumerate(want_list(f"{where}.claim", d.get("claim", [])), 1):
            cwhere = f"{where} claim #{j}"
            want_table(cwhere, c, _CLAIM_KEYS)
            cid = want_str(f"{cwhere}.id", c.get("id"), optional=True, nonempty=True) or f"{sel[1]}#{j}"
            cwhere = f"claim {cid!r}"
            a, b = _lines(c.get("lines"), f"{cwhere}.lines")
            claims.append(Claim(id=cid, file=want_str(f"{cwhere}.file", c.get("file"), nonempty=True), start=a,
                                end=b, quote=want_str(f"{cwhere}.quote", c.get("quote"), nonempty=True),
                                text=want_str(f"{cwhere}.text", c.get("text"), optional=True) or ""))
        notes.append(NodeNote(selector=sel, model=want_str(f"{where}.model", d.get("model"), optional=True),
                              title=want_str(f"{where}.title", d.get("title"), optional=True),
                              description=want_str(f"{where}.description", d.get("description"), optional=True),
                              claims=tuple(claims)))
    ids = [c.id for n in notes for c in n.claims]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise _bad(os.path.basename(source), f"claim id {dup[0]!r} is used twice", hint="give every claim its own id")
    return Annotations(source=source, notes=tuple(notes))


def load_annotations(path: str) -> Annotations:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ArchvizError(f"{option('annotations')} needs Python 3.11+ (tomllib) or the tomli package",
                               hint="pip install tomli") from None
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ArchvizError(f"{option('annotations')} {path}: no such file", hint="check the path") from None
    except OSError as e:
        raise ArchvizError(f"{option('annotations')} {path}: cannot read ({e.strerror})",
                           hint="check the path") from None
    except tomllib.TOMLDecodeError as e:
        raise ArchvizError(f"{path}: not valid TOML ({e})", hint="fix the line it names") from None
    return parse_annotations(data, path)


# ---------------------------------------------------------------------------------------------------------------------
# Checking claims against the code


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def quoted_lines(lines: Sequence[str], start: int, end: int, quote: str) -> list[int] | None:
    """The fewest consecutive lines in [start, end] whose text holds the quote (whitespace-insensitive)."""
    q = _norm(quote)
    if not q or q not in _norm(" ".join(lines[start - 1:end])):
        return None
    best: tuple[int, int] | None = None
    for i in range(start, end + 1):
        acc = ""
        for j in range(i, end + 1):
            acc = _norm(acc + " " + lines[j - 1])
            if q in acc:
                if best is None or j - i < best[1] - best[0]:
                    best = (i, j)
                break
    assert best is not None
    return list(range(best[0], best[1] + 1))


def verify_claim(claim: Claim, lines: Sequence[str]) -> list[int]:
    """The quoted lines, or an ArchvizError naming the claim (and where the phrase went, when it is still there)."""
    where = f"annotation claim {claim.id!r} ({claim.file} lines {claim.start}–{claim.end})"
    if claim.end > len(lines):
        raise ArchvizError(f"{where}: the file has only {len(lines)} lines",
                           hint="the code moved: update the claim's lines")
    hit = quoted_lines(lines, claim.start, claim.end, claim.quote)
    if hit is not None:
        return hit
    anywhere = quoted_lines(lines, 1, len(lines), claim.quote)
    hint = (f"it is now at line{'s' if len(anywhere) > 1 else ''} {anywhere[0]}"
            f"{'–' + str(anywhere[-1]) if len(anywhere) > 1 else ''}: update the claim's lines" if anywhere else
            "the phrase is gone from the file: update the claim's quote and text")
    raise ArchvizError(f"{where}: the quoted phrase {claim.quote!r} is no longer inside the cited lines", hint=hint)


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def resolve_annotations(annotations: Annotations | str, models: Sequence[Any], code: Any) -> dict[str, dict[str, Any]]:
    """Per model (page folder) and node id: {"title", "description", "claims": [checked claims]}.

    `models` are the site's ModelSite objects (record, slug, nodes); `code` is its CodeBank (reads the files)."""
    if isinstance(annotations, str):
        annotations = load_annotations(annotations)
    out: dict[str, dict[str, Any]] = {}
    for note in annotations.notes:
        matched = 0
        rx = _glob(note.selector[1]) if note.selector[0] == "path" else None
        for ms in models:
            if note.model is not None and note.model not in (ms.record.source.name, ms.slug):
                continue
            files = dict(ms.record.source.files)
            for nid, n in ms.nodes.items():
                kind, value = note.selector
                if kind == "node":
                    hit = nid == value
                elif kind == "class":
                    hit = n.class_name == value
                else:
                    assert rx is not None
                    # a node made only of matching modules (a virtual node gathering wo_a and wo_b is not wo_b's)
                    hit = bool(n.paths) and all(rx.match(p) for p in n.paths)
                if not hit:
                    continue
                matched += 1
                slot = out.setdefault(ms.slug, {}).setdefault(nid, {"title": None, "description": None,
                                                                    "claims": []})
                slot["title"] = slot["title"] or note.title
                slot["description"] = slot["description"] or note.description
                for c in note.claims:
                    absolute = files.get(c.file)
                    if absolute is None:
                        cand = os.path.join(annotations.folder, c.file)
                        absolute = cand if os.path.isfile(cand) else None
                    if absolute is None:
                        raise ArchvizError(f"annotation claim {c.id!r}: {ms.record.source.name} has no source file "
                                           f"{c.file!r}",
                                           hint="name a file as the pages show it: "
                                                + ", ".join(sorted(files)[:6]))
                    key = code.key(absolute, c.file)
                    if key is None:
                        raise ArchvizError(f"annotation claim {c.id!r}: cannot read {c.file}",
                                           hint="the claim cannot be checked against the code")
                    ql = verify_claim(c, code.lines(absolute))
                    slot["claims"].append({"id": c.id, "file": c.file, "start": c.start, "end": c.end,
                                           "quote": c.quote, "text": c.text, "quoted_lines": ql,
                                           "absolute": absolute})
        if not matched:
            raise ArchvizError(f"{os.path.basename(annotations.source)}: annotation {note.label()}"
                               + (f" (model {note.model!r})" if note.model else "") + " matches no node",
                               hint="the module moved or was renamed: update the selector")
    return out


__all__ = ["Annotations", "Claim", "NodeNote", "load_annotations", "parse_annotations", "resolve_annotations",
           "verify_claim", "quoted_lines"]

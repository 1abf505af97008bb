"""What a gallery run takes from its previous output instead of rendering it again: a model's explorer pages and
a pair's diff page, each keyed by everything that determines it (the model's records as the records cache holds
them, its row's key, folder, dtype note, overrides and failures; archviz's version and code, torch, transformers and
the renderers' packages; every file of the templates folder, read for the key).

The previous run's state (each key, the files it wrote under it with their sha256, and a model's search entries)
is kept in the records cache folder (records.cache side files, private to the user, one per output folder), never
in the output folder: a reused file is read from the previous output and used only if its bytes hash to what that
state says this archviz wrote, so a folder someone else changed cannot make the gallery serve a file it did not
write. A file that fails the check, or is missing, has its model (or pair) rendered again. The site is written
whole into a temp folder and swapped into place as ever (render.site.write), reused files included."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping, Sequence

from ...errors import PYTHON_WORDS, ArchvizError, spelled_bytes
from ...records import cache as rc

_FORMAT = "archviz.gallery-state/1"
_RENDERERS = ("jinja2", "markupsafe", "pygments")
_MAX_PAGE_BYTES = 256 << 20


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _key(*parts: Any) -> str:
    return _sha(json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode())


def templates_fingerprint(folder: str) -> str:
    """The sha256 of every file of the templates folder (its pages, macros, stylesheet and script), by name."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            with open(full, "rb") as f:
                h.update(f"{os.path.relpath(full, folder)}\0{_sha(f.read())}\n".encode())
    return h.hexdigest()


def basis(templates: str) -> str:
    """What every page of a gallery depends on beside its own models: archviz (version and code), torch,
    transformers, Python, the renderers' packages and the templates' bytes."""
    import importlib.metadata

    renderers = {}
    for pkg in _RENDERERS:
        try:
            renderers[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            renderers[pkg] = None
    return _key(rc.versions(), renderers, templates_fingerprint(templates))


class Reuse:
    """The previous run's pages of the output folder `output`, and this run's, kept for the next one. `basis`:
    basis(templates); `words`: how the pages spell the options they name (written so: render.site.write). Counts
    what was reused and rendered (models and diff pages)."""

    def __init__(self, output: str, basis_: str, words: Mapping[str, str] = PYTHON_WORDS) -> None:
        self.output = os.path.abspath(output)
        self.words = words
        self.basis = _key(basis_, sorted(words.items()))
        self.name = "gallery\0" + self.output
        self.old = _read_state(rc.read_side(self.name))
        self.new: dict[str, dict[str, Any]] = {}
        self.reused = self.rendered = self.pages_reused = self.pages_rendered = 0

    def model_key(self, entry: Any, slug: str) -> str | None:
        """The key of a model's pages; None where they are not kept (no records digest: rendered every time)."""
        if entry.digest is None:
            return None
        return _key("model", self.basis, entry.digest, entry.key, slug, entry.dtype, list(entry.sets),
                    entry.failures, entry.parent)

    def pair_key(self, a: str | None, b: str | None, slugs: Sequence[str]) -> str | None:
        return None if a is None or b is None else _key("diff", self.basis, a, b, list(slugs))

    def _read(self, listed: Any) -> dict[str, bytes] | None:
        """The previous output's files `listed` (rel -> sha256), each as this archviz wrote it, or None."""
        if not isinstance(listed, dict) or not listed:
            return None
        out = {}
        from ...files.safeio import read_regular

        for rel, digest in listed.items():
            parts = rel.split("/") if isinstance(rel, str) else [".."]
            if any(p in ("", ".", "..") for p in parts):
                return None
            try:
                data = read_regular(os.path.join(self.output, *parts), max_bytes=_MAX_PAGE_BYTES, what="page")
            except (ArchvizError, OSError):
                return None
            if _sha(data) != digest:
                return None  # not the bytes this archviz wrote there
            out[rel] = data
        return out

    def model(self, key: str | None) -> tuple[dict[str, bytes], list[Any]] | None:
        """(files, search entries) of the model whose pages have `key`, as the previous run wrote them, or None."""
        kept = self.old.get(key) if key is not None else None
        files = self._read(kept.get("files")) if isinstance(kept, dict) else None
        if files is None or not isinstance(kept.get("search"), list):
            return None
        self.reused += 1
        self.new[key] = kept
        return files, kept["search"]

    def page(self, key: str | None) -> tuple[str, bytes] | None:
        """(its name, its bytes) of the diff page of `key`, as the previous run wrote it, or None."""
        kept = self.old.get(key) if key is not None else None
        files = self._read(kept.get("files")) if isinstance(kept, dict) else None
        if files is None or len(files) != 1:
            return None
        self.pages_reused += 1
        self.new[key] = kept
        return next(iter(files.items()))

    def rendered_model(self, key: str | None, files: Mapping[str, bytes], search: list[Any]) -> None:
        self.rendered += 1
        if key is not None:
            self.new[key] = {"files": {rel: _sha(spelled_bytes(data, self.words)) for rel, data in files.items()},
                             "search": search}

    def rendered_page(self, key: str | None, rel: str, data: bytes) -> None:
        self.pages_rendered += 1
        if key is not None:
            self.new[key] = {"files": {rel: _sha(spelled_bytes(data, self.words))}}

    def save(self) -> str | None:
        """Keep this run's state for the next run on the same output folder (after the site was written)."""
        data = json.dumps({"format": _FORMAT, "output": self.output, "kept": self.new}, sort_keys=True,
                          separators=(",", ":")).encode()
        return rc.write_side(self.name, data)


def _read_state(data: bytes | None) -> dict[str, Any]:
    if not data:
        return {}
    try:
        state = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(state, dict) or state.get("format") != _FORMAT or not isinstance(state.get("kept"), dict):
        return {}
    return state["kept"]


__all__ = ["Reuse", "basis", "templates_fingerprint"]

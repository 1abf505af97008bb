"""The records cache: a command on an unchanged source reuses the records it made last time, without importing torch.

An entry is one file in ``$XDG_CACHE_HOME/archviz/`` (default ``~/.cache/archviz/``, made mode 0700), named by the
sha256 of its *key*: the command's kind, the source as given and the working folder, every option that changes the
records (``overrides``, ``input``, ``shapes``, ``train``, ...), the versions of archviz (and a fingerprint of its
own code: an editable checkout changes without a new version), torch and transformers (read with
``importlib.metadata``, nothing imported) and the Python version. What the key cannot know before the build is which
files the model's code is made of; so each entry vouches for a list of files by sha256 (the source and its
``config``/``tokenizer``/``kernel_rules``/``names`` files, the ``.py`` files beside a model.py, every file
the walk cited in ``file_facts``, and every file of the model's own code imported while it was built), and a lookup
hashes them again: any difference, a missing file, or any other key, and the entry is not used.

The file: a first line of JSON (format, key, files, the size and sha256 of the records), then the records as
`archviz walk -o` writes them (``archviz.records/3``). It is data, read as a records file is (a bounded read of a
regular file, then ``archviz.records.loads``); an entry that cannot be read (truncated, corrupted, another format)
is reported by :func:`lookup` as a note and rebuilt, never an error. An entry may hold a failure instead
(:func:`store_failure`: a build that failed, its reasons in the first line, no records), keyed and vouched for the
same way: `archviz gallery` does not try again what failed with nothing changed. Writes go to a temporary file in
the cache folder, renamed into place: a killed write leaves no entry, and two runs writing the same entry both
succeed (the last rename wins; both wrote the same records). The folder is bounded: at most :data:`MAX_ENTRIES`
entries and :data:`MAX_BYTES` bytes, the least recently used removed first.

Beside the entries, a command may keep one *side file* per purpose (:func:`write_side`, :func:`read_side`; the
:data:`MAX_SIDE` newest kept): `archviz gallery` keeps there, per output folder, which pages it wrote from which
records, so that its next run renders only what changed (archviz.render.site.gallery_reuse).

``ARCHVIZ_NO_CACHE=1`` (or a command's no-cache option) skips the cache: nothing is read or written.
``ARCHVIZ_CACHE_ENTRIES=N`` keeps N entries (bytes in proportion) where N is above the bound: `archviz gallery` sets
it to hold every model it counts.

Pure library code: nothing here prints.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from typing import Any, Iterable, Mapping

from ..errors import ArchvizError
from ..gcpause import collector_paused
from ..files.outputs import write_file

__all__ = ["FORMAT", "MAX_BYTES", "MAX_ENTRIES", "Lookup", "cache_dir", "disabled", "entry_path", "key_id",
           "limits", "lookup", "make_key", "new_code_files", "read_side", "record_files", "sha256_file", "source_files",
           "store", "store_failure", "traceback_files", "untrusted", "versions", "write_side"]

FORMAT = "archviz.cache/1"
MAX_ENTRIES = 32  # entries kept; the least recently used go first
MAX_BYTES = 512 << 20  # bytes kept in all (a 60,000-module model's entry is about 3.5 MB)
_MAX_FILE_BYTES = 64 << 20  # a file hashed for an entry, and an entry read back, are never bigger
_SUFFIX = ".records"
_PACKAGES = ("torch", "transformers")


def disabled() -> bool:
    """True when ``ARCHVIZ_NO_CACHE`` is set to anything but empty or 0."""
    return os.environ.get("ARCHVIZ_NO_CACHE", "") not in ("", "0")


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # the XDG spec: a relative value is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "archviz")


_ARCHVIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the archviz package, this file's parent's


def _own_code_fingerprint() -> str:
    """Name, size and mtime of every module of archviz itself: an edited checkout is another archviz."""
    root = _ARCHVIZ
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".json", ".toml")):
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                h.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def versions() -> dict[str, str]:
    """archviz (version and code fingerprint), torch, transformers and Python: read without importing the packages."""
    import importlib.metadata

    from .. import __version__

    out = {"archviz": __version__, "archviz_code": _own_code_fingerprint(),
           "python": ".".join(map(str, sys.version_info[:3])) + f" {sys.implementation.name}"}
    for pkg in _PACKAGES:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def make_key(kind: str, spec: str, options: Mapping[str, Any], versions_: Mapping[str, str] | None = None
             ) -> dict[str, Any]:
    """The key of a command's records: `kind` (which command family made them), the source as given, the working
    folder (a relative path or a factory's module is found from it), the options (JSON-able), the package versions."""
    return {"format": FORMAT, "kind": kind, "spec": spec, "cwd": os.getcwd(),
            "pythonpath": os.environ.get("PYTHONPATH", ""), "options": dict(sorted(options.items())),
            "versions": dict(versions_ if versions_ is not None else versions())}


def key_id(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def entry_path(key: Mapping[str, Any]) -> str:
    return os.path.join(cache_dir(), key_id(key)[:40] + _SUFFIX)


def sha256_file(path: str) -> str | None:
    """A regular file's sha256, or None (missing, not regular, unreadable, too big)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_FILE_BYTES:
            return None
        h = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def source_files(source: str, *given: str | None) -> list[str]:
    """The files a source is read from, known before its build: the source itself (a model.py, config.json or a
    model folder's config.json and .py files), the .py files beside a model.py (the helpers it imports), and the
    given option files (config, tokenizer, kernel_rules, names). Absolute paths."""
    found: list[str] = []
    path = os.path.abspath(source)
    if os.path.isdir(path):
        folder = path
    elif os.path.isfile(path):
        found.append(path)
        folder = os.path.dirname(path) if path.endswith(".py") else None
    else:
        folder = None
    if folder is not None:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        found += [os.path.join(folder, n) for n in names[:500] if n.endswith(".py") or n == "config.json"]
    for g in given:
        if g:
            found.append(os.path.abspath(g))
    return sorted(set(found))


def record_files(record: Any) -> dict[str, str]:
    """absolute path -> sha256 of every file the records vouch for (`file_facts`, with `files` naming each)."""
    where = dict(record.source.files)
    out = {}
    for display, facts in record.source.file_facts:
        absolute = where.get(display)
        digest = facts.get("sha256") if isinstance(facts, Mapping) else None
        if absolute and isinstance(digest, str):
            out[os.path.abspath(absolute)] = digest
    return out


def _installed_roots() -> tuple[str, ...]:
    import sysconfig

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(name)
        if p:
            roots.add(p)
    roots.add(_ARCHVIZ)  # archviz itself: its version and fingerprint cover it
    return tuple(sorted(os.path.join(os.path.realpath(r), "") for r in roots))


def _own_code(paths: Iterable[str]) -> list[str]:
    """Of `paths`, the .py files of the model's own code: not installed packages, the standard library or archviz."""
    roots = _installed_roots()
    out = set()
    for f in paths:
        if not isinstance(f, str) or not f.endswith(".py"):
            continue
        real = os.path.realpath(f)
        if "site-packages" in real or "dist-packages" in real or real.startswith(roots):
            continue
        out.add(os.path.abspath(f))
    return sorted(out)


def new_code_files(before: Iterable[str]) -> list[str]:
    """The source files of the modules imported since `before` (a snapshot of `sys.modules`' names) that are the
    model's own code: not installed packages, the standard library or archviz."""
    seen = set(before)
    return _own_code(getattr(module, "__file__", None) for name, module in list(sys.modules.items())
                     if name not in seen)


def traceback_files(error: BaseException) -> list[str]:
    """The model's own code files an exception's traceback (and the exceptions it was raised from) passed through:
    a module whose import failed is not in `sys.modules`, but its frames name it."""
    import traceback

    files: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        files += [f.filename for f in traceback.extract_tb(e.__traceback__)]
        e = e.__cause__ or e.__context__
    return _own_code(files)


class Lookup:
    """What a lookup found: `record` (None on a miss), `failures` (an entry of store_failure's: the build failed
    with nothing since changed), `note` (an entry there but unreadable: say it once), and `digest` (with a record:
    the sha256 of the records as the entry holds them, which identifies them to a caller keeping what it made of
    them, as `archviz gallery` keeps its pages)."""

    __slots__ = ("record", "note", "path", "failures", "digest")

    def __init__(self, record: Any = None, note: str | None = None, path: str | None = None,
                 failures: list[Any] | None = None, digest: str | None = None) -> None:
        self.record, self.note, self.path, self.failures, self.digest = record, note, path, failures, digest


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def untrusted(folder: str) -> str | None:
    """Why the cache folder cannot be trusted (another user owns it, or others may write in it: anyone could plant
    an entry there that archviz would serve as its own), or None."""
    try:
        st = os.lstat(folder)
    except OSError:
        return None  # none yet: made mode 0700 when first written
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder"
    if st.st_uid != os.getuid():
        return f"{folder} belongs to another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others may write in {folder}"
    return None


def lookup(key: Mapping[str, Any]) -> Lookup:
    """The records of `key` if an entry holds them and every file it vouches for still hashes the same; never from
    a folder or an entry that another user could have written."""
    path = entry_path(key)
    why = untrusted(os.path.dirname(path))
    if why:
        return Lookup(note=f"the records cache is not used: {why}", path=path)
    try:
        st = os.lstat(path)
    except OSError:
        return Lookup(path=path)
    bad = Lookup(note=f"cache entry {path} unreadable; rebuilt", path=path)
    if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_FILE_BYTES or st.st_uid != os.getuid():
        return bad
    from .types import loads
    from .recordcheck import want_table
    from ..files.safeio import read_regular

    try:
        data = read_regular(path, max_bytes=_MAX_FILE_BYTES, what="cache entry")
        head, sep, body = data.partition(b"\n")
        if not sep:
            return bad
        header = want_table("header", json.loads(head))  # a SchemaError (a ValueError): damaged, rebuilt
        if header.get("format") != FORMAT:
            return bad
        if header.get("key") != json.loads(json.dumps(key)):
            return Lookup(path=path)  # another key's entry (a hash prefix shared): a miss, not damage
        files = want_table("files", header.get("files"))
        if len(body) != header.get("records_bytes") or hashlib.sha256(body).hexdigest() != header.get("records_sha256"):
            return bad
        for file, digest in files.items():
            if sha256_file(file) != digest:
                return Lookup(path=path)  # an input changed: rebuilt, and this entry replaced
        failures = header.get("failures")
        if failures is not None:
            return Lookup(failures=list(failures), path=path) if isinstance(failures, list) and not body else bad
        with collector_paused():  # a million small acyclic objects: the cyclic collector would only rescan them
            record = loads(body.decode("utf-8"))
    except (ArchvizError, OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
        return bad
    try:
        os.utime(path)  # least recently used goes first
    except OSError:
        pass
    return Lookup(record=record, path=path, digest=header["records_sha256"])


def _ensure_dir() -> str:
    folder = cache_dir()
    os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{folder} is not a folder")
    if st.st_uid != os.getuid():
        raise OSError(f"{folder} belongs to another user")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(folder, 0o700)
    return folder


def store(key: Mapping[str, Any], record: Any, files: Mapping[str, str]) -> str | None:
    """Write the entry of `key`: the records, vouched for by `files` (absolute path -> sha256). Returns a note when
    the cache could not be written (the command itself has its records either way), else None."""
    from .types import dumps_compact

    return _write(key, files, lambda: (dumps_compact(record).encode("utf-8"), {}))


def store_failure(key: Mapping[str, Any], failures: list[Any], files: Mapping[str, str]) -> str | None:
    """Write the entry of `key` for a build that failed: its `failures` (JSON-able), vouched for by `files` as
    records are; lookup returns them while nothing changed. Returns a note when it could not be written."""
    return _write(key, files, lambda: (b"", {"failures": list(failures)}))


def _write(key: Mapping[str, Any], files: Mapping[str, str], content: Any) -> str | None:
    try:
        folder = _ensure_dir()
        body, more = content()
        header = {"format": FORMAT, "key": key, "files": dict(sorted(files.items())), "records_bytes": len(body),
                  "records_sha256": hashlib.sha256(body).hexdigest(), **more}
        data = json.dumps(header, sort_keys=True, separators=(",", ":")).encode() + b"\n" + body
        if len(data) > _MAX_FILE_BYTES:
            return None  # too big to be read back: not cached
        write_file(entry_path(key), data, flag="records cache", mode=0o600)
        evict(folder, *limits())
    except ArchvizError as e:
        return f"records cache not written ({e.message})"
    except OSError as e:
        return f"records cache not written ({e.strerror or e})"
    return None


def limits() -> tuple[int, int]:
    """(entries, bytes) the folder keeps: the bounds, or ARCHVIZ_CACHE_ENTRIES entries where that is more, with
    bytes in the same proportion."""
    try:
        n = int(os.environ.get("ARCHVIZ_CACHE_ENTRIES", "") or 0)
    except ValueError:
        n = 0
    if n <= MAX_ENTRIES:
        return MAX_ENTRIES, MAX_BYTES
    return n, MAX_BYTES // MAX_ENTRIES * n


def evict(folder: str, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES, suffix: str = _SUFFIX) -> None:
    """Keep the newest entries (files ending in `suffix`) within both bounds; remove the rest."""
    entries = []
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.endswith(suffix):
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            entries.append((st.st_mtime_ns, name, st.st_size))
    entries.sort(reverse=True)
    total = 0
    for i, (_, name, size) in enumerate(entries):
        total += size
        if i >= max_entries or total > max_bytes:
            _remove(os.path.join(folder, name))


_SIDE = ".state"
MAX_SIDE = 8  # side files kept, the least recently written removed first
_MAX_SIDE_BYTES = 64 << 20


def _side_path(name: str) -> str:
    return os.path.join(cache_dir(), hashlib.sha256(name.encode()).hexdigest()[:40] + _SIDE)


def read_side(name: str) -> bytes | None:
    """The side file `name` of the cache folder, or None (none, unreadable, not a regular file, too big): the state
    a command keeps beside the entries, such as what `archviz gallery` wrote to an output folder. None while the
    cache is disabled."""
    if disabled():
        return None
    from ..files.safeio import read_regular

    if untrusted(cache_dir()):
        return None
    try:
        return read_regular(_side_path(name), max_bytes=_MAX_SIDE_BYTES, what="cache side file")
    except (ArchvizError, OSError):
        return None


def write_side(name: str, data: bytes) -> str | None:
    """Write the side file `name` (atomically, mode 0600; the :data:`MAX_SIDE` newest kept). Returns a note when it
    could not be written, else None; nothing while the cache is disabled."""
    if disabled() or len(data) > _MAX_SIDE_BYTES:
        return None
    try:
        folder = _ensure_dir()
        write_file(_side_path(name), data, flag="records cache", mode=0o600)
        evict(folder, MAX_SIDE, MAX_SIDE * _MAX_SIDE_BYTES, suffix=_SIDE)
    except ArchvizError as e:
        return f"records cache not written ({e.message})"
    except OSError as e:
        return f"records cache not written ({e.strerror or e})"
    return None

"""Writing a site atomically: files go to a temp folder beside the output, which is swapped into place, and stale
temp folders of killed builds are swept.

Only a folder archviz made is ever replaced: its marker (`.archviz-site`) lists every file the build wrote with its
sha256, and the folder must hold exactly those files, unchanged (a file merely named `.archviz-site` in a folder of
one's own proves nothing). A site whose marker predates the list is accepted when every file it holds is one a site
has (pages, code, search index, static files)."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import stat
import re
import shutil
import sys
from typing import Mapping

from ...errors import ArchvizError

MARKER = ".archviz-site"  # a file in every site's root: only folders holding it are ever replaced


def _renameat2_exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd = -100
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), 2) == 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale(parent: str, base: str) -> None:
    prefix = f".{base}.archviz-"
    try:
        entries = os.listdir(parent)
    except OSError:
        return
    for e in entries:
        if not e.startswith(prefix):
            continue
        m = re.match(r"^\.(.+)\.archviz-(?:tmp|old)-(\d+)(?:-\d+)?$", e)
        if m and m.group(1) == base and not _pid_alive(int(m.group(2))):
            shutil.rmtree(os.path.join(parent, e), ignore_errors=True)


def _write_file(folder: str, rel: str, data: bytes) -> None:
    path = os.path.join(folder, *rel.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


_MAX_MARKER_BYTES = 64 << 20
# what a site held before its marker listed its files (site 1 without "files")
_SITE_FILE = re.compile(r"^(index\.html|search\.js|code/[0-9a-f]{12}\.js|static/[\w./-]+|[\w.-]+/index\.html|"
                        r"[\w.-]+/n/[\w./-]+\.html)$")


def marker_bytes(files: Mapping[str, bytes], models: list[str]) -> bytes:
    """The marker of a site holding `files`: archviz's, with every file's sha256."""
    listed = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items() if rel != MARKER}
    return (json.dumps({"generator": "archviz", "site": 1, "models": models, "files": listed}, sort_keys=True,
                       separators=(",", ":")) + "\n").encode()


def _not_archviz_made(output: str) -> str | None:
    """Why the folder `output` is not a site archviz wrote (None: it is, untouched since)."""
    marker = os.path.join(output, MARKER)
    try:
        st = os.lstat(marker)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_MARKER_BYTES:
            return f"its {MARKER} is not archviz's marker"
        with open(marker, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return "it holds no archviz marker"
    except (OSError, ValueError, RecursionError):
        return f"its {MARKER} is not archviz's marker"
    if not isinstance(data, dict) or data.get("generator") != "archviz" or data.get("site") != 1:
        return f"its {MARKER} is not archviz's marker"
    listed = data.get("files")
    if listed is not None and not isinstance(listed, dict):
        return f"its {MARKER} is not archviz's marker"
    for dirpath, dirnames, filenames in os.walk(output):
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                return f"it holds a link archviz did not write ({os.path.relpath(os.path.join(dirpath, d), output)})"
        for fn in filenames:
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, output).replace(os.sep, "/")
            if rel == MARKER:
                continue
            try:
                regular = stat.S_ISREG(os.lstat(full).st_mode)
            except OSError:
                regular = False
            if not regular:
                return f"it holds {rel}, which archviz did not write"
            if listed is None:
                if not _SITE_FILE.match(rel):
                    return f"it holds {rel}, which archviz did not write"
                continue
            want = listed.get(rel)
            if not isinstance(want, str):
                return f"it holds {rel}, which archviz did not write"
            h = hashlib.sha256()
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != want:
                return f"{rel} was changed since archviz wrote it"
    return None


def check_target(output: str) -> None:
    if os.path.lexists(output):
        if not os.path.isdir(output) or os.path.islink(output):
            raise ArchvizError(f"{output}: exists and is not a folder", hint="choose another -o folder")
        if os.listdir(output):
            why = _not_archviz_made(output)
            if why is not None:
                raise ArchvizError(f"{output}: a folder that is not an archviz site ({why}); refusing to replace it",
                                   hint="give an empty or new folder, or move your files out of it")


def write_site(files: Mapping[str, bytes], output: str) -> None:
    """Write every file into a temp folder beside `output`, then swap it into place (atomic on Linux)."""
    output = os.path.abspath(output)
    parent, base = os.path.dirname(output), os.path.basename(output)
    os.makedirs(parent, exist_ok=True)
    check_target(output)
    _clean_stale(parent, base)
    tmp = os.path.join(parent, f".{base}.archviz-tmp-{os.getpid()}")
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.mkdir(tmp)
    try:
        for rel in sorted(files):
            _write_file(tmp, rel, files[rel])
        os.chmod(tmp, 0o755)
        if os.path.isdir(output):
            if _renameat2_exchange(tmp, output):
                shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous site
                return
            old = os.path.join(parent, f".{base}.archviz-old-{os.getpid()}")
            os.rename(output, old)
            try:
                os.rename(tmp, output)
            except BaseException:
                os.rename(old, output)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, output)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

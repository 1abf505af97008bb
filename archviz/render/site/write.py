"""Writing a site atomically: files go to a temp folder beside the output, which is swapped into place; only
a folder holding archviz's marker is ever replaced, and stale temp folders of killed builds are swept."""

from __future__ import annotations

import ctypes
import os
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


def check_target(output: str) -> None:
    if os.path.lexists(output):
        if not os.path.isdir(output) or os.path.islink(output):
            raise ArchvizError(f"{output}: exists and is not a folder", hint="choose another -o folder")
        if os.listdir(output) and not os.path.isfile(os.path.join(output, MARKER)):
            raise ArchvizError(f"{output}: a folder that is not an archviz site; refusing to replace it",
                               hint="give an empty or new folder, or a folder an earlier `archviz build` wrote")


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

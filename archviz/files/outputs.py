"""Where an output may go (`-o`), and the one writer of every file and folder archviz writes: records, manifests,
cache entries (`write_file`), sites and diff pages (`write_folder`).

archviz replaces only what is safe to replace: a regular file (never a device, a FIFO, a socket or a folder), and
never through a symlink (the link would be replaced, or its target written: neither is what `-o` asked for); a
folder only when the caller vouches it wrote it (the site's marker, render/site/write.py), never a link to one. The
new file or folder is written beside the target under a temporary name and renamed (a folder swapped) into place,
so a killed run leaves the old one whole; a file's mode follows the umask, as any file a program creates, unless
the caller asks for less; and temporaries that killed runs left behind are swept on the next write into that
folder. Every refusal, and every OS error on the way (a read-only folder, /proc, a full disk), is an `ArchvizError`
naming the path and the fix: exit 2, one line.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import sys
from typing import Callable, Mapping

from ..errors import ArchvizError

_TMP = re.compile(r"^\.archviz-(\d+)-[0-9a-f]{8}\.tmp$")


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return word
    return "not a regular file"


def check_file_target(path: str, flag: str = "-o") -> None:
    """Refuse an output path archviz must not replace: anything but a regular file, or a missing parent folder."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise ArchvizError(f"{flag} {path}: cannot look at it ({e.strerror})", hint="choose another output path")
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = _kind(st.st_mode)
        hint = ("give the path it points to, or remove the link" if stat.S_ISLNK(st.st_mode)
                else "give a file name inside it" if stat.S_ISDIR(st.st_mode) else "give a regular file's path")
        raise ArchvizError(f"{flag} {path}: is {what}; archviz writes only regular files", hint=hint)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ArchvizError(f"{flag} {path}: the folder {folder} does not exist", hint="create it first")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _failed(flag: str, path: str, e: OSError) -> ArchvizError:
    if e.errno == errno.ENOSPC:
        return ArchvizError(f"{flag} {path}: writing failed (no space left on the device)",
                            hint="free space or choose another path")
    return ArchvizError(f"{flag} {path}: writing failed ({e.strerror or e})", hint="choose a folder you can write to")


def sweep_temporaries(folder: str) -> None:
    """Remove the temporary files of writes into `folder` whose process is gone (a run killed mid-write)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = _TMP.match(name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


def write_file(path: str, data: bytes, flag: str = "-o", mode: int = 0o666) -> None:
    """Write `data` to `path` atomically: a temp file beside it, renamed into place. Mode: `mode` less the umask."""
    check_file_target(path, flag)
    folder = os.path.dirname(os.path.abspath(path))
    sweep_temporaries(folder)
    tmp = os.path.join(folder, f".archviz-{os.getpid()}-{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    except OSError as e:
        raise ArchvizError(f"{flag} {path}: cannot write in {folder} ({e.strerror})",
                           hint="choose a folder you can write to") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        check_file_target(path, flag)  # nothing became a link or a device while we wrote
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _failed(flag, path, e) from None
        raise


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


def _sweep_folders(parent: str, base: str) -> None:
    """Remove the temp folders of writes of `base` whose process is gone."""
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


def _write_member(folder: str, rel: str, data: bytes) -> None:
    """One file of a folder being written (into the temp folder only archviz made: no link, no device in it)."""
    path = os.path.join(folder, *rel.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "xb") as f:
        f.write(data)


def check_folder_target(output: str, not_ours: Callable[[str], str | None], flag: str = "-o") -> None:
    """Refuse a folder output archviz must not replace: a link, anything but a folder, or a folder holding files
    `not_ours(output)` says archviz did not write (its reason)."""
    try:
        st = os.lstat(output)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ArchvizError(f"{flag} {output}: cannot look at it ({e.strerror})", hint="choose another output folder")
    if not stat.S_ISDIR(st.st_mode):
        raise ArchvizError(f"{flag} {output}: exists and is {_kind(st.st_mode)}, not a folder archviz wrote",
                           hint="choose another output folder")
    try:
        why = not_ours(output) if os.listdir(output) else None
    except OSError as e:
        raise ArchvizError(f"{flag} {output}: cannot look at it ({e.strerror})", hint="choose another output folder")
    if why is not None:
        raise ArchvizError(f"{flag} {output}: a folder that is not an archviz site ({why}); refusing to replace it",
                           hint="give an empty or new folder, or move your files out of it")


def write_folder(files: Mapping[str, bytes], output: str, not_ours: Callable[[str], str | None],
                 flag: str = "-o") -> None:
    """Write `files` (relative path -> bytes) into a temp folder beside `output`, then swap it into place (atomic on
    Linux); `output`'s parents are made. The previous folder survives any failure."""
    output = os.path.abspath(output)
    parent, base = os.path.dirname(output), os.path.basename(output)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise _failed(flag, output, e) from None
    check_folder_target(output, not_ours, flag)
    _sweep_folders(parent, base)
    tmp = os.path.join(parent, f".{base}.archviz-tmp-{os.getpid()}")
    try:
        if os.path.lexists(tmp):
            shutil.rmtree(tmp)
        os.mkdir(tmp)
    except OSError as e:
        raise _failed(flag, output, e) from None
    try:
        for rel in sorted(files):
            _write_member(tmp, rel, files[rel])
        os.chmod(tmp, 0o755)
        check_folder_target(output, not_ours, flag)  # nothing became a link or someone's folder while we wrote
        if os.path.isdir(output):
            if _renameat2_exchange(tmp, output):
                shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous folder
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
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise _failed(flag, output, e) from None
        raise

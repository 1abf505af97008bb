"""Where an output may go (`-o`), and writing one file there atomically.

archviz replaces only what is safe to replace: a regular file (never a device, a FIFO, a socket or a folder), and
never through a symlink (the link would be replaced, or its target written: neither is what `-o` asked for). The new
file is written beside the target under a temporary name and renamed into place, so a killed run leaves the old file
whole; its mode follows the umask, as any file a program creates; and temporary files that killed runs left behind
are swept on the next write into that folder. Every refusal is an `ArchvizError` naming the path and the fix.
"""

from __future__ import annotations

import errno
import os
import re
import stat

from .errors import ArchvizError

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


def write_file(path: str, data: bytes, flag: str = "-o") -> None:
    """Write `data` to `path` atomically: a temp file beside it, renamed into place. Mode follows the umask."""
    check_file_target(path, flag)
    folder = os.path.dirname(os.path.abspath(path))
    sweep_temporaries(folder)
    tmp = os.path.join(folder, f".archviz-{os.getpid()}-{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
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
        if isinstance(e, OSError) and not isinstance(e, ArchvizError):
            why = "no space left on the device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
            raise ArchvizError(f"{flag} {path}: writing failed ({why})", hint="free space or choose another path") \
                from None
        raise

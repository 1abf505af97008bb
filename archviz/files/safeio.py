"""Bounded reads of untrusted input files: regular files only, never more than a stated number of bytes.

A data file archviz reads (a checkpoint shard, an index, a manifest, a config, a rules file) may be anything a path
can name: a FIFO (``open`` would block until a writer comes), ``/dev/zero`` (``read()`` never ends), a device, a
folder, or a gzip bomb. Every reader here stats the path first, opens it without blocking, checks again on the open
descriptor (the path may have been swapped in between) that it is a regular file, and reads at most ``max_bytes``;
gzip'd data is inflated in bounded steps. Failures raise the caller's :class:`~archviz.errors.ArchvizError`
subclass with one line: what, where, what to do.

Pure library code: nothing here prints.
"""

from __future__ import annotations

import os
import stat
import zlib
from typing import BinaryIO

from archviz.errors import ArchvizError

__all__ = ["GZIP_MAGIC", "MiB", "gunzip_bounded", "kind_of", "open_regular", "read_bounded", "read_regular"]

MiB = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
_STEP = 1 << 20  # inflate at most this much per step

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def _refuse(where: str, mode: int, what: str, error: type[ArchvizError]) -> ArchvizError:
    return error(f"{where}: is {kind_of(mode)}, not a regular file", hint=f"pass the {what} file itself")


def open_regular(path: str | os.PathLike[str], *, what: str = "input", error: type[ArchvizError] = ArchvizError
                 ) -> BinaryIO:
    """Open ``path`` for reading in binary mode (unbuffered) if and only if it is a regular file.

    The path is stat'ed before it is opened, so a FIFO, a device or a folder is refused without being opened; the
    open itself does not block (``O_NONBLOCK``), and the descriptor is checked again with ``fstat``."""
    where = os.fspath(path)
    try:
        st = os.stat(where)
    except FileNotFoundError:
        raise error(f"{where}: no such file", hint="check the path") from None
    except OSError as e:
        raise error(f"{where}: cannot read ({e.strerror})", hint="check the path and its permissions") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(where, st.st_mode, what, error)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(where, flags)
    except OSError as e:
        raise error(f"{where}: cannot open ({e.strerror})", hint="check permissions") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
            raise _refuse(where, st.st_mode, what, error)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_bounded(f: BinaryIO, n: int) -> bytes:
    """Up to ``n`` bytes from ``f`` (fewer only at end of file), tolerating short reads."""
    chunks = []
    left = n
    while left > 0:
        chunk = f.read(min(left, 16 * MiB))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_regular(path: str | os.PathLike[str], *, max_bytes: int, what: str = "input",
                 error: type[ArchvizError] = ArchvizError) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes; a bigger file is refused before it is read."""
    where = os.fspath(path)
    with open_regular(where, what=what, error=error) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise _too_big(where, size, max_bytes, what, error)
        data = read_bounded(f, max_bytes + 1)
    if len(data) > max_bytes:  # it grew while being read
        raise _too_big(where, len(data), max_bytes, what, error)
    return data


def _too_big(where: str, size: int, limit: int, what: str, error: type[ArchvizError]) -> ArchvizError:
    return error(f"{where}: {size:,}+ bytes, over the {limit:,}-byte limit for a {what} file",
                 hint=f"pass a real {what} file (archviz refuses bigger ones so a bad input cannot exhaust memory)")


def gunzip_bounded(raw: bytes, *, max_bytes: int, where: str, what: str = "input",
                   error: type[ArchvizError] = ArchvizError) -> bytes:
    """Inflate gzip data (every member) to at most ``max_bytes`` bytes; more is refused as soon as it appears, so a
    gzip bomb costs at most ``max_bytes`` of memory."""
    out: list[bytes] = []
    total = 0
    data = raw
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            buf = data
            while True:
                chunk = d.decompress(buf, min(_STEP, max_bytes + 1 - total))
                total += len(chunk)
                out.append(chunk)
                if total > max_bytes:
                    raise error(f"{where}: inflates to more than the {max_bytes:,}-byte limit for a {what} file",
                                hint=f"this is not a real {what} (a gzip bomb?); pass the file archviz wrote")
                if d.eof:
                    break
                buf = d.unconsumed_tail
                if not buf and not chunk:
                    raise error(f"{where}: damaged gzip data (truncated)", hint="copy the file again")
            data = d.unused_data
            if data and data.strip(b"\x00") == b"":  # trailing zero padding, as gzip(1) tolerates
                break
    except zlib.error as e:
        raise error(f"{where}: damaged gzip data ({e})", hint="copy the file again") from None
    return b"".join(out)

"""Tools of the hostile corpus: raw safetensors bytes, special files, and the CLI run under a stopwatch.

Everything here is written by these tests; nothing is fetched.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Every refusal must come within this many seconds (the issue's bound).
REFUSE_WITHIN_S = 10.0
#: A model source that builds in a blink: torch.nn.Linear(4, 2) (weight [2, 4], bias [2]).
LINEAR = ("torch.nn:Linear", "--set", "in_features=4", "--set", "out_features=2")
LINEAR_TENSORS = {"weight": ("F32", [2, 4]), "bias": ("F32", [2])}


def shard_bytes(header_text: str, data: bytes = b"", *, prefix: int | None = None) -> bytes:
    """``<u64 length><header text><data>``; the text may hold lone surrogates (written as the bytes they would be)."""
    h = header_text.encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(h) if prefix is None else prefix) + h + data


def entries_text(tensors: dict[str, tuple[str, list[int]]], sizes: dict[str, int]) -> tuple[str, int]:
    """Header JSON (compact, in order) laying the tensors out back to back; and the data size."""
    import json

    pos = 0
    parts = []
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        entry = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + n]}
        parts.append(f"{json.dumps(name)}:" + json.dumps(entry, separators=(",", ":")))
        pos += n
    return "{" + ",".join(parts) + "}", pos


BYTES = {"F32": 4, "BF16": 2, "U8": 1, "I8": 1, "F16": 2, "I64": 8}


def write_shard(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> Path:
    text, size = entries_text(tensors, BYTES)
    path.write_bytes(shard_bytes(text, b"\0" * size))
    return path


def make_special(path: Path, kind: str) -> Path:
    """A file system object of ``kind`` at ``path``: fifo, chardev (a /dev/zero twin, via mknod), socket, folder,
    or a symlink to a FIFO."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "chardev":
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # the numbers of /dev/zero
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        here = os.getcwd()
        os.chdir(os.path.dirname(str(path)))  # bound by its bare name: a socket's path is limited to 107 bytes,
        try:  # which pytest-xdist's deeper temp folders pass
            s.bind(os.path.basename(str(path)))
        finally:
            os.chdir(here)
            s.close()
    elif kind == "folder":
        path.mkdir()
    elif kind == "symlink-to-fifo":
        target = path.with_name(path.name + ".target")
        os.mkfifo(target)
        path.symlink_to(target)
    else:  # pragma: no cover
        raise ValueError(kind)
    return path


def can_mknod(tmp: Path) -> bool:
    try:
        make_special(tmp / "probe-dev", "chardev")
    except (PermissionError, OSError):
        return False
    os.unlink(tmp / "probe-dev")
    return True


def gzip_bomb(path: Path, inflated_mib: int) -> Path:
    """A gzip member of ``inflated_mib`` MiB of zeros (about 1,000 times smaller on disk)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    with open(path, "wb") as f:
        for _ in range(inflated_mib):
            f.write(c.compress(zeros))
        f.write(c.flush())
    return path


@dataclass
class Run:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_mib: float


# Runs the CLI as `python -m archviz.cli` does, and writes the process's own peak RSS (KiB) to $ADV_RSS_FILE at exit:
# its memory's high-water mark (VmHWM), not getrusage's ru_maxrss, which Linux carries over an exec from the process
# that started it (a test process grown by in-process commands made a 300 MiB command read as 900 MiB).
_MEASURED = (
    "import atexit, os, runpy, sys\n"
    "def _hwm():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return line.split()[1]\n"
    "    import resource\n"
    "    return str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    "atexit.register(lambda: open(os.environ['ADV_RSS_FILE'], 'w').write(_hwm()))\n"
    "sys.argv[0] = 'archviz'\n"
    "runpy.run_module('archviz.cli', run_name='__main__', alter_sys=True)\n"
)


def cli(*args: object, timeout: float = 60, env: dict[str, str] | None = None, cwd: Path = REPO,
        measure: bool = False) -> Run:
    """``python -m archviz.cli ARGS`` from the repository root, timed; with ``measure``, its peak RSS too."""
    e = dict(os.environ)
    e.pop("FORCE_COLOR", None)
    e["COLUMNS"] = "200"
    e.update(env or {})
    rss_file = None
    if measure:
        import tempfile

        fd, rss_file = tempfile.mkstemp(prefix="adv-rss-")
        os.close(fd)
        e["ADV_RSS_FILE"] = rss_file
        argv = [sys.executable, "-c", _MEASURED, *map(str, args)]
    else:
        argv = [sys.executable, "-m", "archviz.cli", *map(str, args)]
    t = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=cwd, env=e, capture_output=True, text=True, encoding="utf-8",
                           errors="surrogateescape", timeout=timeout)
    except subprocess.TimeoutExpired as x:
        raise AssertionError(f"{argv[3 if measure else 3:]} still running after {timeout} s") from x
    seconds = time.monotonic() - t
    rss = 0.0
    if rss_file is not None:
        text = Path(rss_file).read_text()
        os.unlink(rss_file)
        rss = int(text) / 1024 if text else 0.0
    return Run(tuple(map(str, args)), p.returncode, p.stdout, p.stderr, seconds, rss)


def cli_here(archviz_cli, *args: object) -> Run:
    """``archviz ARGS`` in this process (tests/conftest.py's `archviz_cli`), timed: where what is tested is the
    command's answer (exit code, output, files), not the process."""
    t = time.monotonic()
    p = archviz_cli(*args)
    return Run(tuple(map(str, args)), p.returncode, p.stdout, p.stderr, time.monotonic() - t, 0.0)


def refused(r: Run, *fragments: str) -> str:
    """Exit 2, one line on stderr naming ``fragments``, no traceback, nothing on stdout, within the bound."""
    assert r.returncode == 2, (r.args, r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout and "internal error" not in r.stderr
    assert r.stdout == "", r.stdout[:500]
    assert r.seconds < REFUSE_WITHIN_S, (r.args, r.seconds)
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}

"""What later stages may know of each cited source file, captured while the model's own code is at hand.

Every file the records cite gets its sha256, and a file of the model's own code (not torch's or transformers',
which are linked by their release tags) the git commit, its path in the repository and the web remote, when it is
tracked and unmodified there. A records file is data: a stage reading it later (the site's code excerpts and
upstream links) re-reads a source file only when its bytes still hash to what the records vouch for, and never runs
git or any other program for it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from typing import Any, Mapping

_MAX_SOURCE_BYTES = 16 << 20  # a source file larger than this is not cited


def sha256_of(path: str) -> str | None:
    """A regular file's sha256, or None (missing, not a regular file, unreadable, too large)."""
    try:
        with open(path, "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            import stat

            if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_SOURCE_BYTES:
                return None
            return hashlib.sha256(f.read(_MAX_SOURCE_BYTES + 1)).hexdigest()
    except OSError:
        return None


def _git(folder: str, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", folder, *args], capture_output=True, text=True,
                           timeout=10, stdin=subprocess.DEVNULL,
                           env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def web_remote(url: str) -> str | None:
    url = url.strip()
    m = re.match(r"^(?:ssh://)?git@([^:/]+)[:/](.+?)(?:\.git)?/?$", url) or \
        re.match(r"^(?:https?|git)://(?:[^@/]+@)?([^/]+)/(.+?)(?:\.git)?/?$", url)
    if not m:
        return None
    return f"https://{m.group(1)}/{m.group(2)}"


def git_facts(absolute: str) -> dict[str, str] | None:
    """{"commit", "path", "web"} of a file tracked and unmodified in a git checkout with a web remote, else None."""
    folder = os.path.dirname(absolute)
    toplevel = _git(folder, "rev-parse", "--show-toplevel")
    commit = _git(folder, "rev-parse", "HEAD")
    if not toplevel or not commit:
        return None
    rel = os.path.relpath(os.path.realpath(absolute), os.path.realpath(toplevel)).replace(os.sep, "/")
    if _git(toplevel, "ls-files", "--error-unmatch", "--", rel) is None:
        return None  # not tracked: no revision holds these lines
    if _git(toplevel, "status", "--porcelain", "--", rel):
        return None  # edited since the commit: the pinned lines would not be these
    remotes = (_git(toplevel, "remote") or "").split()
    remote = "origin" if "origin" in remotes else (remotes[0] if remotes else None)
    web = web_remote(_git(toplevel, "remote", "get-url", remote) or "") if remote else None
    if not web:
        return None
    return {"commit": commit, "path": rel, "web": web}


def file_facts(files: Mapping[str, str], known: Mapping[str, Any] = ()) -> tuple[tuple[str, Any], ...]:
    """display path -> {"sha256", "git"?} for every file in `files` (display -> absolute); `known` is kept as is."""
    out = dict(known)
    for display, absolute in files.items():
        if display in out:
            continue
        digest = sha256_of(absolute)
        if digest is None:
            continue
        facts: dict[str, Any] = {"sha256": digest}
        if display.split("/", 1)[0] not in ("torch", "transformers"):
            git = git_facts(absolute)
            if git:
                facts["git"] = git
        out[display] = facts
    return tuple(sorted(out.items()))

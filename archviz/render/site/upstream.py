"""Links to the exact lines upstream, at a pinned revision: a `--source-url` template, the git remote and
commit of the model's folder, or transformers' release tag."""

from __future__ import annotations

import os
import re
import subprocess

from ...records import (
    ModelRecord,
)


def _git(folder: str, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=10,
                           env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _web_remote(url: str) -> str | None:
    url = url.strip()
    m = re.match(r"^(?:ssh://)?git@([^:/]+)[:/](.+?)(?:\.git)?/?$", url) or \
        re.match(r"^(?:https?|git)://(?:[^@/]+@)?([^/]+)/(.+?)(?:\.git)?/?$", url)
    if not m:
        return None
    return f"https://{m.group(1)}/{m.group(2)}"


def _release(version: str | None) -> str | None:
    if not version:
        return None
    base = version.split("+", 1)[0]
    return base if re.fullmatch(r"\d+\.\d+(\.\d+)?", base) else None


class Upstream:
    """display path -> a URL template for its lines at a pinned revision, and that revision's label."""

    def __init__(self, record: ModelRecord, template: str | None):
        self.record = record
        self.template = template
        self.files = dict(record.source.files)
        self.versions = dict(record.source.versions)
        self._cache: dict[str, tuple[str, str] | None] = {}

    def _own(self, display: str) -> bool:
        top = display.split("/", 1)[0]
        if self.record.source.kind == "hf":
            return top == "transformers"
        return top not in ("torch", "transformers")

    def _resolve(self, display: str) -> tuple[str, str] | None:
        if self.template and self._own(display):
            m = re.search(r"/(?:blob|tree|raw|src)/([^/]+)/", self.template)
            return self.template.replace("{path}", display), (m.group(1) if m else "")
        top = display.split("/", 1)[0]
        if top == "transformers":
            v = _release(self.versions.get("transformers"))
            if v:
                return f"https://github.com/huggingface/transformers/blob/v{v}/src/{display}#L{{start}}-L{{end}}", \
                    f"v{v}"
            return None
        if top == "torch":
            v = _release(self.versions.get("torch"))
            if v:
                return f"https://github.com/pytorch/pytorch/blob/v{v}/{display}#L{{start}}-L{{end}}", f"v{v}"
            return None
        absolute = self.files.get(display)
        if not absolute or not os.path.isfile(absolute):
            return None
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
        web = _web_remote(_git(toplevel, "remote", "get-url", remote) or "") if remote else None
        if not web:
            return None
        return f"{web}/blob/{commit}/{rel}#L{{start}}-L{{end}}", commit[:12]

    def link(self, display: str, start: int, end: int) -> tuple[str, str] | None:
        if display not in self._cache:
            self._cache[display] = self._resolve(display)
        hit = self._cache[display]
        if hit is None:
            return None
        url, rev = hit
        return url.replace("{start}", str(start)).replace("{end}", str(end)), rev

    def repository(self, url: str) -> str:
        """'owner/repo / path/in/repo' of a blob URL (the path as the repository names it)."""
        m = re.match(r"https?://[^/]+/([^/]+/[^/]+)/(?:-/)?(?:blob|tree|raw|src)/[^/]+/([^#?]+)", url)
        if m:
            return f"{m.group(1)} / {m.group(2)}"
        m = re.match(r"https?://[^/]+/([^/]+/[^/]+)/", url)
        return m.group(1) if m else ""

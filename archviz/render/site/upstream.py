"""Links to the exact lines upstream, at a pinned revision: a `source_url` template, the git remote and
commit of the model's folder as the walk recorded them (`SourceInfo.file_facts`; nothing is run here), or
transformers' and torch's release tags."""

from __future__ import annotations

import re

from ...records import (
    ModelRecord,
)


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
        self.facts = dict(record.source.file_facts)
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
        facts = self.facts.get(display)
        git = facts.get("git") if isinstance(facts, dict) else None
        if not isinstance(git, dict) or not all(isinstance(git.get(k), str) for k in ("commit", "path", "web")):
            return None
        commit, rel, web = git["commit"], git["path"], git["web"]
        if not re.fullmatch(r"[0-9a-f]{7,64}", commit) or not re.fullmatch(r"https://[^\s\"'<>]+", web) \
                or rel.startswith("/") or ".." in rel.split("/"):
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

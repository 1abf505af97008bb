"""A Hugging Face Hub repository as a source: `org/name[@revision]` or `hf://org/name[@revision]`.

The repository's `config.json` (and, with trust_remote_code, the .py files its `auto_map` names and the modules
those import relatively) are fetched through huggingface_hub (`hf_hub_download`), so `HF_ENDPOINT` (read when the
call is made), `HF_TOKEN`, `HF_HUB_OFFLINE` and the local cache apply as they do for transformers. The files land in
the cache's snapshot folder, which is then built as a transformers model folder (archviz.sources.hf). Every read is
bounded: one file at most `MAX_FILE_BYTES`, each download answered within the timeout or refused in one line, at
most `MAX_CODE_FILES` code files. The repository's safetensors headers are checked against the build by the
pipeline (archviz.pipeline), which reads them as `check checkpoint hf://...` does.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from ..errors import SourceError

_REPO = re.compile(r"^(?P<hf>hf://)?(?P<repo>[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*)(?:@(?P<rev>[^\s@]+))?/?$")
MAX_FILE_BYTES = 4 << 20
MAX_CODE_FILES = 32
TIMEOUT = 10.0  # seconds for each file
_RELATIVE = re.compile(r"^\s*from\s+\.(\w+)\s+import\b", re.M)


def hub_repo(spec: str) -> tuple[str, str | None] | None:
    """(repo id, revision or None) when `spec` names a Hub repository: `hf://org/name[@rev]` always, `org/name[@rev]`
    when no file or folder of that name is here; else None."""
    if not isinstance(spec, str):  # a Python object (archviz.load of a live model)
        return None
    m = _REPO.match(spec)
    if m is None or (not m.group("hf") and (os.path.exists(spec) or spec.endswith((".py", ".json")))):
        return None
    return m.group("repo"), m.group("rev")


def checkpoint_spec(spec: str) -> str | None:
    """The `hf://org/name[@rev]` that names the same repository's checkpoint, or None."""
    found = hub_repo(spec)
    if found is None:
        return None
    repo, rev = found
    return f"hf://{repo}" + (f"@{rev}" if rev else "")


def _download(repo: str, filename: str, revision: str | None, timeout: float) -> str:
    """One file of the repository through huggingface_hub, answered within `timeout` (a thread waited on: a server
    that trickles is given up on), at most MAX_FILE_BYTES."""
    import huggingface_hub
    from huggingface_hub import constants

    endpoint = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    box: dict[str, Any] = {}

    token = os.environ.get("HF_TOKEN") or None
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")

    def run() -> None:
        try:
            if not offline:  # its size, before a byte of it is read
                url = huggingface_hub.hf_hub_url(repo, filename, revision=revision, endpoint=endpoint)
                size = huggingface_hub.get_hf_file_metadata(url, token=token, timeout=timeout, endpoint=endpoint).size
                if size is not None and size > MAX_FILE_BYTES:
                    raise SourceError(f"{repo}: {filename} is {size:,} bytes, more than a config or code file "
                                      f"({MAX_FILE_BYTES:,})", hint="check the repository")
            box["path"] = huggingface_hub.hf_hub_download(
                repo, filename, revision=revision, endpoint=endpoint, etag_timeout=timeout, cache_dir=_cache_dir(),
                token=token, local_files_only=offline)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=run, daemon=True, name=f"archviz-hub-{filename}")
    worker.start()
    worker.join(timeout * 3)
    where = f"{repo}{'@' + revision if revision else ''}"
    if worker.is_alive():
        raise SourceError(f"{where}: {filename} was not read within {timeout * 3:.0f} s from {endpoint}",
                          hint="check the network or HF_ENDPOINT; HF_HUB_OFFLINE=1 reads the local cache")
    if "error" in box:
        raise _said(box["error"], where, filename)
    path = box["path"]
    if os.path.getsize(path) > MAX_FILE_BYTES:
        raise SourceError(f"{where}: {filename} is {os.path.getsize(path):,} bytes, more than a config or code file "
                          f"({MAX_FILE_BYTES:,})", hint="check the repository")
    return path


def _cache_dir() -> str | None:
    """HF_HUB_CACHE, else HF_HOME/hub, as set when the call is made (huggingface_hub reads them once, on import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None


def _said(e: BaseException, where: str, filename: str) -> SourceError:
    from huggingface_hub import errors

    if isinstance(e, errors.GatedRepoError):
        return SourceError(f"{where}: a gated repository", hint="accept its terms on the Hub and set HF_TOKEN")
    if isinstance(e, errors.RepositoryNotFoundError):
        return SourceError(f"{where}: no such repository on the Hub (or it is private)",
                           hint="check the name; for a private one set HF_TOKEN; for a local folder give its path")
    if isinstance(e, errors.RevisionNotFoundError):
        return SourceError(f"{where}: no such revision", hint="give a branch, tag or commit of the repository")
    if isinstance(e, errors.EntryNotFoundError):
        return SourceError(f"{where}: the repository has no {filename}",
                           hint="a transformers or diffusers model repository holds a config.json")
    if isinstance(e, (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled)):
        return SourceError(f"{where}: {filename} is not in the local cache and the Hub cannot be reached ({e})",
                           hint="connect, or unset HF_HUB_OFFLINE, or give a local folder")
    if isinstance(e, SourceError):
        return e
    return SourceError(f"{where}: reading {filename} failed: {type(e).__name__}: {e}",
                       hint="check the network and HF_ENDPOINT")


def fetch(spec: str, trust_remote_code: bool, timeout: float = TIMEOUT) -> str:
    """The local folder holding the repository's config.json (and its code with `trust_remote_code`)."""
    from .options import read_json_config

    found = hub_repo(spec)
    assert found is not None
    repo, rev = found
    config_path = _download(repo, "config.json", rev, timeout)
    config = read_json_config(config_path)
    if trust_remote_code:
        _fetch_code(repo, rev, config, timeout)
    return os.path.dirname(config_path)


def _fetch_code(repo: str, rev: str | None, config: dict[str, Any], timeout: float) -> None:
    """The .py files config.json's auto_map names, and the modules they import relatively, at most MAX_CODE_FILES."""
    names = [v for v in (config.get("auto_map") or {}).values() for v in (v if isinstance(v, list) else [v])]
    todo = sorted({str(v).split("--")[-1].rsplit(".", 1)[0] for v in names if isinstance(v, str) and "." in v})
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen or not module.isidentifier():
            continue
        seen.add(module)
        if len(seen) > MAX_CODE_FILES:
            raise SourceError(f"{repo}: its code imports more than {MAX_CODE_FILES} files",
                              hint="download the repository and give its folder")
        path = _download(repo, f"{module}.py", rev, timeout)
        with open(path, encoding="utf-8", errors="replace") as f:
            todo += [m for m in _RELATIVE.findall(f.read()) if m not in seen]


__all__ = ["checkpoint_spec", "fetch", "hub_repo"]

"""Reading a Hugging Face repository's checkpoint headers over HTTP range requests.

For ``hf://owner/name[@revision]``:

1. ``HfApi.model_info`` (``GET /api/models/{repo}/revision/{rev}``) gives the commit and the file list;
2. ``model.safetensors.index.json``, if listed, is fetched (a small JSON file) and names the shards; otherwise
   every top-level ``*.safetensors`` file is a shard;
3. each shard is read with two ``GET`` requests on its ``/{repo}/resolve/{commit}/{file}`` URL carrying
   ``Range: bytes=0-7`` (the length prefix; the ``Content-Range`` total gives the file size) and
   ``Range: bytes=8-{8+N-1}`` (the header). A server that ignores ``Range`` is refused before its body is read.

The endpoint is ``HF_ENDPOINT`` as set when the call is made (default https://huggingface.co); requests go
through huggingface_hub's shared HTTP client (so its proxy, offline-mode and auth settings apply).
HTTP errors, refused ranges and timeouts become one-line :class:`~archviz.errors.CheckpointError`.

Deadlines (``deadline.py``): every request must be answered in full within ``timeout`` seconds (not per socket
read: a server trickling a byte every two seconds is cut off), the whole read within ``deadline`` seconds (default
30 × ``timeout``); the first failing shard ends the read at once, and Ctrl-C is noticed within a quarter second.
The index is read only up to ``MAX_INDEX_BYTES``.
"""

from __future__ import annotations

import io
import os
import re
from typing import Any

from archviz.errors import CheckpointError

from .assemble import INDEX_SUFFIX, MAX_INDEX_BYTES, Progress, assemble, index_shards, natural_key, parse_index
from .deadline import Watch, run_all
from .gguf_header import gguf_inventory, parse_gguf
from .header import PREFIX_BYTES, ParsedShard, check_header_length, parse_shard_bytes
from .records import CheckpointInventory
from .torch_zip import parse_torch_zip

try:  # huggingface_hub >= 1.0 ships its HTTP client as httpx (renamed httpx2 in 2.x)
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the installed huggingface_hub
    import httpx as _httpx  # type: ignore[no-redef]

import huggingface_hub
from huggingface_hub import HfApi, constants, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, get_session  # type: ignore[attr-defined]

if int(huggingface_hub.__version__.split(".")[0]) < 1:  # 0.x speaks `requests`, not httpx
    raise ImportError(f"huggingface_hub {huggingface_hub.__version__} is installed")

__all__ = ["MAX_WORKERS", "open_hf", "parse_hf_spec"]

#: Shards fetched concurrently.
MAX_WORKERS = 8
_GGUF_SPEC = re.compile(r"^hf://(?P<repo>[A-Za-z0-9][\w.\-]*/[A-Za-z0-9][\w.\-]*)(?:@(?P<rev>[^\s@/]+))?"
                        r"/(?P<file>[^\s@]+\.gguf)$")
#: The first range read of a GGUF file: magic, version and the two counts (it gives the file's size).
_GGUF_PROBE = 24
_SPEC = re.compile(r"^hf://(?P<repo>[A-Za-z0-9][\w.\-]*(?:/[A-Za-z0-9][\w.\-]*)?)(?:@(?P<rev>[^\s@]+))?/?$")
#: Range reads of a GGUF header after the first (a 150k-token vocabulary is a few MiB: a few requests).
_GGUF_CHUNK = 4 << 20
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_INDEX = f"model{INDEX_SUFFIX}"
_TORCH_INDEX = "pytorch_model.bin.index.json"
_TORCH_FILE = "pytorch_model.bin"
_TORCH_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")
_AUTH_HINT = "log in with `hf auth login` or set HF_TOKEN, and accept the model's terms if it is gated"


def parse_hf_spec(spec: str) -> tuple[str, str | None]:
    """Split ``hf://owner/name[@revision]`` into ``(repo_id, revision or None)``."""
    m = _SPEC.match(spec)
    if m is None:
        raise CheckpointError(
            f"{spec}: not a Hugging Face spec", hint="write hf://owner/name or hf://owner/name@revision"
        )
    return m.group("repo"), m.group("rev")


def _endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _http_error(status: int, where: str, what: str, error_code: str | None = None) -> CheckpointError:
    if status in (401, 403) or error_code == "GatedRepo":
        return CheckpointError(f"{where}: access denied (HTTP {status}) {what}", hint=_AUTH_HINT)
    if status == 404:
        kind = {
            "RepoNotFound": "repository not found",
            "RevisionNotFound": "revision not found",
            "EntryNotFound": "file not found",
        }.get(error_code or "", "not found")
        return CheckpointError(
            f"{where}: {kind} (HTTP 404) {what}",
            hint="check the repository name, the revision and your access (private repos need a token)",
        )
    if status == 416:
        return CheckpointError(
            f"{where}: server refused the byte range (HTTP 416) {what}",
            hint="the file is shorter than its header claims or the server cannot serve ranges",
        )
    return CheckpointError(f"{where}: HTTP {status} {what}", hint="retry later; check HF_ENDPOINT")


def _transport_error(e: Exception, where: str, timeout: float) -> CheckpointError:
    if isinstance(e, _httpx.TimeoutException):
        return CheckpointError(
            f"{where}: no answer within {timeout:g} s ({type(e).__name__})",
            hint="retry, or raise the timeout; check HF_ENDPOINT and your network",
        )
    if isinstance(e, OfflineModeIsEnabled):
        return CheckpointError(f"{where}: HF_HUB_OFFLINE is set", hint="unset HF_HUB_OFFLINE or use a local checkpoint")
    detail = str(e).splitlines()[0] if str(e) else type(e).__name__
    return CheckpointError(f"{where}: cannot reach the server ({detail})", hint="check HF_ENDPOINT and your network")


class _Client:
    """Range reads of one repository at one commit."""

    def __init__(self, repo_id: str, commit: str, endpoint: str, timeout: float, token: str | bool | None,
                 watch: Watch) -> None:
        self.watch = watch
        self.repo_id = repo_id
        self.commit = commit
        self.endpoint = endpoint
        self.timeout = timeout
        self.headers = build_hf_headers(token=token)
        self.headers["Accept-Encoding"] = "identity"  # byte offsets are about the file, not a compressed stream
        self.session = get_session()

    def url(self, filename: str) -> str:
        return hf_hub_url(self.repo_id, filename, revision=self.commit, endpoint=self.endpoint)

    def where(self, filename: str) -> str:
        return f"hf://{self.repo_id}@{self.commit}/{filename}"

    def get(self, filename: str) -> bytes:
        """Whole small file (the index)."""
        where = self.where(filename)
        self.watch.begin(where)
        chunks: list[bytes] = []
        got = 0
        try:
            with self.session.stream("GET", self.url(filename), headers=self.headers, timeout=self.timeout) as r:
                if r.status_code != 200:
                    raise _http_error(r.status_code, where, "fetching the index", r.headers.get("X-Error-Code"))
                for chunk in r.iter_bytes():
                    self.watch.check()
                    chunks.append(chunk)
                    got += len(chunk)
                    if got > MAX_INDEX_BYTES:
                        raise CheckpointError(f"{where}: index is over the {MAX_INDEX_BYTES:,}-byte limit",
                                              hint="this is not a safetensors index; check HF_ENDPOINT")
        except (_httpx.HTTPError, OfflineModeIsEnabled) as e:
            raise _transport_error(e, where, self.timeout) from None
        return b"".join(chunks)

    def range(self, filename: str, start: int, end: int) -> tuple[bytes, int]:
        """Bytes ``start..end`` (inclusive) and the file's total size from ``Content-Range``."""
        where = self.where(filename)
        headers = dict(self.headers)
        headers["Range"] = f"bytes={start}-{end}"
        what = f"reading bytes {start}-{end}"
        self.watch.begin(f"{where} ({what})")
        try:
            with self.session.stream("GET", self.url(filename), headers=headers, timeout=self.timeout) as r:
                if r.status_code == 200:
                    raise CheckpointError(
                        f"{where}: server ignored the Range request and would send the whole file",
                        hint="use an endpoint that supports HTTP range requests",
                    )
                if r.status_code != 206:
                    raise _http_error(r.status_code, where, what, r.headers.get("X-Error-Code"))
                m = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
                if m is None or m.group(3) == "*" or int(m.group(1)) != start:
                    raise CheckpointError(
                        f"{where}: bad Content-Range {r.headers.get('Content-Range')!r} answering {what}",
                        hint="the server's range support is broken; retry later",
                    )
                limit = end - start + 1
                chunks: list[bytes] = []
                got = 0
                for chunk in r.iter_bytes():
                    self.watch.check()
                    chunks.append(chunk)
                    got += len(chunk)
                    if got > limit:
                        raise CheckpointError(
                            f"{where}: server sent more than the {limit} bytes asked for",
                            hint="the server's range support is broken; retry later",
                        )
        except (_httpx.HTTPError, OfflineModeIsEnabled) as e:
            raise _transport_error(e, where, self.timeout) from None
        return b"".join(chunks), int(m.group(3))

    def gguf(self, filename: str) -> tuple[ParsedShard, dict[str, Any]]:
        """One GGUF file's header, by range requests from its start (``gguf_header.parse_gguf``); a file whose size
        changes between two of them is refused."""
        where = self.where(filename)
        head, total = self.range(filename, 0, _GGUF_PROBE - 1)

        def read_at(at: int, n: int) -> bytes:
            if at + n <= len(head):
                return head[at:at + n]
            data, again = self.range(filename, at, at + n - 1)
            if again != total:
                raise CheckpointError(f"{where}: the file changed while archviz read it (its size was {total:,} "
                                      f"bytes, then {again:,})", hint="retry when the repository is not being "
                                      "written to, or pin a revision: hf://owner/name@commit/file.gguf")
            return data

        return parse_gguf(read_at, total, shard=filename, where=where, chunk=_GGUF_CHUNK)

    def torch_zip(self, filename: str) -> ParsedShard:
        """One torch.save zip's tensor table: its end record, central directory and data.pkl, by range requests
        (zipfile reading through :class:`_RangeFile`); no storage is asked for."""
        _, total = self.range(filename, 0, 0)
        with io.BufferedReader(_RangeFile(self, filename, total), buffer_size=64 << 10) as f:
            return parse_torch_zip(f, total, shard=filename, where=self.where(filename))

    def shard(self, filename: str) -> ParsedShard:
        where = self.where(filename)
        prefix, total = self.range(filename, 0, PREFIX_BYTES - 1)
        n = check_header_length(prefix, total, where)
        header = b""
        if n:
            header, again = self.range(filename, PREFIX_BYTES, PREFIX_BYTES + n - 1)
            if again != total:  # the file was replaced between the two reads: its header may be another file's
                raise CheckpointError(f"{where}: the file changed while archviz read it (its size was {total:,} "
                                      f"bytes, then {again:,})", hint="retry when the repository is not being "
                                      "written to, or pin a revision: hf://owner/name@commit")
        return parse_shard_bytes(prefix, header, file_bytes=total, shard=filename, where=where)


class _RangeFile(io.RawIOBase):
    """A remote file as a seekable binary file: each read one range request (a size that changes is an error)."""

    def __init__(self, client: _Client, filename: str, size: int) -> None:
        self.client, self.filename, self.size, self.pos = client, filename, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = max(0, offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset)
        return self.pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        data, again = self.client.range(self.filename, self.pos, self.pos + n - 1)
        if again != self.size:
            raise CheckpointError(f"{self.client.where(self.filename)}: the file changed while archviz read it (its "
                                  f"size was {self.size:,} bytes, then {again:,})", hint="retry, or pin a revision")
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)


def _model_info(repo_id: str, revision: str, endpoint: str, timeout: float, token: str | bool | None) -> Any:
    where = f"hf://{repo_id}@{revision}"
    try:
        return HfApi(endpoint=endpoint).model_info(repo_id, revision=revision, timeout=timeout, token=token)
    except RevisionNotFoundError:
        raise _http_error(404, where, "listing the repository", "RevisionNotFound") from None
    except GatedRepoError:
        raise _http_error(403, where, "listing the repository", "GatedRepo") from None
    except RepositoryNotFoundError:
        raise _http_error(404, where, "listing the repository", "RepoNotFound") from None
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else 0
        raise _http_error(status, where, "listing the repository") from None
    except (_httpx.HTTPError, OfflineModeIsEnabled) as e:
        raise _transport_error(e, where, timeout) from None
    except ValueError as e:  # invalid repo id or revision (huggingface_hub validation)
        raise CheckpointError(f"{where}: {str(e).splitlines()[0]}", hint="write hf://owner/name[@revision]") from None
    except (RecursionError, LookupError, TypeError, AttributeError) as e:  # a listing huggingface_hub cannot read
        raise CheckpointError(f"{where}: the server's listing of the repository is not what the Hub sends "
                              f"({type(e).__name__})", hint="check HF_ENDPOINT") from None


def open_hf(
    spec: str,
    *,
    progress: Progress | None = None,
    timeout: float = 10.0,
    token: str | bool | None = None,
    max_workers: int = MAX_WORKERS,
    deadline: float | None = None,
) -> CheckpointInventory:
    """Inventory of ``hf://owner/name[@revision]`` from shard headers fetched with HTTP range requests.

    Each request must be answered in full within ``timeout`` seconds, the whole read within ``deadline`` (default
    30 × ``timeout``)."""
    gguf_file = _GGUF_SPEC.match(spec)
    if gguf_file is not None:
        repo_id, revision = gguf_file["repo"], gguf_file["rev"]
    else:
        repo_id, revision = parse_hf_spec(spec)
    endpoint = _endpoint()
    requested = revision or "main"
    watch = Watch(timeout, deadline if deadline is not None else 30 * timeout, f"hf://{repo_id}")

    def listing() -> Any:
        watch.begin(f"hf://{repo_id}@{requested} (listing the repository)")
        return _model_info(repo_id, requested, endpoint, timeout, token)

    info = run_all([("info", listing)], watch, workers=1)["info"]
    commit = info.sha if isinstance(info.sha, str) and info.sha else requested
    siblings = info.siblings if isinstance(info.siblings, list) else []
    files = [s.rfilename for s in siblings if isinstance(getattr(s, "rfilename", None), str)]
    client = _Client(repo_id, commit, endpoint, timeout, token, watch)

    if gguf_file is not None:
        return _open_gguf(client, gguf_file["file"], files, watch, progress, revision)
    weight_map = None
    index_meta: dict[str, Any] = {}
    loose = any(f.endswith(".safetensors") and "/" not in f for f in files)  # preferred to a torch index
    index = _TORCH_INDEX if _INDEX not in files and _TORCH_INDEX in files and not loose else _INDEX
    if index in files:
        raw_index = run_all([("index", lambda: client.get(index))], watch, workers=1)["index"]
        weight_map, index_meta = parse_index(raw_index, client.where(index))
        names = index_shards(weight_map)
        for name in names:
            if name not in files:
                raise CheckpointError(
                    f"{client.where(index)}: index names shard {name!r}, which the repository does not hold",
                    hint="the repository is incomplete at this revision; try another revision",
                )
    else:
        names = sorted((f for f in files if f.endswith(".safetensors") and "/" not in f), key=natural_key)
        names = names or [f for f in files if f == _TORCH_FILE]
    if not names:
        raise _no_safetensors(f"hf://{repo_id}@{commit}", repo_id, files)

    total = len(names)
    count = [0]

    def done(name: str, _: ParsedShard) -> None:
        count[0] += 1
        if progress is not None:
            progress(count[0], total, name)

    # daemon workers; the first failure, a late request or Ctrl-C ends the read at once (deadline.py)
    read = {n: (client.torch_zip if n.endswith(_TORCH_SUFFIXES) else client.shard) for n in names}
    parsed = run_all([(n, (lambda n=n: read[n](n))) for n in names], watch, workers=max_workers, done=done)
    meta: dict[str, Any] = {"model": repo_id}
    if index_meta:
        meta["index"] = index_meta
    if revision is not None and revision != commit:
        meta["requested_revision"] = revision
    return assemble(
        [parsed[n] for n in names],
        source=f"hf://{repo_id}@{commit}",
        revision=commit,
        weight_map=weight_map,
        index_where=client.where(index),
        metadata=meta,
    )


def _no_safetensors(where: str, repo_id: str, files: list[str]) -> CheckpointError:
    """What to say of a repository with no top-level .safetensors: name its GGUF files, or its pickles."""
    ggufs = sorted(f for f in files if f.endswith(".gguf"))
    if ggufs:
        return CheckpointError(f"{where}: holds GGUF files ({', '.join(ggufs[:3])}{', ...' if len(ggufs) > 3 else ''})"
                               " and no .safetensors", hint=f"name one: hf://{repo_id}/{ggufs[0]}")
    pickles = [f for f in files if f.endswith((".bin", ".pt", ".pth", ".ckpt"))]
    if pickles:
        return CheckpointError(f"{where}: only pickle checkpoints ({pickles[0]}, ...), none of them "
                               f"{_TORCH_FILE} or named by {_TORCH_INDEX}",
                               hint="download the file and pass it (archviz reads torch.save zips without running "
                                    "them), or pick a revision with .safetensors weights")
    return CheckpointError(f"{where}: no .safetensors files at the top level",
                           hint="check the repository name and revision")


def _open_gguf(client: _Client, filename: str, files: list[str], watch: Watch, progress: Progress | None,
               revision: str | None) -> CheckpointInventory:
    """A GGUF file of the repository (every file of its split when it is one), read by range requests."""
    if filename not in files:
        raise CheckpointError(f"{client.where(filename)}: the repository holds no such file",
                              hint="check the file name against the repository's files")
    listed = set(files)
    meta: dict[str, Any] = {"model": client.repo_id}
    if revision is not None and revision != client.commit:
        meta["requested_revision"] = revision

    def read(name: str) -> tuple[ParsedShard, dict[str, Any]]:
        return run_all([(name, lambda: client.gguf(name))], watch, workers=1)[name]

    return gguf_inventory(filename, read, listed.__contains__, where=client.where(filename),
                          source=f"hf://{client.repo_id}@{client.commit}/{filename}", progress=progress,
                          revision=client.commit, metadata=meta)

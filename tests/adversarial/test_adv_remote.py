"""hf:// against a hostile server on 127.0.0.1 (hostile_hub.py): a slow loris is cut off by the per-request
deadline, the whole read has an overall deadline, one failing shard ends the read at once, Ctrl-C ends the
command within a second."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from adv_tools import BYTES, REPO, cli, entries_text, refused, shard_bytes
from hostile_hub import Hub, serving, wait_for

SHARDS = [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)]


def _shard(name: str) -> bytes:
    text, size = entries_text({name + ".w": ("U8", [2])}, BYTES)
    return shard_bytes(text, b"\0" * size)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    with serving(Hub(files={n: _shard(n) for n in SHARDS})) as h:
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield h


def _env(h: Hub) -> dict[str, str]:
    return {"HF_ENDPOINT": h.url, "NO_PROXY": "127.0.0.1,localhost", "HF_HUB_DISABLE_TELEMETRY": "1"}


def test_the_hostile_hub_serves_a_good_repo(hub: Hub, tmp_path: Path) -> None:
    """The baseline: with no mode set, the four shards are read (so the failures below are the modes')."""
    r = cli("manifest", "hf://org/x", "-o", tmp_path / "m.json", "--json", env=_env(hub))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensors"] == 4


def test_slow_loris_listing_times_out(hub: Hub, tmp_path: Path) -> None:
    """1 byte every 2 s: every socket read succeeds, so a read timeout never fires; the request's deadline does."""
    hub.modes["api"] = "loris"
    r = cli("manifest", "hf://org/x", "-o", tmp_path / "m.json", "--timeout", "2", env=_env(hub))
    refused(r, "hf://org/x", "no complete answer within 2 s", "--timeout")
    assert r.seconds < 2 + 6  # the deadline, plus the interpreter's start
    assert not (tmp_path / "m.json").exists()


def test_slow_loris_shard_times_out(hub: Hub, tmp_path: Path) -> None:
    hub.modes[SHARDS[2]] = "loris"
    hub.loris_s = 0.5
    r = cli("manifest", "hf://org/x", "-o", tmp_path / "m.json", "--timeout", "2", env=_env(hub))
    refused(r, SHARDS[2], "no complete answer within 2 s")


def test_one_failing_shard_cancels_the_rest_at_once(hub: Hub, tmp_path: Path) -> None:
    """Three shards never answer, one fails: the failure is reported without waiting for the others (nor for the
    30-second per-request deadline)."""
    for n in SHARDS[:3]:
        hub.modes[n] = "hang"
    hub.modes[SHARDS[3]] = "fail"
    t = time.monotonic()
    r = cli("manifest", "hf://org/x", "-o", tmp_path / "m.json", "--timeout", "30", env=_env(hub))
    refused(r, SHARDS[3], "HTTP 500")
    assert time.monotonic() - t < 8, r.seconds


def test_overall_deadline(hub: Hub) -> None:
    """Each request well within its own deadline, but one worker and four slow shards: the overall one ends it."""
    from archviz.checkpoint import open_checkpoint
    from archviz.checkpoint.remote import open_hf
    from archviz.errors import CheckpointError

    for n in SHARDS:
        hub.modes[n] = "slow"
    hub.slow_s = 0.8
    t = time.monotonic()
    with pytest.raises(CheckpointError, match="overall deadline of 2 s"):
        open_hf("hf://org/x", timeout=1.5, deadline=2, max_workers=1)
    assert time.monotonic() - t < 3.5
    hub.slow_s = 0.1
    assert len(open_checkpoint("hf://org/x", timeout=5).tensors) == 4  # the same, given the time: fine


@pytest.mark.serial  # a sub-second bound: run alone, after the parallel run
def test_ctrl_c_ends_the_command_within_a_second(hub: Hub, tmp_path: Path) -> None:
    for n in SHARDS:
        hub.modes[n] = "hang"
    env = {**os.environ, **_env(hub)}
    # A Ctrl-C at a terminal reaches a process whose SIGINT is at its default. A background job of a non-interactive
    # shell (a CI runner's `make test &`) starts with SIGINT ignored, and its children inherit that: Python then
    # leaves it ignored, as every Unix program does, and the signal below would be lost.
    p = subprocess.Popen([sys.executable, "-m", "archviz.cli", "manifest", "hf://org/x", "-o", tmp_path / "m.json",
                          "--timeout", "120"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_for(lambda: hub.seen("/resolve/"))
        time.sleep(0.3)
        t = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        took = time.monotonic() - t
    finally:
        if p.poll() is None:
            p.kill()
    assert took < 1.0, took
    assert p.returncode == 130, (p.returncode, err)
    assert "interrupted" in err and "Traceback" not in err
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("endpoint", ["http://[::1", "not a url", "ftp://example.org", "http://h:99999"])
def test_malformed_hf_endpoint_is_exit_2(tmp_path: Path, endpoint: str) -> None:
    """huggingface_hub parses HF_ENDPOINT when imported; a malformed one was an internal error (exit 3)."""
    r = cli("manifest", "hf://org/x", "-o", tmp_path / "m.json", env={"HF_ENDPOINT": endpoint})
    refused(r, "HF_ENDPOINT", repr(endpoint), "unset it")


@pytest.mark.parametrize("body", [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"id": "org/x", "sha": "' + b"c" * 40 + b'", "siblings": [{"rfilename": 7}, {"x": 1}, 3]}',
    b'{"id": "org/x", "sha": ' + b"9" * 5000 + b', "siblings": []}',
    b'{"id": "org/x", "sha": {"a": 1}, "siblings": {"rfilename": "model.safetensors"}}',
])
def test_hostile_listing_is_exit_2(hub: Hub, tmp_path: Path, body: bytes) -> None:
    """The repository listing is the server's JSON, parsed by huggingface_hub: whatever it holds, one line."""
    hub.api_body = body
    refused(cli("manifest", "hf://org/x", "-o", tmp_path / "m.json", "--timeout", "5", env=_env(hub)), "hf://org/x")

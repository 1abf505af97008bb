"""Every process archviz starts ends with it, listens on loopback alone, and starts without the current folder on
its import path (issue 46): the real command line and the real ranks, in processes of their own (the processes are
what is tested)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ARCHVIZ = Path(sys.executable).parent / "archviz"
# modules a child imports early: planted in the current folder, each would write the marker if it ran
PLANTED = ("typing", "json", "runpy", "pickle", "tempfile")

HANG = """
import os, time
def hangs():
    with open(os.environ["HANG_PID"], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(3600)
"""


def _plant(folder: Path, marker: Path) -> None:
    for name in PLANTED:
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120.0) -> None:
    end = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.1)


def _owned_by(pid: int) -> list[int]:
    """The live processes that archviz (`pid`) started, by the owner mark in their environment."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"ARCHVIZ_OWNER_PID={pid}".encode() in env and state != "Z":
            out.append(int(entry.name))
    return out


def _gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    end = time.monotonic() + seconds
    while pids and time.monotonic() < end:
        time.sleep(0.1)
        pids = [p for p in pids if p in _owned_by_any(p)]
    return pids


def _owned_by_any(pid: int) -> set[int]:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return set()
    return set() if state == "Z" else {pid}


def test_sigterm_to_the_gallery_ends_its_workers_and_their_folder(tmp_path):
    """`archviz gallery --jobs 2` on a model that hangs, from a folder holding typing.py and json.py: SIGTERM ends
    the command with 143 and one line, and with it the worker server and the model's process; no archviz temp
    folder is left, and the planted files never ran (the workers start with archviz's import path)."""
    code, cwd, tmp = tmp_path / "code", tmp_path / "cwd", tmp_path / "tmp"
    for d in (code, cwd, tmp):
        d.mkdir()
    (code / "hangmod.py").write_text(HANG)
    marker, pid_file = tmp_path / "ran", tmp_path / "model.pid"
    _plant(cwd, marker)
    env = dict(os.environ, PYTHONPATH=str(code), HANG_PID=str(pid_file), TMPDIR=str(tmp), COLUMNS="100")
    p = subprocess.Popen([str(ARCHVIZ), "gallery", "hangmod:hangs", "--jobs", "2", "--timeout", "600", "-o",
                          str(tmp_path / "g")], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        _wait_for(pid_file, p)
        model = int(pid_file.read_text())
        started = _owned_by(p.pid)
        assert model in started and len(started) >= 2, started  # the server and the model it forked
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, (p.returncode, err[-2000:])
    lines = [ln for ln in err.splitlines() if ln.strip() and "counting models" not in ln]
    assert lines[-1:] == ["terminated by SIGTERM; every process archviz started was ended"], err[-2000:]
    assert _gone(started) == []
    assert _owned_by(p.pid) == []
    assert not [x.name for x in tmp.iterdir() if x.name.startswith("archviz-")]
    assert not marker.exists(), marker.read_text()


RANKS = """
import json, os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal (CI's background shell ignores it)
from archviz.probe.spawn import run_ranks
from archviz.sources.process_group import start_process_group
import rankfns
what = sys.argv[1]
if what == "listen":
    start_process_group()
    one = rankfns.listening_sockets()
    ranks = run_ranks(rankfns.listening, (), 2, timeout=120)
    print(json.dumps({"one": one, "ranks": ranks}))
else:
    try:
        run_ranks(rankfns.spin, (), 2, timeout=600)
    except KeyboardInterrupt:
        sys.exit(130)
"""

# a network namespace with a veth pair whose address the host name resolves to, as on a LAN
NETNS = ("ip link set lo up && ip link add v0 type veth peer name v1 && ip addr add 10.99.0.1/24 dev v0 && "
         "ip link set v0 up && ip link set v1 up && hostname archviz-test-host && "
         "echo '10.99.0.1 archviz-test-host' > {hosts} && mount --bind {hosts} /etc/hosts && exec \"$@\"")
LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1 as /proc/net/tcp{,6} write them


def _ranks_script(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    marker = tmp_path / "ran"
    _plant(cwd, marker)
    script = tmp_path / "ranks_script.py"
    script.write_text(RANKS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(Path(__file__).resolve().parents[2])]),
               TMPDIR=str(tmp_path), GLOO_SOCKET_IFNAME="v0")  # the user's environment names the LAN interface
    return script, marker, env


@pytest.mark.skipif(not shutil.which("unshare") or os.geteuid() != 0, reason="needs root's unshare")
def test_every_group_listens_on_loopback_only(tmp_path):
    """Inside a network namespace whose host name resolves to a LAN address, with GLOO_SOCKET_IFNAME naming the LAN
    interface: the one-process group and two probe ranks listen on 127.0.0.1 (or ::1) alone; the ranks, started
    from a folder holding typing.py and json.py, never run them."""
    script, marker, env = _ranks_script(tmp_path)
    hosts = tmp_path / "hosts"
    r = subprocess.run(["unshare", "--net", "--mount", "--uts", "sh", "-c", NETNS.format(hosts=hosts), "sh",
                        sys.executable, str(script), "listen"], cwd=tmp_path / "cwd", env=env, capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0 and "Operation not permitted" in r.stderr:
        pytest.skip("no network namespaces here")
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    every = seen["one"] + [s for rank in seen["ranks"] for s in rank]
    assert seen["one"] and all(rank for rank in seen["ranks"]), seen
    assert {s.split(":")[0] for s in every} <= LOOPBACK, every
    assert not marker.exists(), marker.read_text()


def test_ctrl_c_ends_every_rank(tmp_path):
    """A run of two ranks that never end: Ctrl-C to the process that started them ends both (by /proc) and removes
    their folder."""
    script, _, env = _ranks_script(tmp_path)
    env["SPIN_PIDS"] = str(tmp_path / "pids")
    (tmp_path / "pids").mkdir()
    p = subprocess.Popen([sys.executable, str(script), "spin"], cwd=tmp_path / "cwd", env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for rank in (0, 1):
            _wait_for(tmp_path / "pids" / f"rank{rank}", p)
        ranks = [int((tmp_path / "pids" / f"rank{r}").read_text()) for r in (0, 1)]
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    assert _gone(ranks) == []
    assert not [x.name for x in tmp_path.iterdir() if x.name.startswith("archviz-ranks-")]

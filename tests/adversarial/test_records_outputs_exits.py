"""Hostile records files, outputs that must not be replaced, and model code that ends or floods the process.

Each case runs the real command line and asserts: exit 2 (or the verdict), one line on stderr, no traceback, within
10 s where the command builds nothing heavy, nothing written outside -o, no marker file from executed code, and no
secret text in a published site. A command over a records file runs in-process (`here`); model code that ends the
process or writes to its file descriptors, the umask and the walk that makes the records run in a process of their
own (`run`).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "annotations"
SECRET = "TOPSECRET-5f1c9a-never-publish"


def run(*args, cwd=REPO, env_extra=None, timeout=120, pythonpath=()):
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    env["COLUMNS"] = "200"
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "archviz.cli", *map(str, args)], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=timeout)
    p.elapsed = time.monotonic() - t0
    return p


def here(archviz_cli, *args, within=None):
    """`archviz ARGS` in this process (tests/conftest.py's `archviz_cli`), timed; `within`: the seconds it must end in."""
    t0 = time.monotonic()
    p = archviz_cli(*args)
    p.elapsed = time.monotonic() - t0
    if within is not None:
        assert p.elapsed < within, (args, p.elapsed)
    return p


def one_line_exit_2(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def site_text(folder: Path) -> str:
    """Every file's text as a reader sees it: tags (the highlighter's spans) dropped, entities decoded."""
    import html
    import re

    raw = "".join(f.read_text(errors="replace") for f in sorted(folder.rglob("*")) if f.is_file())
    return html.unescape(re.sub(r"<[^>]*>", "", raw))


@pytest.fixture(scope="module")
def tiny_records(tmp_path_factory):
    """The tiny model walked with shapes, into a records file, from a copy of its source in a temp folder."""
    d = tmp_path_factory.mktemp("tiny")
    shutil.copy(TINY / "tiny_model.py", d / "tiny_model.py")
    out = d / "records.json"
    p = run("walk", "tiny_model:build", "--shapes", "-o", out, pythonpath=[d])
    assert p.returncode == 0, p.stderr
    from archviz.records import dumps, loads

    out.write_text(dumps(loads(out.read_text())))  # version 1 (one JSON object per module), which the cases edit
    return d, out


# --- a records file is data -----------------------------------------------------------------------------------------


def test_records_vouch_for_the_files_they_cite(tiny_records):
    d, out = tiny_records
    data = json.loads(out.read_text())
    import hashlib

    facts = data["source"]["file_facts"]
    assert facts["tiny_model.py"]["sha256"] == hashlib.sha256((d / "tiny_model.py").read_bytes()).hexdigest()


def test_a_site_from_records_shows_only_vouched_unchanged_files(tiny_records, tmp_path, archviz_cli):
    d, out = tiny_records
    site = tmp_path / "site"
    p = here(archviz_cli, "build", out, "-o", site)
    assert p.returncode == 0, p.stderr
    # a line only the file holds (the records cite its docstring and call lines, never this): the cited file is read
    # because its hash matches; the pages carry their code excerpts
    assert "nn.ModuleList(Block(dim, hidden) for _ in range(layers))" in site_text(site)
    # the same records after the file changed: its lines are no longer the ones cited, so none are shown
    changed = tmp_path / "changed"
    (changed / "src").mkdir(parents=True)
    shutil.copy(d / "tiny_model.py", changed / "src" / "tiny_model.py")
    with open(changed / "src" / "tiny_model.py", "a") as f:
        f.write("\n# edited after the walk\n")
    data = json.loads(out.read_text())
    data["source"]["files"] = {k: (str(changed / "src" / "tiny_model.py") if k == "tiny_model.py" else v)
                               for k, v in data["source"]["files"].items()}
    rec2 = changed / "records.json"
    rec2.write_text(json.dumps(data))
    p = here(archviz_cli, "build", rec2, "-o", changed / "site")
    assert p.returncode == 0, p.stderr
    assert "nn.ModuleList(Block(dim, hidden) for _ in range(layers))" not in site_text(changed / "site")


def test_a_records_file_naming_a_secret_file_publishes_nothing_of_it(tiny_records, tmp_path, archviz_cli):
    d, out = tiny_records
    secret = tmp_path / "credentials"
    secret.write_text(f"token = {SECRET}\n" * 40)
    data = json.loads(out.read_text())
    # point every cited file at the secret, and claim it under a name of its own too
    data["source"]["files"] = {k: str(secret) for k in data["source"]["files"]} | {"creds.py": str(secret)}
    data["source"]["file_facts"] = {"creds.py": {"sha256": "0" * 64}}  # a hash the attacker cannot know
    for m in data["modules"]:
        if m.get("class_span"):
            m["class_span"]["file"] = "creds.py"
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(data))
    site = tmp_path / "site"
    p = here(archviz_cli, "build", evil, "-o", site)
    assert p.returncode == 0, p.stderr
    assert SECRET not in site_text(site)


def test_a_records_file_runs_no_program(tiny_records, tmp_path, archviz_cli):
    """A folder whose .git/config runs a command on `git status` (core.fsmonitor): building the site of records that
    name files there must run nothing."""
    d, out = tiny_records
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(d / "tiny_model.py", repo / "tiny_model.py")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    marker = tmp_path / "PWNED"
    hook = repo / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with open(repo / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = {hook}\n[remote \"origin\"]\n\turl = https://example.invalid/o/r.git\n")
    data = json.loads(out.read_text())
    data["source"]["files"] = {k: str(repo / "tiny_model.py") for k in data["source"]["files"]}
    data["source"]["file_facts"] = {}
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(data))
    p = here(archviz_cli, "build", evil, "-o", tmp_path / "site")
    assert p.returncode == 0, p.stderr
    assert not marker.exists(), "a program ran while building a site from a records file"


def test_forged_git_facts_cannot_inject_a_link(tiny_records, tmp_path, archviz_cli):
    d, out = tiny_records
    data = json.loads(out.read_text())
    data["source"]["file_facts"]["tiny_model.py"]["git"] = {
        "commit": "deadbeef" * 5, "path": "../../etc/passwd", "web": "javascript:alert(1)//"}
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(data))
    site = tmp_path / "site"
    p = here(archviz_cli, "build", evil, "-o", site)
    assert p.returncode == 0, p.stderr
    text = site_text(site)
    assert "javascript:alert" not in text and "etc/passwd" not in text


# --- outputs ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder", "chardev"])
def test_dash_o_replaces_only_a_regular_file(tiny_records, tmp_path, kind, archviz_cli):
    _, out = tiny_records
    target = tmp_path / "out.json"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        target.symlink_to(victim)
    elif kind == "folder":
        target.mkdir()
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
    before = os.lstat(target)
    p = here(archviz_cli, "walk", out, "-o", target, within=10)
    one_line_exit_2(p, str(target))
    after = os.lstat(target)
    assert (before.st_mode, before.st_ino, before.st_rdev) == (after.st_mode, after.st_ino, after.st_rdev)
    assert victim.read_text() == "keep me"
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(["out.json", "victim.txt"])  # no temp file left


def test_dash_o_into_a_missing_or_unwritable_folder_is_one_line(tiny_records, tmp_path, archviz_cli):
    _, out = tiny_records
    one_line_exit_2(here(archviz_cli, "walk", out, "-o", tmp_path / "nope" / "r.json", within=10), "does not exist")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only folder")
        one_line_exit_2(here(archviz_cli, "walk", out, "-o", ro / "r.json", within=10), "cannot write")
    finally:
        ro.chmod(0o755)


def test_outputs_follow_the_umask_and_killed_writes_are_swept(tiny_records, tmp_path):
    _, out = tiny_records
    stale = tmp_path / ".archviz-999999999-0123abcd.tmp"  # a pid no process has
    stale.write_text("half written")
    target = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-c", "import os, sys; os.umask(0o022); from archviz.cli import main; "
                        f"sys.argv = ['archviz', 'walk', {str(out)!r}, '-o', {str(target)!r}]; main()"],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert not stale.exists()
    assert json.loads(target.read_text())["schema"] == "archviz.records/3"  # walk writes the compact file


def test_build_replaces_only_a_site_it_made(tiny_records, tmp_path, archviz_cli):
    _, out = tiny_records
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    (mine / ".archviz-site").write_text("{}")  # merely named like the marker
    one_line_exit_2(here(archviz_cli, "build", out, "-o", mine, within=30), "not an archviz site")
    assert (mine / "thesis.tex").read_text() == "years of work"
    # a real site is replaced; the same site with a file of the user's added is not
    site = tmp_path / "site"
    assert here(archviz_cli, "build", out, "-o", site).returncode == 0
    assert here(archviz_cli, "build", out, "-o", site).returncode == 0
    (site / "notes.md").write_text("mine")
    one_line_exit_2(here(archviz_cli, "build", out, "-o", site, within=30), "notes.md")
    assert (site / "notes.md").read_text() == "mine"


# --- model code that ends or floods the process ----------------------------------------------------------------------

EXITING = textwrap.dedent('''
    import os, sys
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
        def forward(self, x):
            return self.lin(x)

    def exits_zero():
        sys.exit(0)

    def exits_one():
        raise SystemExit(1)

    def hard_exit():
        os._exit(0)

    def prints():
        print("hello from the model's code")
        os.write(1, b"and from C-level stdout\\n")
        return M()
''')


@pytest.fixture(scope="module")
def exiting(tmp_path_factory):
    d = tmp_path_factory.mktemp("exiting")
    (d / "exiting.py").write_text(EXITING)
    manifest = d / "ck.safetensors"
    import torch
    from safetensors.torch import save_file

    save_file({"lin.weight": torch.zeros(4, 4), "lin.bias": torch.zeros(4)}, str(manifest))
    return d, manifest


@pytest.mark.parametrize("factory,call", [("exits_zero", "sys.exit(0)"), ("exits_one", "sys.exit(1)"),
                                          ("hard_exit", "os._exit(0)")])
def test_check_never_passes_or_fails_without_a_verdict(exiting, factory, call):
    d, ck = exiting
    p = run("check", f"exiting:{factory}", "--checkpoint", ck, pythonpath=[d], timeout=60)
    one_line_exit_2(p, call)


def test_model_output_does_not_corrupt_json(exiting):
    d, ck = exiting
    p = run("check", "exiting:prints", "--checkpoint", ck, "--format", "json", pythonpath=[d], timeout=60)
    assert p.returncode == 0, p.stderr
    json.loads(p.stdout)  # stdout is the verdict's JSON alone
    assert "hello from the model's code" in p.stderr and "C-level stdout" in p.stderr
    p = run("summary", "exiting:prints", "--json", pythonpath=[d], timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["parameters"] == 4 * 4 + 4

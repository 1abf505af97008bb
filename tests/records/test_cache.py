"""The records cache: a second command on an unchanged source reuses its records without importing torch; any change
to an input (a source file, a helper it imports, the config, an option, a package version) misses; a damaged entry is
rebuilt with one note; concurrent runs both succeed.

Evidence of a hit is not a timing: the command runs with ``python -X importtime``, which lists every module the
process imported, and a hit imports neither torch nor transformers (a build cannot happen without them). A run whose
outcome the cache folder shows runs in this process (`here`): a miss writes its entry (new bytes), a hit only
refreshes the entry's time, and a run with the cache off neither reads nor writes it but imports the model's code,
which a hit never does.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from archviz.records import cache
from archviz.records import loads, to_json_dict

from helpers import REPO, TESTS
REPO = TESTS.parent
DSV3 = TESTS / "fixtures" / "dsv3like"

MODEL = '''
"""A tiny model whose widths come from a helper module."""
import torch
from torch import nn

from .widths import WIDTH


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class Model(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(64, WIDTH)
        self.blocks = nn.ModuleList(Block(WIDTH) for _ in range(layers))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return x


def build(layers: int = 2) -> Model:
    return Model(layers)
'''


def _params(width: int, layers: int) -> int:
    return 64 * width + layers * (width * width + width)  # the embedding, one Linear(width, width) per block


@pytest.fixture()
def pkg(tmp_path: Path) -> Path:
    """A package `cachedpkg` on PYTHONPATH: model.py (the factory) imports widths.py (a helper, no module class)."""
    root = tmp_path / "code"
    p = root / "cachedpkg"
    p.mkdir(parents=True)
    (p / "__init__.py").write_text("")
    (p / "model.py").write_text(MODEL)
    (p / "widths.py").write_text("WIDTH = 8\n")
    return root


def run(*args: object, pythonpath: Path | None = None, env: dict | None = None, importtime: bool = True
        ) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.pop("ARCHVIZ_NO_CACHE", None)
    e["COLUMNS"] = "200"
    e["PYTHONPATH"] = os.pathsep.join(str(x) for x in (pythonpath, REPO) if x)
    e.update(env or {})
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "archviz.cli", *map(str, args)], cwd=REPO, env=e,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture()
def here(archviz_cli, monkeypatch):
    """`archviz ARGS` in this process, `pythonpath` importable and `cachedpkg` imported afresh (as a new process
    imports it, and as the cache's list of the code imported during a build needs)."""
    monkeypatch.delenv("ARCHVIZ_NO_CACHE", raising=False)
    # no .pyc: a test edits model.py within the second it was imported, to a text of the same size
    monkeypatch.setattr(sys, "dont_write_bytecode", True)

    def forget() -> None:
        for name in [n for n in sys.modules if n.split(".")[0] == "cachedpkg"]:
            del sys.modules[name]

    def here(*args: object, pythonpath: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        """The run, and whether it imported the model's code (`built`: a build must, a hit does not)."""
        forget()
        # PYTHONPATH as `run` gives it: the key holds it (what a process can import)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(str(x) for x in (pythonpath, REPO) if x))
        if pythonpath is not None:
            monkeypatch.syspath_prepend(str(pythonpath))
        try:
            with monkeypatch.context() as m:
                for k, v in (env or {}).items():
                    m.setenv(k, v)
                p = archviz_cli(*args)
            p.built = any(n.split(".")[0] == "cachedpkg" for n in sys.modules)
            return p
        finally:
            forget()
    return here


def contents() -> dict[str, bytes]:
    """Each cache entry's bytes: a miss writes new ones, a hit leaves them (and refreshes the entry's time)."""
    return {p.name: p.read_bytes() for p in entries()}


def times() -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in entries()}


def imported(p: subprocess.CompletedProcess) -> set[str]:
    """Module names `-X importtime` listed on stderr."""
    names = set()
    for line in p.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def built(p: subprocess.CompletedProcess) -> bool:
    return "torch" in imported(p)


def notes(p: subprocess.CompletedProcess) -> list[str]:
    return [line for line in p.stderr.splitlines() if not line.startswith("import time:")]


def entries() -> list[Path]:
    folder = Path(cache.cache_dir())
    return sorted(folder.glob("*.records")) if folder.is_dir() else []


def summary(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def test_tests_never_write_the_real_cache():
    assert Path(cache.cache_dir()).resolve().is_relative_to(Path(os.environ["XDG_CACHE_HOME"]).resolve())
    assert not str(Path(cache.cache_dir())).startswith(str(Path.home() / ".cache"))


def test_a_hit_gives_the_records_of_a_fresh_walk_without_importing_torch(pkg, tmp_path, here):
    spec = "cachedpkg.model:build"
    first = here("walk", spec, "--shapes", "-o", tmp_path / "a.json", pythonpath=pkg)
    assert first.returncode == 0, first.stderr[-2000:]
    assert len(written := contents()) == 1 and all(written.values())  # the miss stored its entry
    second = run("walk", spec, "--shapes", "-o", tmp_path / "b.json", pythonpath=pkg)
    assert second.returncode == 0, second.stderr[-2000:]
    assert not built(second), "a hit imported torch"
    # archviz.sources' package and its options (BuildOptions, the command's input) load; none of the build's code
    assert not {"transformers", "archviz.sources.dispatch", "archviz.walk", "archviz.shapes"} & imported(second)
    hit = times()
    fresh = here("walk", spec, "--shapes", "-o", tmp_path / "c.json", "--no-cache", pythonpath=pkg)
    assert fresh.returncode == 0 and times() == hit and contents() == written  # built: the entry not read, not written
    a, b, c = (to_json_dict(loads((tmp_path / f"{n}.json").read_text())) for n in "abc")
    assert b == a == c
    assert b["summary"]["parameters"] == _params(8, 2)
    # the hit's records carry the shapes of the pass: every block was called on (B, T, 8)
    rec = loads((tmp_path / "b.json").read_text())
    assert rec.module("blocks.0.proj").calls[0].outputs[0][-1] == 8


def test_one_entry_serves_every_command_and_grouping_runs_after(pkg, here):
    spec = "cachedpkg.model:build"
    first = here("summary", spec, "--json", pythonpath=pkg)
    stored = contents()
    again = run("summary", spec, "--json", pythonpath=pkg)
    assert len(stored) == 1 and not built(again)
    assert summary(again) == summary(first)
    assert summary(again)["parameters"] == _params(8, 2)
    # check reads the same entry (same records options: no meta pass)
    inspect1 = here("inspect", spec, "--json", pythonpath=pkg)
    stored_inspect = contents()
    inspect2 = run("inspect", spec, "--json", pythonpath=pkg)
    assert stored_inspect != stored and not built(inspect2)
    assert summary(inspect2) == summary(inspect1)


@pytest.mark.parametrize("change", ["model file", "imported helper", "option", "no-cache flag", "no-cache env"])
def test_every_change_misses(pkg, change, here):
    spec = "cachedpkg.model:build"
    assert len(contents()) == 0 and summary(here("summary", spec, "--json", pythonpath=pkg))["parameters"] \
        == _params(8, 2) and len(contents()) == 1
    args: list[object] = ["summary", spec, "--json"]
    env = None
    width, layers = 8, 2
    if change == "model file":
        text = (pkg / "cachedpkg" / "model.py").read_text().replace("layers: int = 2", "layers: int = 3")
        (pkg / "cachedpkg" / "model.py").write_text(text)
        layers = 3
    elif change == "imported helper":
        (pkg / "cachedpkg" / "widths.py").write_text("WIDTH = 12\n")
        width = 12
    elif change == "option":
        args += ["--set", "layers=4"]
        layers = 4
    elif change == "no-cache flag":
        args.append("--no-cache")
    else:
        env = {"ARCHVIZ_NO_CACHE": "1"}
    before, stored = times(), contents()
    second = here(*args, pythonpath=pkg, env=env)
    # with the cache off, the model's code imported tells a build; with it on, the entry the build writes does
    off = change.startswith("no-cache")
    assert second.built if off else contents() != stored, f"{change}: the cache answered"
    assert summary(second)["parameters"] == _params(width, layers)
    if off:  # skipped: nothing read, nothing written
        assert {p.name: p.stat().st_mtime_ns for p in entries()} == before
    else:  # and the rebuilt records are what the next run gets
        third = run(*args, pythonpath=pkg, env=env)
        assert not built(third) and summary(third)["parameters"] == _params(width, layers)


def test_an_edited_config_misses(tmp_path, here):
    folder = tmp_path / "dsv3"
    folder.mkdir()
    (folder / "model.py").write_text((DSV3 / "model.py").read_text())
    config = json.loads((DSV3 / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "records.json"
    args = ("walk", folder / "model.py", "-c", folder / "config.json", "-o", out)

    def layers() -> int:
        return sum(1 for m in loads(out.read_text()).modules if re.fullmatch(r"layers\.\d+", m.path))

    first = here(*args)
    assert first.returncode == 0 and len(stored := contents()) == 1, first.stderr[-2000:]
    assert layers() == config["n_layers"]
    assert not built(run(*args)) and layers() == config["n_layers"]
    config["n_layers"] += 1
    (folder / "config.json").write_text(json.dumps(config))
    second = here(*args)
    assert second.returncode == 0 and contents() != stored
    assert layers() == config["n_layers"]


def test_the_key_holds_every_version_and_option():
    v = cache.versions()
    import importlib.metadata

    assert v["torch"] == importlib.metadata.version("torch")
    assert v["transformers"] == importlib.metadata.version("transformers")
    assert v["python"].startswith(".".join(map(str, sys.version_info[:3])))
    base = cache.make_key("records", "hf:llama", {"set": ["a=1"], "shapes": True}, v)
    assert cache.key_id(base) == cache.key_id(cache.make_key("records", "hf:llama", {"shapes": True, "set": ["a=1"]},
                                                              dict(v)))
    others = [cache.make_key("records", "hf:llama", {"set": ["a=2"], "shapes": True}, v),
              cache.make_key("records", "hf:llama", {"set": ["a=1"], "shapes": False}, v),
              cache.make_key("records", "hf:mistral", {"set": ["a=1"], "shapes": True}, v),
              cache.make_key("cost", "hf:llama", {"set": ["a=1"], "shapes": True}, v)]
    for pkg in ("torch", "transformers", "archviz", "archviz_code", "python"):
        others.append(cache.make_key("records", "hf:llama", {"set": ["a=1"], "shapes": True}, {**v, pkg: "other"}))
    ids = {cache.key_id(k) for k in others}
    assert len(ids) == len(others) and cache.key_id(base) not in ids


def test_a_package_version_change_misses(tmp_path, monkeypatch):
    """An entry stored under this torch's version is not found once importlib.metadata reports another."""
    from helpers import hand_record  # noqa: E402  (tests/ is on sys.path under pytest)

    rec = hand_record([("", "Root", {}, [("w", (2, 3))])])
    key = cache.make_key("records", "x", {})
    assert cache.store(key, rec, {}) is None
    assert cache.lookup(key).record == rec
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.9.9" if name == "torch" else real(name))
    moved = cache.make_key("records", "x", {})
    assert moved["versions"]["torch"] == "9.9.9"
    assert cache.lookup(moved).record is None


@pytest.mark.parametrize("damage", ["corrupted", "truncated", "garbage header", "empty"])
def test_a_damaged_entry_is_rebuilt_with_a_note(pkg, damage, here):
    spec = "cachedpkg.model:build"
    assert here("summary", spec, "--json", pythonpath=pkg).returncode == 0
    (entry,) = entries()
    data = written = entry.read_bytes()
    if damage == "corrupted":  # a byte of the records flipped: still JSON, not what was written
        i = data.index(b'"parameters":') + len(b'"parameters":')
        data = data[:i] + (b"7" if data[i:i + 1] != b"7" else b"6") + data[i + 1:]
    elif damage == "truncated":  # a write killed half-way, not through archviz's rename
        data = data[: len(data) // 2]
    elif damage == "garbage header":
        data = b"\x00\xffnot json\n" + data.partition(b"\n")[2]
    else:
        data = b""
    entry.write_bytes(data)
    p = here("summary", spec, "--json", pythonpath=pkg)
    assert p.returncode == 0, p.stderr[-2000:]
    assert summary(p)["parameters"] == _params(8, 2)
    assert entry.read_bytes() == written  # built, and written over the damaged entry as it was
    said = [n for n in notes(p) if "cache entry" in n]
    assert len(said) == 1 and "unreadable; rebuilt" in said[0] and str(entry) in said[0]
    assert "Traceback" not in p.stderr
    again = run("summary", spec, "--json", pythonpath=pkg)  # rebuilt in place: a hit again
    assert not built(again) and not [n for n in notes(again) if "cache entry" in n]


def test_two_concurrent_runs_both_succeed(pkg):
    spec = "cachedpkg.model:build"
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda _: run("summary", spec, "--json", pythonpath=pkg, importtime=False), range(2))
    assert summary(a) == summary(b) and summary(a)["parameters"] == _params(8, 2)
    assert len(entries()) == 1
    assert not [n for n in os.listdir(cache.cache_dir()) if n.endswith(".tmp")]
    assert not built(run("summary", spec, "--json", pythonpath=pkg))


def test_the_folder_is_private_and_bounded(tmp_path):
    from helpers import hand_record  # noqa: E402

    rec = hand_record([("", "Root", {}, [("w", (2, 3))])])
    for i in range(5):
        key = cache.make_key("records", f"x{i}", {})
        assert cache.store(key, rec, {}) is None
        os.utime(cache.entry_path(key), ns=(i * 10**9, i * 10**9))  # entry i used at time i
    folder = cache.cache_dir()
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in entries())
    cache.evict(folder, max_entries=3)
    left = {p.name for p in entries()}
    assert left == {Path(cache.entry_path(cache.make_key("records", f"x{i}", {}))).name for i in (2, 3, 4)}
    size = entries()[0].stat().st_size
    cache.evict(folder, max_bytes=size)  # room for one: the most recently used
    assert [p.name for p in entries()] == [Path(cache.entry_path(cache.make_key("records", "x4", {}))).name]


def test_a_vouched_file_that_changes_misses(tmp_path):
    from helpers import hand_record  # noqa: E402

    rec = hand_record([("", "Root", {}, [("w", (2, 3))])])
    f = tmp_path / "helper.py"
    f.write_text("A = 1\n")
    key = cache.make_key("records", "y", {})
    cache.store(key, rec, {str(f): cache.sha256_file(str(f))})
    assert cache.lookup(key).record == rec
    f.write_text("A = 2\n")
    found = cache.lookup(key)
    assert found.record is None and found.note is None
    f.unlink()
    assert cache.lookup(key).record is None


def test_source_files_cover_the_folder_of_a_model_py(tmp_path):
    (tmp_path / "model.py").write_text("")
    (tmp_path / "kernel.py").write_text("")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "cfg.json").write_text("{}")
    got = cache.source_files(str(tmp_path / "model.py"), str(tmp_path / "cfg.json"), None)
    assert got == sorted(str(tmp_path / n) for n in ("cfg.json", "kernel.py", "model.py"))


def test_help_lists_no_cache_on_every_command(archviz_cli):
    for command in ("summary", "inspect", "walk", "build", "check", "cost", "diff"):
        p = archviz_cli(command, "--help")
        assert p.returncode == 0 and "--no-cache" in p.stdout, command



def test_the_bound_is_raised_by_archviz_cache_entries(monkeypatch):
    """`archviz gallery` keeps one entry per model: ARCHVIZ_CACHE_ENTRIES above the bound raises it, bytes in
    proportion; below it, or unreadable, the bound stays."""
    for value in ("", "10", "x", str(cache.MAX_ENTRIES)):
        monkeypatch.setenv("ARCHVIZ_CACHE_ENTRIES", value)
        assert cache.limits() == (cache.MAX_ENTRIES, cache.MAX_BYTES)
    monkeypatch.setenv("ARCHVIZ_CACHE_ENTRIES", "200")
    assert cache.limits() == (200, cache.MAX_BYTES * 200 // cache.MAX_ENTRIES)


def test_archviz_own_code_is_the_whole_package():
    """The fingerprint in the key and the files never taken for a model's own code are all of archviz, though this
    module sits in archviz/records/: an edit to archviz/pipeline/gallery.py is another archviz, and that file is not the
    model's code."""
    import archviz

    package = os.path.dirname(os.path.abspath(archviz.__file__))
    assert cache._ARCHVIZ == package
    gallery = os.path.join(package, "pipeline", "gallery.py")
    assert os.path.isfile(gallery) and cache._own_code([gallery]) == []
    assert cache._own_code([str(Path(__file__).parent / "fixtures" / "gallerycache" / "fine_model.py")])


def test_side_files_are_private_bounded_and_not_entries(monkeypatch):
    """A side file (the gallery's state per output folder) is read back as written, mode 0600, is no entry (the
    entries' bound does not count it), the MAX_SIDE newest are kept, and none is read or written with the cache off."""
    for i in range(cache.MAX_SIDE + 2):
        assert cache.write_side(f"side {i}", f"state {i}".encode()) is None
        side = [p for p in Path(cache.cache_dir()).iterdir() if p.name.endswith(".state")]
        newest = max(side, key=lambda p: p.stat().st_mtime_ns)
        os.utime(newest, ns=(i * 10**9, i * 10**9))  # written at time i
    assert not entries()
    side = [p for p in Path(cache.cache_dir()).iterdir() if p.name.endswith(".state")]
    assert len(side) == cache.MAX_SIDE and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in side)
    assert cache.read_side("side 0") is None and cache.read_side("side 1") is None  # the oldest went first
    assert cache.read_side(f"side {cache.MAX_SIDE + 1}") == f"state {cache.MAX_SIDE + 1}".encode()
    monkeypatch.setenv("ARCHVIZ_NO_CACHE", "1")
    assert cache.read_side(f"side {cache.MAX_SIDE + 1}") is None
    assert cache.write_side("side off", b"x") is None and cache.read_side("side off") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_an_entry_another_user_could_have_written_is_never_served():
    """Issue 46: an entry planted in a cache folder that others may write, or that belongs to another user, or an
    entry file of another user's, is not served as archviz's own (a miss with a note), and nothing is written
    into a folder of another user's."""
    from helpers import hand_record  # noqa: E402

    rec = hand_record([("", "Root", {}, [("w", (2, 3))])])
    key = cache.make_key("records", "planted", {})
    assert cache.store(key, rec, {}) is None and cache.lookup(key).record == rec
    folder, entry = cache.cache_dir(), cache.entry_path(key)
    os.chmod(folder, 0o777)
    found = cache.lookup(key)
    assert found.record is None and f"others may write in {folder}" in found.note
    os.chmod(folder, 0o700)
    os.chown(entry, 54321, 54321)
    assert cache.lookup(key).record is None
    os.chown(entry, 0, 0)
    os.chown(folder, 54321, 54321)
    found = cache.lookup(key)
    assert found.record is None and "belongs to another user" in found.note
    other = cache.make_key("records", "other", {})
    assert "belongs to another user" in cache.store(other, rec, {})
    assert not os.path.exists(cache.entry_path(other))

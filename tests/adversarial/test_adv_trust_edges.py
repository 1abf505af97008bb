"""Bad input at the edges is exit 2 with one line, and nothing archviz must not replace is replaced: configs of the
wrong JSON type or of impossible sizes (refused before building), an `--input` of 40 dims, a remote file that
changes between two reads, model code that exits or raises KeyboardInterrupt while it is imported, and `-o` onto a
device node, a symlink, someone's folder or /proc (each checked with os.lstat before and after).

A real process (``adv_tools.cli``) where only one shows it: the Hub's endpoint read from the environment at import,
model code that exits or reads the command line while archviz imports it; the rest in-process (``archviz_cli``)."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from adv_tools import BYTES, LINEAR_TENSORS, REPO, cli, entries_text, shard_bytes, write_shard
from hostile_hub import Hub, serving

BRANCHY = REPO / "tests" / "fixtures" / "branchy"
LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 100}


def refused(r, *fragments: str) -> str:  # noqa: ANN001
    """Exit 2, one line on stderr naming `fragments`, no traceback, nothing on stdout (adv_tools.refused, less its
    time bound: these commands import torch before they refuse, which takes seconds on a loaded machine)."""
    assert r.returncode == 2, (r.args, r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout and "internal error" not in r.stderr
    assert r.stdout == "", r.stdout[:500]
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def _lstat(path: Path) -> tuple[int, int, int, int]:
    st = os.lstat(path)
    return st.st_mode, st.st_ino, st.st_rdev, st.st_size


# --- configs: wrong JSON types, impossible sizes ------------------------------------------------------------------


@pytest.mark.parametrize("edit, fragment", [
    ({"model_type": ["llama", "mistral"]}, "model_type: a string or null, not ['llama', 'mistral']"),
    ({"model_type": {"name": "llama"}}, "model_type: a string or null, not {'name': 'llama'}"),
    ({"num_hidden_layers": -3}, "num_hidden_layers cannot be negative"),
    ({"num_attention_heads": 0}, "num_attention_heads = 0"),
    ({"text_config": {"hidden_size": -64}}, "hidden_size cannot be negative"),
])
def test_a_transformers_config_of_the_wrong_type_or_size_is_refused(tmp_path: Path, edit: dict, fragment: str,
                                                                    archviz_cli) -> None:  # noqa: ANN001
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, **edit}))
    refused(archviz_cli("summary", path), str(path), fragment)


@pytest.mark.parametrize("edit, fragment", [
    ({"n_layers": 0}, "n_layers = 0"),
    ({"n_layers": -2}, "n_layers cannot be negative"),
    ({"vocab_size": 0}, "vocab_size = 0"),
])
def test_a_reference_config_of_impossible_sizes_is_refused_before_building(tmp_path: Path, edit: dict, fragment: str,
                                                                          archviz_cli) -> None:  # noqa: ANN001
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads((BRANCHY / "config.json").read_text()), **edit}))
    refused(archviz_cli("summary", BRANCHY / "model.py", "--config", path), str(path), fragment)


def test_an_input_of_40_dims_is_refused(tmp_path: Path, archviz_cli) -> None:  # noqa: ANN001
    out = tmp_path / "r.json"
    r = archviz_cli("walk", BRANCHY / "model.py", "--config", BRANCHY / "config.json", "--shapes",
            "--input", "tokens=" + ",".join(["2"] * 40), "-o", out)
    refused(r, "40 dims")
    assert not out.exists()


# --- a remote file that changes under the read ----------------------------------------------------------------------


def _shard(names: list[str]) -> bytes:
    text, size = entries_text({n: ("U8", [2]) for n in names}, BYTES)
    return shard_bytes(text, b"\0" * size)


@pytest.fixture
def hub() -> Iterator[Hub]:
    with serving(Hub(files={"model.safetensors": _shard(["a.w"])})) as h:
        yield h


def test_a_remote_file_that_changes_between_two_reads_is_refused(hub: Hub, tmp_path: Path) -> None:
    """The first read (its length prefix) sees one file, the next (its header) another, of another size."""
    hub.rewritten["model.safetensors"] = _shard(["a.w", "b.w", "c.w"])
    env = {"HF_ENDPOINT": hub.url, "NO_PROXY": "127.0.0.1,localhost", "HF_HUB_DISABLE_TELEMETRY": "1"}
    r = cli("manifest", "hf://org/x", "-o", tmp_path / "m.json", env=env)
    refused(r, "model.safetensors", "the file changed while archviz read it")
    assert not (tmp_path / "m.json").exists()
    # the baseline: the same file, left alone, is read
    r = cli("manifest", "hf://org/x", "-o", tmp_path / "m.json", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensors"] == 3


# --- model code that exits while it is imported -------------------------------------------------------------------


EXITS = {
    "sys.exit": ("import sys\nsys.exit(3)\n", 3, None),
    "sys.exit(message)": ("import sys\nsys.exit('no GPU here')\n", 1, "no GPU here"),
    # argparse reads archviz's own command line, prints its usage lines and exits 2
    "argparse": ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--ckpt-path', required=True)\n"
                 "args = p.parse_args()\n", 2, "the following arguments are required: --ckpt-path"),
    "KeyboardInterrupt": ("raise KeyboardInterrupt\n", None, None),
}


@pytest.mark.parametrize("case", list(EXITS))
def test_model_code_that_exits_while_imported_is_one_line(tmp_path: Path, case: str) -> None:
    head, status, said = EXITS[case]
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.py").write_text(head + (BRANCHY / "model.py").read_text())
    (folder / "config.json").write_text((BRANCHY / "config.json").read_text())
    r = cli("summary", folder / "model.py", "--config", folder / "config.json", "--json")
    line = refused_json(r)
    if status is None:
        assert "the model code exited (KeyboardInterrupt, raised by the code, not a Ctrl-C) while importing " \
               "model.py" in line
    else:
        assert f"the model code exited (status {status}) while importing model.py" in line
    if said:
        assert f"it said: {said}" in line or said in line
    assert "usage:" not in r.stderr


def refused_json(r) -> str:  # noqa: ANN001
    """`refused` for a --json command: one line on stderr, the same error as JSON on stdout."""
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout and "internal error" not in r.stderr
    assert json.loads(r.stdout)["exit_code"] == 2
    return lines[0]


def test_a_factory_module_that_exits_while_imported_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "exiting_factory.py").write_text(textwrap.dedent("""\
        import sys
        import torch
        sys.exit(4)
        def build():
            return torch.nn.Linear(4, 2)
    """))
    r = cli("summary", "exiting_factory:build", env={"PYTHONPATH": str(tmp_path)})
    refused(r, "the model code exited (status 4) while importing exiting_factory")


# --- outputs: nothing but a regular file (or a site archviz wrote) is replaced ------------------------------------


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_shard(tmp_path_factory.mktemp("ckpt") / "model.safetensors", LINEAR_TENSORS)


@pytest.mark.parametrize("kind", ["chardev", "symlink", "folder"])
def test_manifest_replaces_only_a_regular_file(shard: Path, tmp_path: Path, kind: str,
                                               archviz_cli) -> None:  # noqa: ANN001
    target = tmp_path / "m.json"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    if kind == "chardev":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
    elif kind == "symlink":
        target.symlink_to(victim)
    else:
        target.mkdir()
        (target / "mine.txt").write_text("my file")
    before = _lstat(target)
    refused(archviz_cli("manifest", shard, "-o", target), str(target))
    assert _lstat(target) == before
    assert victim.read_text() == "keep me"
    if kind == "folder":
        assert (target / "mine.txt").read_text() == "my file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "victim.txt"]  # no temp file left


def test_manifest_and_build_under_proc_are_one_line(shard: Path, archviz_cli) -> None:  # noqa: ANN001
    refused(archviz_cli("manifest", shard, "-o", "/proc/archviz-manifest.json"), "/proc/archviz-manifest.json")
    r = archviz_cli("build", BRANCHY / "model.py", "--config", BRANCHY / "config.json", "-o", "/proc/archviz-site")
    refused(r, "/proc/archviz-site")
    assert not os.path.lexists("/proc/archviz-site")


@pytest.mark.parametrize("kind", ["symlink-to-folder", "users-folder", "chardev"])
def test_build_replaces_only_a_site_it_wrote(tmp_path: Path, kind: str, archviz_cli) -> None:  # noqa: ANN001
    target = tmp_path / "site"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my file")
    if kind == "symlink-to-folder":
        target.symlink_to(mine)
    elif kind == "users-folder":
        target.mkdir()
        (target / "notes.txt").write_text("my file")
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    before = _lstat(target)
    r = archviz_cli("build", BRANCHY / "model.py", "--config", BRANCHY / "config.json", "-o", target)
    refused(r, str(target))
    assert _lstat(target) == before
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "site"]  # no temp folder left

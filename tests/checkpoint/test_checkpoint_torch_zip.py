"""PyTorch's own checkpoints: zips written by torch.save in the test, read without running their pickle.

Hostile ones are real torch.save zips whose data.pkl is replaced by a pickle that would run a command, import a
module a state dict does not, or nest past the bound: each is refused in one line and the command never runs (its
marker file stays absent).
"""

from __future__ import annotations

import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest
import torch

from archviz.checkpoint import open_checkpoint
from tests.adversarial.adv_tools import cli_here, refused


class _Model(torch.nn.Module):
    """A small model with a parameter, a buffer, a bf16 weight and a strided (transposed) view saved as itself."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(16, 8)
        self.proj = torch.nn.Linear(8, 4).to(torch.bfloat16)
        self.norm = torch.nn.BatchNorm1d(4)


SOURCE = ("tests.checkpoint.test_checkpoint_torch_zip:_Model",)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    folder = tmp_path_factory.mktemp("pt")
    state = _Model().state_dict()
    torch.save(state, folder / "model.pt")
    return folder / "model.pt", state


def test_torch_save_zip_read_without_its_data(saved) -> None:
    path, state = saved
    inv = open_checkpoint(path)
    assert {n: t.shape for n, t in inv.tensors.items()} == {n: tuple(t.shape) for n, t in state.items()}
    dtypes = {torch.float32: "F32", torch.bfloat16: "BF16", torch.int64: "I64"}
    assert {n: t.dtype for n, t in inv.tensors.items()} == {n: dtypes[t.dtype] for n, t in state.items()}


def test_check_passes_and_names_a_dropped_tensor(saved, tmp_path, archviz_cli) -> None:
    path, state = saved
    assert cli_here(archviz_cli, "check", *SOURCE, "--checkpoint", path).returncode == 0
    dropped = dict(state)
    del dropped["proj.bias"]
    torch.save(dropped, tmp_path / "dropped.bin")
    r = cli_here(archviz_cli, "check", *SOURCE, "--checkpoint", tmp_path / "dropped.bin", "--json")
    assert r.returncode == 1
    missing = {e["model"] for e in json.loads(r.stdout)["tensors"] if e["verdict"] == "missing"}
    assert missing == {"proj.bias"}


def test_sharded_by_index(saved, tmp_path, archviz_cli) -> None:
    _, state = saved
    names = list(state)
    shards = {"pytorch_model-00001-of-00002.bin": names[:3], "pytorch_model-00002-of-00002.bin": names[3:]}
    for shard, keys in shards.items():
        torch.save({k: state[k] for k in keys}, tmp_path / shard)
    index = {"metadata": {}, "weight_map": {k: s for s, keys in shards.items() for k in keys}}
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    inv = open_checkpoint(tmp_path)
    assert list(inv.tensors) == names and len(inv.shards) == 2
    assert cli_here(archviz_cli, "check", *SOURCE, "--checkpoint", tmp_path).returncode == 0


class _RunsCommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # what a malicious checkpoint does: os.system on load
        return (os.system, (f"touch {self.marker}",))


def _nested(depth: int) -> tuple:
    t: tuple = (1, 2, 3, 4)
    for _ in range(depth):
        t = (t, 1, 2, 3)
    return t


def _with_pickle(src: Path, dst: Path, payload: bytes) -> Path:
    """``src`` (a real torch.save zip) with its data.pkl replaced by ``payload``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = payload if info.filename.endswith("/data.pkl") else zin.read(info)
            zout.writestr(info, data)
    return dst


@pytest.mark.parametrize("case", ["os.system", "other import", "nesting"])
def test_malicious_pickles_are_refused_and_nothing_runs(saved, tmp_path, archviz_cli, case) -> None:
    path, state = saved
    marker = tmp_path / "ran"
    payload = {
        "os.system": lambda: pickle.dumps({"w": _RunsCommand(marker)}, protocol=2),
        "other import": lambda: pickle.dumps({"w": Path("x")}, protocol=2),
        "nesting": lambda: pickle.dumps({"w": _nested(100)}, protocol=2),
    }[case]()
    bad = _with_pickle(path, tmp_path / "bad.pt", payload)
    line = refused(cli_here(archviz_cli, "check", *SOURCE, "--checkpoint", bad))
    assert ("nests more than" if case == "nesting" else "imports") in line, line
    assert not marker.exists()


@pytest.mark.parametrize("bound,fragment", [("MAX_ZIP_ENTRIES", "entries"), ("MAX_OPCODES", "opcodes"),
                                            ("MAX_PICKLE_BYTES", "data.pkl is")])
def test_bounds_refuse_before_the_work(saved, monkeypatch, bound, fragment) -> None:
    """Each bound (set low here: real ones hold 500,000 entries, 5,000,000 opcodes, 64 MiB) refuses in one error."""
    from archviz.checkpoint import torch_zip
    from archviz.errors import CheckpointError

    monkeypatch.setattr(torch_zip, bound, 3)
    with pytest.raises(CheckpointError, match=fragment):
        torch_zip.read_torch_zip(saved[0])


def test_remote_by_range_requests(saved, tmp_path, hub_server, archviz_cli) -> None:
    """hf://owner/name with only pytorch_model.bin (or its index): the zip's end record, central directory and
    data.pkl by range requests; a 4 MB storage is not asked for."""
    path, state = saved
    hub_server.add_repo("o/pt", {"pytorch_model.bin": path.read_bytes(), "config.json": b"{}"})
    assert {n: t.shape for n, t in open_checkpoint("hf://o/pt").tensors.items()} == {
        n: tuple(t.shape) for n, t in state.items()}
    assert cli_here(archviz_cli, "check", *SOURCE, "--checkpoint", "hf://o/pt").returncode == 0
    torch.save({"w": torch.zeros(1024, 1024)}, tmp_path / "big.bin")
    big = (tmp_path / "big.bin").read_bytes()
    index = {"metadata": {}, "weight_map": {"w": "pytorch_model-00001-of-00001.bin"}}
    hub_server.add_repo("o/big", {"pytorch_model-00001-of-00001.bin": big,
                                  "pytorch_model.bin.index.json": json.dumps(index).encode()})
    assert open_checkpoint("hf://o/big").tensors["w"].shape == (1024, 1024)
    asked = sum(r.body_bytes for r in hub_server.file_requests("pytorch_model-00001-of-00001.bin"))
    assert asked < 300_000 < len(big)

"""hf:// sources against a real local HTTP server that answers the Hub's URLs (see conftest.hub_server)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch
from safetensors.torch import save_file

from archviz.checkpoint import CheckpointInventory, open_checkpoint
from archviz.errors import CheckpointError

if TYPE_CHECKING:
    from conftest import HubServer

SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A real 3-shard checkpoint with an index, plus the repo's other files; returns folder and files."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    g = torch.Generator().manual_seed(7)
    weight_map = {}
    for i, shard in enumerate(SHARDS):
        tensors = {
            f"model.layers.{i}.self_attn.q_proj.weight": torch.randn(32, 16, generator=g).to(torch.bfloat16),
            f"model.layers.{i}.mlp.down_proj.weight": torch.randn(16, 64, generator=g).to(torch.float8_e4m3fn),
            f"model.layers.{i}.mlp.down_proj.weight_scale_inv": torch.ones(1, 1),
            f"model.layers.{i}.input_layernorm.weight": torch.ones(16, dtype=torch.bfloat16),
        }
        if i == 0:
            tensors["model.embed_tokens.weight"] = torch.randn(100, 16, generator=g).to(torch.bfloat16)
        save_file(tensors, folder / shard, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, shard))
    index = {"metadata": {"total_size": 4242}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (folder / "config.json").write_text('{"model_type": "tiny"}')
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    return folder, files


def _shard_requests(hub: HubServer, name: str) -> list[tuple[str, str | None, int, int]]:
    return [(r.method, r.range, r.status, r.body_bytes) for r in hub.file_requests(name)]


def test_hf_sharded_equals_local_and_reads_only_headers(hub_server: HubServer, tiny: tuple[Path, dict]) -> None:
    folder, files = tiny
    commit = hub_server.add_repo("org/tiny", files)
    calls: list[tuple[int, int, str]] = []

    inv = open_checkpoint("hf://org/tiny", progress=lambda *a: calls.append(a))

    local = open_checkpoint(folder)
    assert inv.same_content(local)
    assert inv.source == f"hf://org/tiny@{commit}"
    assert inv.revision == commit
    assert inv.metadata["model"] == "org/tiny"
    assert inv.metadata["index"] == {"total_size": 4242}
    assert inv.metadata["header"] == {"format": "pt"}
    assert sorted(c[2] for c in calls) == SHARDS and [c[:2] for c in calls] == [(1, 3), (2, 3), (3, 3)]

    # huggingface_hub may also ask for its own telemetry (/api/agent-harnesses); only repo traffic counts
    log = [r for r in hub_server.log if r.path.startswith("/api/models/") or "/resolve/" in r.path]
    assert log[0].path == "/api/models/org/tiny/revision/main"
    index_requests = hub_server.file_requests("model.safetensors.index.json")
    assert [(r.method, r.range, r.status) for r in index_requests] == [("GET", None, 200)]
    assert hub_server.file_requests("config.json") == []
    served = 0
    for shard in inv.shards:
        n = shard.header_bytes
        # two range requests: the 8-byte prefix, then exactly the header; nothing else
        assert _shard_requests(hub_server, shard.name) == [
            ("GET", "bytes=0-7", 206, 8),
            ("GET", f"bytes=8-{n - 1}", 206, n - 8),
        ]
        assert all(f"/resolve/{commit}/" in r.path for r in hub_server.file_requests(shard.name))
        served += sum(r.body_bytes for r in hub_server.file_requests(shard.name))
    assert served == sum(s.header_bytes for s in inv.shards) < sum(s.file_bytes for s in inv.shards)
    assert len(log) == 1 + 1 + 2 * len(SHARDS)


def test_hf_revision_and_single_file_repo(hub_server: HubServer, tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.ones(3, 4), "b": torch.zeros(4, dtype=torch.int64)}, path)
    commit = hub_server.add_repo("org/solo", {"model.safetensors": path.read_bytes(), "README.md": b"hi"})
    inv = open_checkpoint(f"hf://org/solo@{commit}")
    assert isinstance(inv, CheckpointInventory)
    assert inv.same_content(open_checkpoint(path))
    assert [r.path for r in hub_server.log if r.path.startswith("/api/models/")] == [
        f"/api/models/org/solo/revision/{commit}"
    ]
    with pytest.raises(CheckpointError, match="revision not found") as info:
        open_checkpoint("hf://org/solo@v9")
    assert "hf://org/solo@v9" in info.value.message and info.value.hint


def test_hf_404_missing_shard(hub_server: HubServer, tiny: tuple[Path, dict]) -> None:
    hub_server.add_repo("org/tiny", tiny[1])
    hub_server.missing.add(SHARDS[1])
    with pytest.raises(CheckpointError) as info:
        open_checkpoint("hf://org/tiny")
    line = info.value.line()
    assert "404" in line and SHARDS[1] in line and "\n" not in line


def test_hf_404_missing_repo(hub_server: HubServer) -> None:
    with pytest.raises(CheckpointError, match=r"repository not found \(HTTP 404\)") as info:
        open_checkpoint("hf://nobody/nothing")
    assert "hf://nobody/nothing" in info.value.message
    assert "\n" not in info.value.line()


def test_hf_416_refused_range(hub_server: HubServer, tiny: tuple[Path, dict]) -> None:
    hub_server.add_repo("org/tiny", tiny[1])
    hub_server.refuse_range.add(SHARDS[2])
    with pytest.raises(CheckpointError) as info:
        open_checkpoint("hf://org/tiny")
    assert "416" in info.value.message and SHARDS[2] in info.value.message
    assert "\n" not in info.value.line()


def test_hf_timeout(hub_server: HubServer, tiny: tuple[Path, dict]) -> None:
    hub_server.add_repo("org/tiny", tiny[1])
    hub_server.sleep_s = 3.0
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError, match=r"no answer within 0\.3 s") as info:
        open_checkpoint("hf://org/tiny", timeout=0.3)
    assert time.perf_counter() - t0 < 2.5
    assert "hf://org/tiny" in info.value.message and info.value.hint


def test_hf_timeout_on_a_shard(hub_server: HubServer, tiny: tuple[Path, dict]) -> None:
    hub_server.add_repo("org/tiny", tiny[1])
    hub_server.slow_files.add(SHARDS[1])  # listing and index answer at once; this shard stalls
    hub_server.sleep_s = 3.0
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError, match=r"no answer within 0\.5 s") as info:
        open_checkpoint("hf://org/tiny", timeout=0.5)
    assert SHARDS[1] in info.value.message
    assert time.perf_counter() - t0 < 2.5


def test_hf_server_ignoring_range_is_refused(hub_server: HubServer, tiny: tuple[Path, dict]) -> None:
    hub_server.add_repo("org/tiny", tiny[1])
    hub_server.ignore_range.add(SHARDS[0])
    with pytest.raises(CheckpointError, match="ignored the Range request"):
        open_checkpoint("hf://org/tiny")


def test_hf_pickle_only_repo(hub_server: HubServer) -> None:
    """A plain pickle (not torch.save's zip) is refused: only range reads of its end, no pickle run."""
    hub_server.add_repo("old/model", {"pytorch_model.bin": b"\x80\x02}q\x00.", "config.json": b"{}"})
    with pytest.raises(CheckpointError, match="pickle checkpoints are not read"):
        open_checkpoint("hf://old/model")
    assert all(r.range is not None for r in hub_server.file_requests("pytorch_model.bin"))
    hub_server.add_repo("old/other", {"model.pt": b"\x80\x02}q\x00.", "config.json": b"{}"})
    with pytest.raises(CheckpointError, match="only pickle checkpoints"):
        open_checkpoint("hf://old/other")
    assert hub_server.file_requests("model.pt") == []


@pytest.mark.parametrize("spec", ["hf://", "hf://a/b/c", "hf://a b/c", "hf://a/b@"])
def test_hf_bad_spec(spec: str) -> None:
    with pytest.raises(CheckpointError, match="not a Hugging Face spec"):
        open_checkpoint(spec)

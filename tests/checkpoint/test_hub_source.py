"""A Hub repository as a source (issue 42): `archviz summary org/name` against a Hub-like server on 127.0.0.1
(HF_ENDPOINT): config.json fetched through huggingface_hub, the model built on meta, and checked against the same
repository's sharded safetensors headers (real headers, written by the safetensors library) in the same command.

The count is worked out here from the config with a Llama layer's formula."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save

CFG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 64, "hidden_size": 16,
       "intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
       "max_position_embeddings": 128, "tie_word_embeddings": False}


def llama_tensors(c: dict) -> dict[str, tuple[int, ...]]:
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = h // c["num_attention_heads"] * c["num_key_value_heads"]
    out = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    for n in range(c["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out.update({p + "self_attn.q_proj.weight": (h, h), p + "self_attn.k_proj.weight": (kv, h),
                    p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, h),
                    p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
                    p + "mlp.down_proj.weight": (h, i), p + "input_layernorm.weight": (h,),
                    p + "post_attention_layernorm.weight": (h,)})
    return out


def sharded_repo(tensors: dict[str, tuple[int, ...]]) -> dict[str, bytes]:
    """config.json, two safetensors shards and their index."""
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    files = {"config.json": json.dumps(CFG).encode()}
    weight_map = {}
    for shard, part in halves.items():
        files[shard] = save({n: torch.zeros(tensors[n], dtype=torch.bfloat16) for n in part})
        weight_map.update({n: shard for n in part})
    files["model.safetensors.index.json"] = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    return files


@pytest.fixture()
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    return tmp_path


def test_summary_of_a_hub_repository_checks_its_headers(hub_server, hub_cache, archviz_cli):
    tensors = llama_tensors(CFG)
    hub_server.add_repo("tiny-org/tiny-llama", sharded_repo(tensors))
    expected = sum(torch.Size(s).numel() for s in tensors.values())
    r = archviz_cli("summary", "tiny-org/tiny-llama", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["parameters"] == expected
    assert data["checkpoint"]["verdict"] == "match"


def test_a_repository_missing_one_layer_says_which(hub_server, hub_cache, archviz_cli):
    tensors = {n: s for n, s in llama_tensors(CFG).items() if not n.startswith("model.layers.1.")}
    commit = hub_server.add_repo("tiny-org/gappy", sharded_repo(tensors))
    r = archviz_cli("summary", f"hf://tiny-org/gappy@{commit}")  # a revision: the same one for config and headers
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("checkpoint "))
    assert f"tiny-org/gappy@{commit}" in line and "mismatch" in line and "model.layers.1: missing" in line and "layers.0" not in line
    expected = sum(torch.Size(s).numel() for s in llama_tensors(CFG).values())
    assert f"{expected:,}" in r.stdout  # the model's count: the config says three layers


def test_no_such_repository_is_one_line(hub_server, hub_cache, archviz_cli):
    r = archviz_cli("summary", "tiny-org/absent")
    assert r.returncode == 2 and "no such repository" in r.stderr and "Traceback" not in r.stderr


def test_remote_code_of_a_hub_repository(hub_server, hub_cache, archviz_cli, tmp_path: Path):
    """config.json's auto_map names the repository's own code: with --trust-remote-code the .py files it names are
    fetched too and the repository's classes built; a repository without safetensors says it was not checked."""
    from helpers import TESTS, modules_cache

    folder = TESTS / "data" / "remote_code"
    hub_server.add_repo("tiny-org/remote", {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()})
    cfg = json.loads((folder / "config.json").read_text())
    v, h, n, e = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["expansion"]
    block = 2 * h + (h * e * h + e * h) + e * h * h  # LayerNorm, up (+ bias), down (no bias)
    with modules_cache(tmp_path / "hf-modules"):
        r = archviz_cli("summary", "tiny-org/remote", "--trust-remote-code", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model_class"].endswith("TinyRemoteForCausalLM") and out["parameters"] == v * h + n * block + h * v
    assert "checkpoint" not in out and "not checked" in r.stderr
    assert any(q.path.endswith("/modeling_tiny.py") for q in hub_server.log)


def test_offline_reads_the_cache(hub_server, hub_cache, archviz_cli, monkeypatch: pytest.MonkeyPatch):
    """HF_HUB_OFFLINE=1: the config.json fetched before is read from the local cache, the server never asked."""
    hub_server.add_repo("tiny-org/cached", sharded_repo(llama_tensors(CFG)))
    assert archviz_cli("summary", "tiny-org/cached", "--json").returncode == 0
    asked = len(hub_server.log)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = archviz_cli("summary", "tiny-org/cached", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["parameters"] == sum(torch.Size(s).numel() for s in llama_tensors(CFG).values())
    assert not any("config.json" in q.path for q in hub_server.log[asked:])


def test_an_oversized_config_is_refused_before_it_is_read(hub_server, hub_cache, archviz_cli):
    from archviz.sources.hub import MAX_FILE_BYTES

    hub_server.add_repo("tiny-org/huge", {"config.json": b" " * (MAX_FILE_BYTES + 1)})
    r = archviz_cli("summary", "tiny-org/huge")
    assert r.returncode == 2 and "more than a config" in r.stderr and "Traceback" not in r.stderr
    assert not [q for q in hub_server.file_requests("config.json") if q.method == "GET" and q.body_bytes]

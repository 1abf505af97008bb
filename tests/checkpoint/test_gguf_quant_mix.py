"""A GGUF's quant mix where a reader meets it: the site's node pages (the stored type and bytes beside the parameter
count) and `cost --checkpoint` (the weights' bytes as the file stores them, in the weights figure and in the time
bounds of `--hardware`).

A small llama is built here and written in Q8_0 with llama.cpp's own GGUFWriter (the helpers of
test_checkpoint_gguf.py); every byte count below is worked out here from the GGML block sizes (Q8_0: 32 values in
34 bytes; F32: 4 bytes a value), never read from archviz.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf")

from tests.adversarial.adv_tools import cli_here  # noqa: E402
from tests.checkpoint.test_checkpoint_gguf import BYTES_PER_BLOCK, _tensors, write_gguf  # noqa: E402


def _stored(a: np.ndarray, qtype: str = "Q8_0") -> tuple[str, int]:
    """(type, bytes) of one tensor as write_gguf stores it: matrices in `qtype`, vectors F32."""
    t = "F32" if a.ndim == 1 else qtype
    block, size = BYTES_PER_BLOCK[t]
    assert a.size % block == 0
    return t, a.size // block * size


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, np.ndarray]]:
    """(config.json, its Q8_0 GGUF, the tensors written) of a 2-layer llama with an untied head."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False))
    folder = tmp_path_factory.mktemp("llama")
    model.config.save_pretrained(folder)
    tensors = _tensors("llama", model.state_dict())
    path = write_gguf(folder / "tiny-llama.Q8_0.gguf", "llama", 2, tensors, "Q8_0")[0]
    return folder / "config.json", path, tensors


def _facts(page: Path) -> dict[str, str]:
    """A node page's facts (dt → dd), as text."""
    text = page.read_text()
    pairs = re.findall(r"<dt>(.*?)</dt><dd[^>]*>(.*?)</dd>", text, re.S)
    return {dt: " ".join(html.unescape(re.sub(r"<[^>]+>", "", dd)).split()) for dt, dd in pairs}


def test_node_pages_show_stored_type_and_bytes(llama, tmp_path, archviz_cli) -> None:
    config, gguf_file, tensors = llama
    site = tmp_path / "site"
    r = cli_here(archviz_cli, "build", config, "--checkpoint", gguf_file, "-o", site, "--no-cache")
    assert r.returncode == 0, r.stderr[-3000:]
    nodes = next(site.glob("*/n"))
    # v_proj: [16, 32] per layer, Q8_0: 16 blocks of 34 bytes
    v = [_stored(tensors[f"blk.{i}.attn_v.weight"]) for i in range(2)]
    assert {t for t, _ in v} == {"Q8_0"} and v[0][1] == v[1][1] == 512 // 32 * 34
    facts = _facts(nodes / "model.layers.0-1.self_attn.v_proj.html")
    assert facts["parameters"].startswith("512 ")
    assert facts["stored"].startswith(f"{v[0][1]:,} · × 2 layers = {v[0][1] + v[1][1]:,} bytes"), facts["stored"]
    assert "as Q8_0 (8.50 bits a weight)" in facts["stored"]
    # a decoder layer: its matrices in Q8_0, its two norms in F32
    layer = [_stored(a) for n, a in tensors.items() if n.startswith(("blk.0.", "blk.1."))]
    q8 = sum(b for t, b in layer if t == "Q8_0")
    f32 = sum(b for t, b in layer if t == "F32")
    facts = _facts(nodes / "model.layers.0-1.html")
    assert f"= {q8 + f32:,} bytes" in facts["stored"], facts["stored"]
    assert f"Q8_0 {q8:,} (8.50 bits a weight), F32 {f32:,} (32.00 bits a weight)" in facts["stored"]


def test_cost_takes_the_weights_from_the_files_quant_mix(llama, tmp_path, archviz_cli) -> None:
    from archviz.checkpoint import compare
    from archviz.cost.memory import weight_bytes
    from archviz.cost.report import cost_report
    from archviz.pipeline import read_records

    config, gguf_file, tensors = llama
    by_type: dict[str, int] = {}
    for a in tensors.values():
        t, b = _stored(a)
        by_type[t] = by_type.get(t, 0) + b
    records = tmp_path / "cost.json"
    r = cli_here(archviz_cli, "cost", config, "--checkpoint", gguf_file, "-T", "16", "-L", "64", "--json", "--no-cache",
                 "-o", records)
    assert r.returncode == 0, r.stderr[-3000:]
    memory = json.loads(r.stdout)["memory"]
    assert memory["weights"] == sum(by_type.values()) == 23_936 + 640
    assert memory["weights_by_dtype"] == by_type and memory["stored_in"] == gguf_file.name
    assert memory["serving"] == memory["weights"] + memory["kv"] + memory["activation_peak"]

    # the same records checked against a file that lost a layer's down projection: no match, so the weights are
    # the code's again (bfloat16 here: 2 bytes a weight), and a note says why
    broken = {n: a for n, a in tensors.items() if n != "blk.1.ffn_down.weight"}
    bad_file = write_gguf(tmp_path / "broken.gguf", "llama", 2, broken, "Q8_0")[0]
    record = compare(read_records(str(records)), bad_file)
    report = cost_report(record)
    params = sum(a.size for a in tensors.values())
    assert report.memory.stored_in is None and report.memory.weights == sum(weight_bytes(record).values()) == 2 * params
    assert any("broken.gguf" in n and "mismatch" in n for n in report.notes), report.notes


def test_hardware_bounds_read_the_files_bytes(tmp_path, archviz_cli) -> None:
    """`cost --hardware h100 --checkpoint` bounds a decode step by the bytes the Q4_0 file stores: every tensor
    once, but of each layer's stacked experts the share that one token's top-2 of 4 touches, and one row of the
    embedding; the time is those bytes and the KV cache over the H100's bandwidth (hardware.toml, read here)."""
    import tomllib

    import torch
    from transformers import MixtralConfig, MixtralForCausalLM

    from tests.checkpoint.test_checkpoint_gguf import write_gguf as write

    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, tie_word_embeddings=False)
    MixtralForCausalLM(cfg).config.save_pretrained(tmp_path)
    tensors = _tensors("llama", MixtralForCausalLM(cfg).state_dict())
    gguf_file = write(tmp_path / "mix.Q4_0.gguf", "llama", 2, tensors, "Q4_0")[0]
    stored = {n: _stored(a, "Q4_0")[1] for n, a in tensors.items()}
    experts = sum(b for n, b in stored.items() if "_exps." in n)
    embedding = stored["token_embd.weight"]
    B, L = 1, 64
    touched = 1 - (1 - cfg.num_experts_per_tok / cfg.num_local_experts) ** B  # the experts' share one token reads
    weights = sum(stored.values()) - experts * (1 - touched) - embedding * (1 - B / cfg.vocab_size)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    kv = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * head_dim * L * B * 2  # K and V in bfloat16
    table = tomllib.loads((Path(__file__).parents[2] / "archviz" / "cost" / "hardware.toml").read_text())["h100"]
    bandwidth = table["memory_bandwidth_gb_s"] * 1e9

    r = cli_here(archviz_cli, "cost", tmp_path / "config.json", "--checkpoint", gguf_file, "--hardware", "h100",
                 "-B", str(B), "-T", "16", "-L", str(L), "--json", "--no-cache")
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    decode = got["hardware"][0]["decode"]
    assert decode["weights"] == pytest.approx(weights) and decode["kv"] == kv
    assert decode["t_memory"] == pytest.approx((weights + kv) / bandwidth)
    assert got["hardware"][0]["fit"]["serving"] == got["memory"]["serving"]  # the file's bytes there too
    assert got["memory"]["weights"] == sum(stored.values())
    assert any(gguf_file.name in n and "Q4_0" in n for n in got["hardware"][0]["notes"])

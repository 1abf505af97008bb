"""A GGUF's quant mix where a reader meets it: the site's node pages (the stored type and bytes beside the parameter
count) and `cost --checkpoint` (the weights' bytes as the file stores them).

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


def _stored(a: np.ndarray) -> tuple[str, int]:
    """(type, bytes) of one tensor as write_gguf stores it: matrices Q8_0, vectors F32."""
    t = "F32" if a.ndim == 1 else "Q8_0"
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

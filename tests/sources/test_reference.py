"""A reference model's launcher dtype (issue 29): meta-llama's `generation.py` builds the model after
`torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)`, so its plain-attribute KV cache (`self.cache_k`) holds
bfloat16 and a token costs 2 bytes a value. The fixture is the plain-attribute cache model of tests/fixtures/kvcaches
with such a launcher beside it; the figures are worked out from its config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from archviz.cost.measure import measure

KV = Path(__file__).resolve().parent.parent / "fixtures" / "kvcaches"

GENERATION = '''import torch


class Llama:
    @staticmethod
    def build(model_args):
        if torch.cuda.is_bf16_supported():
            torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)
        else:
            torch.set_default_tensor_type(torch.cuda.HalfTensor)
'''


def test_generation_py_sets_the_dtype(tmp_path: Path):
    for name in ("model.py", "config.json"):
        shutil.copy(KV / name, tmp_path / name)
    (tmp_path / "generation.py").write_text(GENERATION)
    cfg = json.loads((KV / "config.json").read_text())
    record = measure(str(tmp_path / "model.py"), batch=1, seq=8, context=64)
    assert any("default dtype bfloat16, as its launcher sets (generation.py:8)" in n for n in record.source.notes)
    assert [dtype for dtype, _ in record.summary.bytes_by_dtype] == ["bfloat16"]
    head_dim = cfg["dim"] // cfg["n_heads"]
    entries = record.extra("cost")["kv"]["entries"]
    cache_k = [e for e in entries if e["name"] == "cache_k"]
    assert cache_k and all(e["dtype"] == "bfloat16" and e["element_bytes"] == 2 and e["ratio"] == 1 and
                           e["width"] == cfg["n_kv_heads"] * head_dim for e in cache_k)  # a slot of kv × hd a token

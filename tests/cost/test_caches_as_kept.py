"""Decode cost of models whose cache is not a constructor's buffer (issue 42, item 7): a cache made by a method the
generate loop calls after construction (tests/data/setkvcache: `set_kv_cache(batch_size, max_seq_len, dtype=bf16)`)
is made before measuring; a model with no cache (tests/data/layerbranch) reruns its whole sequence for each new token,
as its code does. Expected figures by formula from the fixtures' configs."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import TESTS

DATA = TESTS / "data"
L = 1024


def _cost(cli, name: str, *more) -> dict:
    p = cli("cost", DATA / name / "model.py", "-c", DATA / name / "config.json", "--seq", 8, "--context", L,
            "--json", *more)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_a_cache_set_up_after_construction_is_made_and_read(archviz_cli):
    c = json.loads((DATA / "setkvcache" / "config.json").read_text())
    n, d, H, kv, V = c["n_layers"], c["dim"], c["n_heads"], c["n_kv_heads"], c["vocab_size"]
    hd = d // H
    out = _cost(archviz_cli, "setkvcache")
    bf16 = 2  # set_kv_cache's own default dtype
    assert out["kv"]["per_token"] == n * 2 * kv * hd * bf16
    assert out["kv"]["at_context"] == n * 2 * kv * hd * L * bf16
    weights = n * (d * H * hd + 2 * d * kv * hd + H * hd * d + 2 * 4 * d * d) + d * V
    attention = n * 2 * 2 * H * (L + 1) * hd  # QKᵀ and P·V of one query over L cached positions and itself
    assert out["decode"]["flops"] == 2 * weights + attention
    assert any("set_kv_cache" in note for note in out["notes"])


def test_a_model_without_a_cache_reruns_the_whole_sequence(archviz_cli):
    c = json.loads((DATA / "layerbranch" / "config.json").read_text())
    d, h, r, V, n = c["dim"], c["hidden"], c["lora_rank"], c["vocab_size"], c["n_layers"]
    weights = n * (d * d + 2 * d * h) + (n - 1) * 2 * d * r + sum(1 for i in range(n) if i % 3 == 2) * d * d + d * V
    out = _cost(archviz_cli, "layerbranch")
    assert out["decode"]["flops"] == 2 * weights * (L + 1)
    assert out["kv"]["per_token"] == 0
    assert any("keeps no cache" in note and f"{L + 1:,} tokens" in note for note in out["notes"]), out["notes"]


@pytest.mark.parametrize("form", [(DATA / "posdecode" / "model.py", "--model-class", "GPT.from_name"),
                                  ("posdecode.model:GPT.from_name",)])
def test_a_positions_tensor_step_attends_over_a_cache_made_for_its_context(archviz_cli, monkeypatch, form):
    """Training-codebase style (tests/data/posdecode): `GPT.from_name("tiny")` hands its keywords to a config that
    takes no runtime limits (built again without them, not refused), `set_kv_cache` makes [B, groups, S, head]
    buffers (the slot dim third), and forward writes `input_pos` and attends over the whole cache under a mask: the
    step at context L runs with the cache made for L + 1 positions, as generate sizes it; the same whether the file or
    `package.module:callable` is typed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("posdecode_config", DATA / "posdecode" / "model.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    c = code.Config.from_name("tiny")
    C, H, G, n, V, at = c.n_embd, c.n_head, c.n_query_groups, c.n_layer, c.vocab_size, 40
    hs = C // H
    monkeypatch.syspath_prepend(str(DATA))  # importable, as from the folder a user runs it in
    p = archviz_cli("cost", *form, "--set", "name=tiny", "--seq", 8, "--context", at, "--json", "--no-cache")
    for name in [n for n in sys.modules if n.split(".")[0] == "posdecode"]:
        monkeypatch.delitem(sys.modules, name)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["kv"]["per_token"] == n * 2 * G * hs * 4  # k and v, float32
    weights = n * (C * (H + 2 * G) * hs + C * C + 2 * 4 * C * C) + C * V
    assert out["decode"]["flops"] == 2 * weights + n * 2 * 2 * H * (at + 1) * hs
    assert not any("keeps no cache" in note for note in out["notes"])

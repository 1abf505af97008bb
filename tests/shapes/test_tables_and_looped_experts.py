"""Active parameters of tables and experts as the code keeps them (issue 42, item 7): value embeddings read one row
per token in a dense model (tests/data/valueembeds), and experts run by the code's own Python loop over masks or
`torch.where` indices, their top-k under no conventional name (tests/data/loopmoe). Expected figures come from the
fixtures' configs by formula; `archviz summary` runs as a user types it."""

from __future__ import annotations

import json

from helpers import TESTS

DATA = TESTS / "data"


def _summary(cli, name: str) -> dict:
    p = cli("summary", DATA / name / "model.py", "-c", DATA / name / "config.json", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_value_embeddings_count_by_the_row_a_token_reads(archviz_cli):
    c = json.loads((DATA / "valueembeds" / "config.json").read_text())
    V, d, n, L = c["vocab_size"], c["n_embd"], c["n_layer"], c["sequence_len"]
    tables = sum(1 for i in range(n) if i % 2 == 1)
    extra = 2 * V * d  # two tables in one parameter, read through a view: a row of each a token
    params = V * d + L * d + n * (d * d + 2 * 4 * d * d) + tables * V * d + extra + d * V
    out = _summary(archviz_cli, "valueembeds")
    assert out["parameters"] == params
    # the token embedding and the position table beside it count in full; a value table by its one row a token reads
    assert out["active_parameters"] == params - tables * (V - 1) * d - (extra - 2 * d)


def test_experts_looped_in_python_are_routed_experts(archviz_cli):
    c = json.loads((DATA / "loopmoe" / "config.json").read_text())
    V, d, f, n, E, k = (c[x] for x in ("vocab_size", "dim", "ffn_dim", "n_layers", "n_routes", "routes_per_token"))
    per_expert = 2 * d * f
    dense = V * d + n * (2 * d + d * E) + d * V  # embedding, norms and routers, head
    out = _summary(archviz_cli, "loopmoe")
    assert out["parameters"] == dense + n * E * per_expert
    assert out["active_parameters"] == dense + n * k * per_expert
    assert sorted((m["path"], m["experts"], m["top_k"], m["per_expert"]) for m in out["moe"]) == sorted(
        (f"layers.{i}.moe.{'experts' if i % 2 else 'mlps'}", E, k, per_expert) for i in range(n))

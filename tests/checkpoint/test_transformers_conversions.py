"""Checkpoints written by transformers' own `save_pretrained`, checked against the model's config.

`save_pretrained` writes a model in its original checkpoint format: it reverses the renames and conversions that
`from_pretrained` applies (per-expert tensors instead of fused ones, `block_sparse_moe` instead of `mlp`, a fused
`gqkv_proj` instead of separate projections). Each case builds a tiny model for real on the CPU, saves it, and
checks that archviz, reading only the headers, matches every parameter: the count asserted is torch's own
`sum(p.numel() for p in model.parameters())`, and the names on disk are read back from the saved file, so the cases
only hold while they really differ from the model's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from safetensors import safe_open  # noqa: E402

import archviz  # noqa: E402
from archviz.checkpoint import compare  # noqa: E402
from archviz.checkpoint.hf_live import FACTS_KEY, LIVE_NAME  # noqa: E402

TINY = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
            vocab_size=128, head_dim=16)
CASES = {
    # a WeightRenaming of fused expert tensors (experts.fc1.weight -> experts.gate_up_proj)
    "aria_text": dict(moe_num_experts=4, moe_topk=2, moe_intermediate_size=32, moe_num_shared_experts=1),
    # renames only (block_sparse_moe.input_linear.weight -> block_sparse_moe.experts.gate_up_proj)
    "granitemoe": dict(num_local_experts=4, num_experts_per_tok=2),
    # renames and WeightConverters that fuse per-expert w1/w3 and w2 (MergeModulelist + Concatenate)
    "phimoe": dict(num_local_experts=4, num_experts_per_tok=2),
    # WeightConverters that split (Chunk): one gqkv_proj into gate, q, k, v; one gate_up_proj into gate, up
    "hrm_text": {},
}


def _save(model_type: str, folder: Path, **overrides: object) -> tuple[object, set[str]]:
    config = transformers.AutoConfig.for_model(model_type, **TINY, **CASES[model_type], **overrides)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    names: set[str] = set()
    for f in os.listdir(folder):
        if f.endswith(".safetensors"):
            with safe_open(str(folder / f), "pt") as g:
                names |= set(g.keys())
    return model, names


@pytest.fixture(scope="module", params=sorted(CASES))
def saved(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, int, set]:
    folder = tmp_path_factory.mktemp(request.param)
    model, names = _save(request.param, folder)
    return request.param, folder, sum(p.numel() for p in model.parameters()), names


def test_save_pretrained_checkpoint_matches(saved: tuple[str, Path, int, set]) -> None:
    model_type, folder, parameters, names = saved
    record = archviz.load(str(folder / "config.json"))
    model_names = {f"{m.path}.{t.name}" if m.path else t.name for m in record.modules for t in m.tensors}
    assert names - model_names, "the saved names equal the model's: this case would prove nothing"
    res = compare(record, str(folder)).extra("checkpoint")
    assert res["verdict"] == "match", [e for e in res["tensors"] if e["verdict"] != "match"][:3]
    assert res["summary"]["matched"] == parameters
    assert res["summary"]["missing"] == 0 and res["summary"]["unexplained"] == 0
    assert res["rules"]["ruleset"]["name"] == LIVE_NAME


@pytest.mark.parametrize("saved", ["hrm_text"], indirect=True)
def test_split_conversion_compares_each_part_by_sums(saved: tuple[str, Path, int, set]) -> None:
    model_type, folder, _, names = saved
    fused = sorted(n for n in names if n.endswith("gqkv_proj.weight"))
    assert fused  # the checkpoint holds the fused projection
    res = compare(archviz.load(str(folder / "config.json")), str(folder)).extra("checkpoint")
    layer = fused[0].rsplit(".attn.", 1)[0]
    parts = [e for e in res["tensors"] if e["model"] and e["model"].startswith(layer + ".self_attn.")
             and e["model"].split(".")[-2] in ("gate_proj", "q_proj", "k_proj", "v_proj")]
    assert len(parts) == 4 and all(e["checkpoint"] == [fused[0]] and e["verdict"] == "match" for e in parts)
    with safe_open(str(folder / "model.safetensors"), "pt") as g:
        on_disk = g.get_slice(fused[0]).get_shape()
    assert sum(e["model_elements"] for e in parts) == on_disk[0] * on_disk[1]


def test_changed_config_is_a_mismatch_with_both_counts(saved: tuple[str, Path, int, set], tmp_path: Path) -> None:
    model_type, folder, _, _ = saved
    cfg = json.loads((folder / "config.json").read_text())
    cfg["hidden_size"] = 80  # every projection changes width
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    res = compare(archviz.load(str(tmp_path / "config.json")), str(folder)).extra("checkpoint")
    assert res["verdict"] == "mismatch"
    bad = [e for e in res["tensors"] if e["verdict"] == "mismatch"]
    assert bad and all(e["model_elements"] != e["checkpoint_elements"] for e in bad if not e.get("fused"))
    assert any(e["model"].endswith("embed_tokens.weight") and e["model_elements"] == 128 * 80
               and e["checkpoint_elements"] == 128 * 64 for e in bad)


def test_records_file_carries_what_the_lookup_needs(saved: tuple[str, Path, int, set], archviz_cli,
                                                   tmp_path: Path) -> None:
    """The verdict is reproducible from the records alone: `archviz walk -o` keeps the facts, and `archviz check` on
    that file (no rebuild) gives the same result as on the config."""
    model_type, folder, parameters, _ = saved
    records = tmp_path / "records.json"
    r = archviz_cli("walk", folder / "config.json", "--no-shapes", "-o", records)
    assert r.returncode == 0, r.stderr
    assert json.loads(records.read_text())["extras"][FACTS_KEY]["base_model_prefix"] == "model"
    r = archviz_cli("check", records, "-k", folder, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["matched"] == parameters and out["rules"]["ruleset"]["name"] == LIVE_NAME


def test_records_without_the_facts_fall_back_to_the_hand_written_rules(tmp_path: Path) -> None:
    """Records from an older archviz carry no facts: the hand-written rulesets still apply (phimoe's checkpoint
    needs more than they know: its router rename is transformers-only, so the fallback reports it, with numbers)."""
    folder = tmp_path / "phimoe"
    model, _ = _save("phimoe", folder)
    record = archviz.load(str(folder / "config.json"))
    stripped = record.__class__(record.source, record.modules, record.summary, record.schema,
                                tuple((k, v) for k, v in record.extras if k != FACTS_KEY))
    res = compare(stripped, str(folder)).extra("checkpoint")
    assert res["rules"]["ruleset"]["name"] != LIVE_NAME
    assert res["verdict"] == "mismatch"
    missing = {e["model"] for e in res["tensors"] if e["verdict"] == "missing"}
    assert missing == {f"model.layers.{i}.mlp.router.weight" for i in range(2)}

"""Every size on a node page has its name (issue 44 item 5), where no single config field decides it: a rotary
half-width and the width a partial rotary leaves by the fields that make them, a size several fields equal with
every one of them (in words, or in the legend under a picture whose labels stay short), a routed count by its
formula in B and T (tests/render/site/test_site_readable.py, on the default site). Every expected name is worked out
here from the config: DeepSeek-V4-Flash's example, whose qk_rope_head_dim, num_attention_heads and index_n_heads
are all 64."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archviz.render.dims import DimNames

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "deepseek-v4-flash" / "config.json"


@pytest.fixture(scope="module")
def cfg() -> dict:
    return json.loads(CONFIG.read_text())


def _equal(cfg: dict, v: int) -> list[str]:
    return sorted(k for k, x in cfg.items() if type(x) is int and x == v)


def test_a_half_or_a_difference_of_fields_is_named_by_the_rotary_field(cfg) -> None:
    rope = cfg["qk_rope_head_dim"]
    assert len(_equal(cfg, rope)) == 3  # heads, indexer heads and the rotary width: the name must decide
    names = DimNames(cfg)
    assert names.name(rope // 2) == "qk_rope_head_dim/2"
    nope = cfg["head_dim"] - rope  # a head laid out [nope | rope]: the part the rotary leaves
    assert names.name(nope, near=["head_dim"]) == "head_dim − qk_rope_head_dim"
    assert names.name(2) is None  # half of hc_mult by chance: too small to name by halves
    assert names.name(cfg["hc_mult"] * cfg["num_experts_per_tok"]) is None  # no rule decides 24
    llama = {"hidden_size": 4096, "head_dim": 128, "num_attention_heads": 32, "num_key_value_heads": 8}
    assert DimNames(llama).name(llama["head_dim"] - llama["num_attention_heads"], near=["head_dim"]) is None  # chance
    assert DimNames(llama).name(llama["head_dim"] // 2, near=["head_dim"]) == "head_dim/2"  # rotate_half's width


def test_the_pairs_a_half_width_is_split_into_are_named(cfg) -> None:
    """Rotary in complex form views its half-width as pairs, [B, H, T, rope/2, 2]: the trailing 2 is the pair; a 2
    after any other dim stays a number (names.name(2) is None above)."""
    names, half = DimNames(cfg), cfg["qk_rope_head_dim"] // 2
    assert names.shape(["B", "T", half, 2]) == f"[B batch, T positions, {half} qk_rope_head_dim/2, 2 pair]"
    assert names.shape(["B", "T", half, 2], words=False) == f"[B, T, {half} qk_rope_head_dim/2, 2 pair]"  # pictures
    assert names.shape(["B", 2, half]).endswith(f"2, {half} qk_rope_head_dim/2]")


def test_a_size_several_fields_equal_reads_with_each_of_them(cfg) -> None:
    heads = cfg["num_attention_heads"]
    fields = _equal(cfg, heads)
    words = DimNames(cfg, candidates=True)
    assert words.dim(heads) == f"{heads} ({fields[0]}, {fields[1]} or {fields[2]})"
    assert words.dim(heads, words=False) == str(heads)  # a picture's short label stays the number ...
    assert words.left_bare(["B", heads, "T", cfg["hidden_size"]]) == {heads: f"{fields[0]}, {fields[1]} or {fields[2]}"}
    assert DimNames(cfg).dim(heads) == str(heads)  # ... and the terminal's narrow columns too
    ranks = _equal(cfg, cfg["q_lora_rank"])
    assert words.shape(["B", "T", cfg["q_lora_rank"]]) == f"[B batch, T positions, {cfg['q_lora_rank']} " \
                                                          f"({ranks[0]} or {ranks[1]})]"


def test_widths_a_config_does_not_hold_are_named_by_the_model_width() -> None:
    """GPT-2's config (its published values) holds no head_dim and no MLP width: the code makes them from n_embd,
    per head n_embd ÷ n_head, the MLP's 4 × n_embd and the fused QKV's 3 × n_embd."""
    gpt2 = {"n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257, "n_inner": None}
    names = DimNames(gpt2)
    assert names.name(gpt2["n_embd"] // gpt2["n_head"]) == "n_embd ÷ n_head"
    assert names.name(4 * gpt2["n_embd"]) == "4 × n_embd" and names.name(3 * gpt2["n_embd"]) == "3 × n_embd"
    assert names.name(gpt2["n_head"]) is None  # n_head and n_layer are both 12: ...
    assert DimNames(gpt2, candidates=True).dim(gpt2["n_head"]) == "12 (n_head or n_layer)"  # ... said so
    llama = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}
    assert DimNames(llama).name(llama["hidden_size"] // llama["num_key_value_heads"]) is None  # not a head's width

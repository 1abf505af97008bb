"""Helpers shared by several test files: small transformers configs, and records made by hand."""

from __future__ import annotations

import math
import re

from archviz.records import ModelRecord, ModuleRecord, SourceInfo, Summary, TensorRecord, Totals

# Small configs, written by hand: every width is tiny, every kind of layer is kept.
TINY = {
    "llama": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=256, max_position_embeddings=128),
    "mixtral": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=256, num_local_experts=4, num_experts_per_tok=2,
                    max_position_embeddings=128),
    "qwen3_moe": dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256, num_experts=8,
                      num_experts_per_tok=2, max_position_embeddings=128),
    "gpt_oss": dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, vocab_size=256, num_local_experts=4, num_experts_per_tok=2,
                    max_position_embeddings=128, sliding_window=8,
                    layer_types=["sliding_attention", "full_attention"]),
    "deepseek_v3": dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
                        first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32,
                        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, head_dim=8,
                        n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
                        vocab_size=256, max_position_embeddings=128),
    "deepseek_v4": dict(hidden_size=64, moe_intermediate_size=32, num_hidden_layers=4, num_attention_heads=4,
                        num_key_value_heads=1, head_dim=32, qk_rope_head_dim=8, q_lora_rank=32, o_lora_rank=16,
                        o_groups=2, index_n_heads=2, index_head_dim=16, index_topk=4, n_routed_experts=8,
                        num_experts_per_tok=2, n_shared_experts=1, num_hash_layers=1, vocab_size=256,
                        sliding_window=8, compress_ratios=[0, 4, 128, 0],
                        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                        max_position_embeddings=256),
    "bert": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=256,
                 max_position_embeddings=64),
}


def hand_record(specs: list[tuple[str, str, dict, list[tuple[str, tuple]]]]) -> ModelRecord:
    """A hand-made record: (path, class, attributes, [(tensor name, shape)]) in pre-order."""
    paths = [p for p, *_ in specs]
    children = {p: [c for c in paths if c and (c.rsplit(".", 1)[0] if "." in c else "") == p] for p in paths}
    own = {}
    tens = {}
    for p, _, _, ts in specs:
        tens[p] = tuple(TensorRecord(n, "weight", s, "float32", math.prod(s), math.prod(s), 4 * math.prod(s))
                        for n, s in ts)
        own[p] = Totals(parameters=sum(t.elements for t in tens[p]), bytes=sum(t.bytes for t in tens[p]))
    totals = {}
    for p in reversed(paths):
        t = own[p]
        for c in children[p]:
            t = t + totals[c]
        totals[p] = t
    mods = tuple(ModuleRecord(path=p, class_name=cls, class_module="m", children=tuple(children[p]),
                              tensors=tens[p], totals=totals[p], own=own[p], attributes=tuple(attrs.items()))
                 for p, cls, attrs, _ in specs)
    root = totals[""]
    summary = Summary(parameters=root.parameters, active_parameters=None, scale_elements=0, table_elements=0,
                      buffer_elements=0, persistent_buffer_elements=0, bytes=root.bytes, bytes_by_dtype=(),
                      parameters_by_dtype=(), modules=len(mods))
    return ModelRecord(source=SourceInfo(spec="hand", kind="factory", name="hand", model_class="m.M"),
                       modules=mods, summary=summary)


def expand(name: str) -> set[str]:
    """Every name a compact name ("a.{0-1,3}.b | c.{2}") stands for."""
    out: set[str] = set()
    for alt in name.split(" | "):
        m = re.search(r"\{([0-9,\-]+)\}", alt)
        if m is None:
            out.add(alt)
            continue
        nums: list[int] = []
        for part in m.group(1).split(","):
            lo, _, hi = part.partition("-")
            nums.extend(range(int(lo), int(hi or lo) + 1))
        for k in nums:
            out |= expand(alt[:m.start()] + str(k) + alt[m.end():])
    return out


def one_line_error(r) -> str:
    """The one stderr line of a command refused as bad input (exit 2, no traceback), from a CompletedProcess."""
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    return lines[0]

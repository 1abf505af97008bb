"""Garbage in command-line options: every value no run could use is exit 2 with one line (what, where, the fix),
before anything is built or written; with ``--json`` the same error is a JSON object on stdout. click's own usage
errors (unknown option, missing argument, a value of the wrong type) are that JSON object too under ``--json``,
and keep click's text without it.

Each case runs the real command line in-process (what is tested is its answer, not the process), timed; sources are
tiny (``torch.nn:Linear`` or a 1-layer llama config).
"""

from __future__ import annotations

import dataclasses
import json
import resource
from pathlib import Path

import pytest
from adv_tools import LINEAR, REFUSE_WITHIN_S, cli_here, refused

LLAMA = ("hf:llama", "--set", "num_hidden_layers=1", "--set", "hidden_size=64", "--set", "intermediate_size=128",
         "--set", "num_attention_heads=4", "--set", "num_key_value_heads=2", "--set", "vocab_size=256")
NOWHERE = "/nonexistent-archviz-checkpoint.safetensors"
HUGE = "9" * 5000  # more digits than Python turns into an int by default

# name -> (arguments, fragments the one line must hold); an output path "{out}" is replaced by a fresh temp path,
# and nothing may appear there.
CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "set_empty_key": (("summary", "hf:llama", "--set", "=5"),
                      ("--set '=5'", "the key is empty", "--set KEY=VALUE")),
    "set_blank_key": (("summary", *LINEAR, "--set", " =5"), ("the key is empty",)),
    "set_key_not_a_name": (("summary", *LINEAR, "--set", "in features=4"), ("'in features'", "not a field name")),
    "set_negative_layers": (("summary", "hf:llama", "--set", "num_hidden_layers=-3"),
                            ("num_hidden_layers", "cannot be negative", "--set num_hidden_layers=")),
    "set_zero_layers": (("walk", "hf:llama", "--set", "num_hidden_layers=0", "-o", "{out}"),
                        ("num_hidden_layers = 0", "at least 1")),
    "set_zero_width": (("inspect", "hf:llama", "--set", "hidden_size=0"), ("hidden_size = 0",)),
    "set_text_layers": (("summary", "hf:llama", "--set", "num_hidden_layers=four"),
                        ("num_hidden_layers is a whole number", "'four'")),
    "set_fraction_heads": (("summary", "hf:llama", "--set", "num_attention_heads=2.5"), ("whole number", "2.5")),
    "set_negative_features": (("summary", "torch.nn:Linear", "--set", "in_features=-4", "--set", "out_features=2"),
                              ("in_features cannot be negative",)),
    "set_disagree": (("check", *LINEAR[:1], "-k", NOWHERE, "--set", "in_features=4", "--set", "in_features=8",
                      "--set", "out_features=2"),
                     ("--set 'in_features=4'", "--set 'in_features=8'", "disagree on in_features")),
    "set_huge_value": (("summary", *LINEAR, "--set", f"bias={HUGE}"), ("too large",)),
    "set_b_negative": (("diff", *LINEAR, *LINEAR, "--set-b", "out_features=-2"), ("--set-b", "cannot be negative")),
    "set2_zero_layers": (("cost", *LLAMA, "hf:llama", "--set2", "num_hidden_layers=0"), ("--set2", "= 0")),
    "input_empty_name": (("inspect", *LINEAR, "--input", "=B,T"), ("--input '=B,T'", "name is empty")),
    "input_not_a_name": (("inspect", *LINEAR, "--input", "1x=B,4"), ("'1x'", "not an argument name")),
    "input_int_abc": (("inspect", *LINEAR, "--input", "x=int:abc"), ("'abc' is not an int", "x=int:5")),
    "input_float_abc": (("walk", *LINEAR, "--shapes", "--input", "x=float:abc", "-o", "{out}"),
                        ("'abc' is not a float",)),
    "input_bool_maybe": (("inspect", *LINEAR, "--input", "x=bool:maybe"), ("'maybe' is not a bool",)),
    "input_negative_dim": (("inspect", *LINEAR, "--input", "input=B,-1"), ("dim '-1'", "at least 1")),
    "input_zero_dim": (("build", *LINEAR, "--input", "input=B,0", "-o", "{out}"), ("dim '0'", "at least 1")),
    "input_unicode_digit": (("inspect", *LINEAR, "--input", "input=B,\u00b2"), ("is not an int, B or T",)),
    "input_two_commas": (("inspect", *LINEAR, "--input", "input=B,,4"), ("is empty",)),
    "input_huge_dim": (("inspect", *LINEAR, "--input", f"input=B,{HUGE}"), ("is not an int",)),
    "input_dtype": (("probe", *LINEAR, "--input", "input=B,4:nonsense"), ("'nonsense' is not a torch dtype",)),
    "input_twice": (("inspect", *LINEAR, "--input", "input=B,4", "--input", "input=B,8"),
                    ("both give input", "once")),
    "input_nothing": (("inspect", *LINEAR, "--input", "input="), ("no dims, dtype or value",)),
    "batch_negative": (("inspect", *LINEAR, "--batch", "-1"), ("--batch -1", "at least 1")),
    "seq_zero_build": (("build", *LINEAR, "--seq", "0", "-o", "{out}"), ("--seq 0", "at least 1")),
    "seq_zero_probe": (("probe", *LINEAR, "--seq", "0"), ("--seq 0",)),
    "batch_zero_diff": (("diff", *LINEAR, *LINEAR, "--batch", "0"), ("--batch 0",)),
    "depth_negative": (("inspect", *LINEAR, "--depth", "-1"), ("--depth -1", "cannot be negative")),
    "limit_zero": (("check", *LINEAR, "-k", NOWHERE, "--limit", "0"), ("--limit 0", "at least 1")),
    "timeout_infinite": (("check", *LINEAR, "-k", NOWHERE, "--timeout", "inf"), ("--timeout inf", "finite")),
    "timeout_infinite_manifest": (("manifest", NOWHERE, "-o", "{out}", "--timeout", "inf"), ("--timeout inf",)),
    "rank_outside": (("summary", *LINEAR, "--world-size", "2", "--rank", "2"), ("--rank 2", "--world-size 2")),
    "world_size_zero": (("summary", *LINEAR, "--world-size", "0"), ("--world-size 0", "at least 1")),
    "rank_negative": (("walk", *LINEAR, "--rank", "-1", "-o", "{out}"), ("--rank -1", "negative")),
    "context_zero": (("cost", *LINEAR, "--context", "0"), ("--context '0'", "at least 1")),
    "context_word": (("cost", *LINEAR, "--context", "abc"), ("--context 'abc' is not a token count",)),
    "context_huge": (("cost", *LINEAR, "--context", HUGE), ("is not a token count",)),
    "seq_zero_cost": (("cost", *LINEAR, "--seq", "0K"), ("--seq '0K'", "at least 1")),
    "batch_negative_cost": (("cost", *LINEAR, "--batch", "-1"), ("--batch -1", "at least 1")),
    "kv_dtype": (("cost", *LINEAR, "--kv-dtype", "nonsense"), ("--kv-dtype 'nonsense'",)),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, archviz_cli) -> dict:
    base = tmp_path_factory.mktemp("options")

    def one(name: str):
        args, _ = CASES[name]
        out = base / name / "out.json"
        out.parent.mkdir()
        return cli_here(archviz_cli, *(str(out) if a == "{out}" else a for a in args)), out.parent

    return {name: one(name) for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_refused_in_one_line(results: dict, name: str) -> None:
    run, folder = results[name]
    refused(run, *CASES[name][1])
    assert list(folder.iterdir()) == []  # nothing written, not even a temp file


def test_bogus_architectures_entry(tmp_path: Path, archviz_cli) -> None:
    """config.json's architectures names a class transformers has not: refused, not silently replaced by the
    model type's default class; a name transformers has that is not a model class (LlamaConfig) too."""
    base = dict(model_type="llama", num_hidden_layers=1, hidden_size=64, intermediate_size=128,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
    for arch, fragment in (("LlamaForCausalLMX", "did you mean LlamaForCausalLM"), ("LlamaConfig", "LlamaConfig")):
        path = tmp_path / f"{arch}.json"
        path.write_text(json.dumps({**base, "architectures": [arch]}))
        before = resource.getrusage(resource.RUSAGE_SELF)
        r = cli_here(archviz_cli, "summary", path)
        after = resource.getrusage(resource.RUSAGE_SELF)
        # transformers must be imported to know its classes: on a loaded machine that alone can pass 10 s of wall
        # time, so the bound is on the CPU time the refusal costs
        assert after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime < REFUSE_WITHIN_S
        line = refused(dataclasses.replace(r, seconds=0.0), str(path), f"architectures names '{arch}'", fragment)
        assert "remove \"architectures\"" in line
    good = tmp_path / "good.json"
    good.write_text(json.dumps({**base, "architectures": ["LlamaForCausalLM"]}))
    r = cli_here(archviz_cli, "summary", good, "--json")
    assert r.returncode == 0, r.stderr
    # the class named is the one built: a 1-layer llama's parameters from its config
    h, i, v, heads, kv = 64, 128, 256, 4, 2
    per_layer = h * h * 2 + 2 * h * (h // heads * kv) + 3 * h * i + 2 * h
    data = json.loads(r.stdout)
    assert data["model_class"].endswith(".LlamaForCausalLM")
    assert data["parameters"] == 2 * v * h + per_layer + h


JSON_CASES = {
    "summary": ("summary", "hf:llama", "--set", "=5", "--json"),
    "inspect": ("inspect", *LINEAR, "--input", "x=int:abc", "--json"),
    "walk": ("walk", *LINEAR, "--shapes", "--input", "input=B,0", "--json"),
    "build": ("build", *LINEAR, "--seq", "0", "-o", "/nonexistent-archviz-dir/site", "--json"),
    "check": ("check", *LINEAR, "-k", NOWHERE, "--limit", "0", "--format", "json"),
    "probe": ("probe", *LINEAR, "--input", "=B,T", "--json"),
    "cost": ("cost", *LINEAR, "--context", "0", "--json"),
    "diff": ("diff", *LINEAR, *LINEAR, "--set-a", "in_features=-1", "--format", "json"),
    # click's own usage errors
    "unknown_option": ("summary", *LINEAR, "--bogus", "--json"),
    "missing_argument": ("inspect", "--json"),
    "missing_option": ("check", *LINEAR, "--json"),
    "bad_int": ("inspect", *LINEAR, "--depth", "x", "--json"),
    "below_min": ("check", *LINEAR, "-k", NOWHERE, "--timeout", "-1", "-f", "json"),
    "unknown_command": ("nonsense", "--json"),
}


@pytest.fixture(scope="module")
def json_results(archviz_cli) -> dict:
    return {name: cli_here(archviz_cli, *args) for name, args in JSON_CASES.items()}


@pytest.mark.parametrize("name", list(JSON_CASES))
def test_json_error_object(json_results: dict, name: str) -> None:
    r = json_results[name]
    assert r.returncode == 2, (r.returncode, r.stderr[-1000:])
    assert "Traceback" not in r.stdout + r.stderr and "╭" not in r.stderr  # not click's boxed text
    assert r.seconds < REFUSE_WITHIN_S, r.seconds
    data = json.loads(r.stdout)  # the whole of stdout is one JSON document
    assert set(data) == {"error", "hint", "exit_code"} and data["exit_code"] == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0] == "error: " + data["error"] + (f" — {data['hint']}" if data["hint"] else "")


def test_json_usage_errors_name_the_option(archviz_cli) -> None:
    r = cli_here(archviz_cli, "summary", *LINEAR, "--bogus", "--json")
    data = json.loads(r.stdout)
    assert "No such option: --bogus" in data["error"] and "summary --help" in data["hint"]
    r = cli_here(archviz_cli, "inspect", *LINEAR, "--depth", "x", "--json")
    assert "'--depth'" in json.loads(r.stdout)["error"]


def test_usage_errors_keep_click_text_without_json(archviz_cli) -> None:
    r = cli_here(archviz_cli, "summary", *LINEAR, "--bogus")
    assert r.returncode == 2 and r.stdout == ""
    assert "No such option: --bogus" in r.stderr and "Usage:" in r.stderr
    assert "Traceback" not in r.stderr


def test_dtype_names_are_torch_dtypes() -> None:
    """The --input grammar knows dtype names without importing torch: each one is a dtype of the torch installed."""
    import torch

    from archviz.input_specs import DTYPES

    assert DTYPES and all(isinstance(getattr(torch, name, None), torch.dtype) for name in DTYPES)
    assert {"float32", "bfloat16", "int64", "long", "bool"} <= DTYPES

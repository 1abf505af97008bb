"""Issue 46, numbers, sizes and special files: a hardware preset or a gallery --sets file that is a FIFO, a link to
/dev/zero, nested 100,000 deep, or holds a number no device has (400 digits, 1e308 GB/s), and a token count of 10**12:
each refused at once with exit 2 and one line, never a hang, a MemoryError, a RecursionError or `Infinity` in
--json. The refusals come before anything is built: in-process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from adv_tools import cli_here, make_special, refused

DEVICE = ('name = "x"\nsource = "test"\nmemory_gb = {memory}\nmemory_bandwidth_gb_s = {bandwidth}\n'
          'interconnect_gb_s = 0\npeak_tflops = {{ bf16 = 1 }}\n')
COST = ("cost", "hf:llama", "--set", "num_hidden_layers=1")


@pytest.mark.parametrize("kind, words", [("fifo", "FIFO"), ("zero", "character device"), ("deep", "nested"),
                                         ("digits", "memory_gb: a non-negative number up to 1e+06"),
                                         ("huge", "memory_bandwidth_gb_s: a non-negative number up to 1e+06")])
def test_a_hardware_file_out_of_bounds_is_one_line(archviz_cli, tmp_path: Path, kind: str, words: str) -> None:
    path = tmp_path / "device.toml"
    if kind == "fifo":
        make_special(path, "fifo")
    elif kind == "zero":
        os.symlink("/dev/zero", path)
    elif kind == "deep":
        path.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    else:
        memory, bandwidth = ("9" * 400, "1") if kind == "digits" else ("80", "1e308")
        path.write_text(DEVICE.format(memory=memory, bandwidth=bandwidth))
    refused(cli_here(archviz_cli, *COST, "--hardware", str(path)), str(path), words)


@pytest.mark.parametrize("kind, words", [("fifo", "FIFO"), ("zero", "character device"),
                                         ("deep", "nested more than")])
def test_a_gallery_sets_file_out_of_bounds_is_one_line(archviz_cli, tmp_path: Path, kind: str, words: str) -> None:
    path = tmp_path / "sets.json"
    if kind == "fifo":
        make_special(path, "fifo")
    elif kind == "zero":
        os.symlink("/dev/zero", path)
    else:
        path.write_text("[" * 100_000 + "]" * 100_000)
    out = tmp_path / "g"
    refused(cli_here(archviz_cli, "gallery", "--transformers", "llama", "--sets", str(path), "-o", str(out)),
            str(path), words)
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--seq", "--context"])
def test_a_token_count_past_any_model_is_refused(archviz_cli, flag: str) -> None:
    refused(cli_here(archviz_cli, *COST, flag, str(10**12)), f"{flag} {10**12}", "over the 1,073,741,824")


@pytest.mark.parametrize("args, words", [
    (("diff", "a/model.py", "b/model.py", "--config", "a.json", "--config", "b.json"),
     "--config is given twice: it takes one value (for two models: --config-a A.json --config-b B.json)"),
    (("cost", "hf:llama", "-L", "4K", "--context=8K"), "--context is given twice (as -L and --context)"),
])
def test_an_option_of_one_value_given_twice_is_refused(archviz_cli, args, words) -> None:
    """Issue 46: click keeps the last of two values silently; `diff` then compared both sides under B's config."""
    r = cli_here(archviz_cli, *args, "--json")
    assert r.returncode == 2 and words in json.loads(r.stdout)["error"], (r.stdout, r.stderr)


def test_repeatable_options_and_flags_stay_repeatable(archviz_cli) -> None:
    r = cli_here(archviz_cli, "summary", "hf:llama", "--set", "num_hidden_layers=1", "--set", "vocab_size=64",
                 "--json", "--json")
    assert r.returncode == 0, r.stderr

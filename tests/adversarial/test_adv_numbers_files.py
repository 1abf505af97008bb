"""Issue 46, numbers, sizes and special files: a hardware preset or a gallery --sets file that is a FIFO, a link to
/dev/zero, nested 100,000 deep, or holds a number no device has (400 digits, 1e308 GB/s), and a token count of 10**12:
each refused at once with exit 2 and one line, never a hang, a MemoryError, a RecursionError or `Infinity` in
--json. The refusals come before anything is built: in-process."""

from __future__ import annotations

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

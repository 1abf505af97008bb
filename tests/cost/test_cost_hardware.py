"""Hardware presets and user TOML files for `archviz cost --hardware` (issue 35)."""

from __future__ import annotations

import json
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.cost.hardware import FIELDS, PEAK_DTYPES, presets, resolve

SHIPPED = tomllib.loads(resources.files("archviz.cost").joinpath("hardware.toml").read_text(encoding="utf-8"))
ASKED = {"h100", "h200", "b200", "gb200", "mi300x", "mi355x", "l40s", "rtx4090"}  # and Apple M-series
LLAMA = Path(__file__).resolve().parent.parent / "data" / "masked"


def test_every_asked_device_is_shipped_with_a_source_for_its_figures():
    assert ASKED <= set(SHIPPED)
    assert any(k.startswith("m") and "Apple" in v["name"] for k, v in SHIPPED.items())
    for key, table in SHIPPED.items():
        assert set(FIELDS) <= set(table), key
        src = table["source"]
        assert "https://" in src and any(v in src for v in ("nvidia.com", "amd.com", "apple.com")), key
        assert set(table["peak_tflops"]) <= set(PEAK_DTYPES), key


def test_shipped_figures_read_in_bytes_and_flops():
    """The spec sheets' figures: H200 141 GB at 4.8 TB/s, 989.5 dense BF16 TFLOP/s (1,979 is the sparse one)."""
    h200 = presets()["h200"]
    assert h200.memory == 141e9 and h200.bandwidth == 4.8e12
    assert h200.peak("bfloat16") == ("bf16", 989.5e12)
    assert h200.peak("float8_e4m3fn") == ("fp8", 1979e12)
    # no fp4 units on a Hopper: fp4 weights compute at the next wider peak it has
    assert h200.peak("float4_e2m1fn_x2") == ("fp8", 1979e12)
    assert presets()["b200"].peak("float4_e2m1fn_x2") == ("fp4", 9000e12)
    assert presets()["m4-max"].peak("bfloat16") is None  # Apple publishes no FLOP/s


def _user(tmp_path: Path, drop: str | None = None) -> Path:
    table = {"name": "my accelerator", "source": "my lab's measurements", "memory_gb": 64,
             "memory_bandwidth_gb_s": 2000, "interconnect_gb_s": 100}
    lines = ["[mine]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items() if k != drop]
    if drop != "peak_tflops":
        lines.append("peak_tflops = { bf16 = 500 }")
    p = tmp_path / "mine.toml"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_user_toml_read_beside_presets(tmp_path):
    devices = resolve(f"h100,{_user(tmp_path)}")
    assert [d.key for d in devices] == ["h100", "mine"]
    assert devices[1].bandwidth == 2e12 and devices[1].peak("bfloat16") == ("bf16", 500e12)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_user_toml_missing_a_field_exits_2_naming_it(tmp_path, field):
    path = _user(tmp_path, drop=field)
    result = CliRunner().invoke(app, ["cost", str(LLAMA / "model.py"), "--config", str(LLAMA / "config.json"),
                                      "--hardware", str(path)])
    assert result.exit_code == 2, result.output
    assert field in result.output and "Traceback" not in result.output
    assert len([x for x in result.output.splitlines() if x.strip()]) <= 2  # the error and its hint


@pytest.mark.parametrize("args, words", [
    (["--hardware", "h300"], "neither a preset"),
    (["--gpus", "8"], "--gpus applies to --hardware"),
    (["--hardware", "h200", "--gpus", "0"], "--gpus 0"),
])
def test_bad_hardware_options_exit_2(args, words):
    result = CliRunner().invoke(app, ["cost", str(LLAMA / "model.py"), "--config", str(LLAMA / "config.json"), *args])
    assert result.exit_code == 2, result.output
    assert words in result.output

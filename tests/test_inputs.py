"""--input gives the meta pass other inputs than token ids."""
import json
import os
import pathlib
import subprocess
import sys

FACTORIES = pathlib.Path(__file__).parent / "data" / "factories"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{FACTORIES}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "archviz.cli", *args], capture_output=True, text=True, env=env)


def test_input_option_feeds_the_meta_forward():
    p = _run("inspect", "vision:build", "head", "--input", "pixels=B,T,24", "--input", "scale=float:0.5", "--json")
    assert p.returncode == 0, p.stderr
    card = json.loads(p.stdout)
    # head is nn.Linear(48, 10) in the factory: in [B, T, 48], out [B, T, 10]
    assert card["inputs"] == [["B", "T", 48]] and card["outputs"] == [["B", "T", 10]]
    assert card["call_sites"][0]["code"] == "self.head(torch.relu(self.proj(pixels * scale)))"


def test_bad_input_spec_is_one_line_exit_2():
    p = _run("inspect", "vision:build", "--input", "pixels=B,Q,24")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "'Q' is not an int, B or T" in p.stderr

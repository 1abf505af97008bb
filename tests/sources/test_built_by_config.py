"""A training codebase's model as its user names it (issue 42 items 1 and 6): a registry function that returns a
spec holding the model's config (`spec.model.build()`), a launcher's training config that holds that spec, a package
that imports `torch.utils.tensorboard` (which torch refuses without tensorboard), layers in an nn.ModuleDict.

Counts are worked out here from the fixture's flavors with the layers' own formulas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "configbuilt"


def _flavor(name: str) -> dict:
    """The fixture's sizes of a flavor, read from its flavors.py alone (the package imports what is missing here)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("titanish_flavors", FIX / "titanish" / "flavors.py")
    flavors = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(flavors)
    return flavors.FLAVORS[name]


def _expected(flavor: str) -> int:
    f = _flavor(flavor)
    d, h, n, v = f["dim"], f["hidden"], f["n_layers"], f["vocab"]
    return v * d + n * (d + d * h + h * d) + d + d * v  # embedding, n × (norm, up, down), final norm, output


@pytest.fixture
def here(monkeypatch):
    monkeypatch.chdir(FIX)
    monkeypatch.syspath_prepend(str(FIX))


def test_a_registry_that_returns_a_spec_builds_the_model_its_config_makes(here, archviz_cli):
    p = archviz_cli("summary", "titanish:model_registry", "--set", "flavor=debug", "--json", "--no-cache")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["parameters"] == _expected("debug")
    notes = " ".join(d.get("notes", [])) + p.stdout
    assert "model_registry().model.build()" in notes  # how it was reached, said
    assert "tensorboard" in notes  # torch.utils.tensorboard refused to import: stubbed, and said


def test_a_launchers_training_config_holds_the_model_two_fields_deep(here, archviz_cli):
    """TrainConfig.model_spec.model.build(); the optimizer config's build() makes no module and is passed over."""
    p = archviz_cli("summary", "titanish:train_small", "--json", "--no-cache")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["parameters"] == _expected("small")


def test_a_launchers_job_config_reaches_its_model_when_its_data_part_calls_an_absent_package(here, archviz_cli):
    """`titanish:train_job` returns a `Trainer.Config` (whose own build() would start the trainer) holding the model's
    spec beside loader configs that called `batchstream.ReadOptions` (not installed) when they were made: the model is
    built from the spec, and what was stubbed, and which parts of the job hold it, is said."""
    p = archviz_cli("summary", "titanish:train_job", "--json", "--no-cache")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["parameters"] == _expected("small")
    notes = " ".join(d["notes"])
    assert "train_job().model_spec.model.build()" in notes
    assert "batchstream.ReadOptions stubbed while train_job() ran (batchstream not installed): held by its " \
           "dataloader, validator; the model was built without them" in notes
    narrow = archviz_cli("summary", "titanish:train_job", "--no-cache", columns=80)  # its long notes wrapped
    assert not [line for line in (narrow.stdout + narrow.stderr).splitlines() if len(line) > 80]


def test_a_job_whose_model_reads_what_the_absent_package_returned_is_refused_naming_it(here, archviz_cli):
    """The model's vocabulary is read from the absent package's answer: the count would be made up, so the missing
    package is named, as when the model calls it."""
    p = archviz_cli("summary", "titanish:train_job_reading_data", "--no-cache")
    assert p.returncode == 2
    assert "batchstream" in p.stderr and "pip install batchstream" in p.stderr


def test_inspect_layer_of_module_dict_layers_from_the_registry(here, archviz_cli):
    """The pass runs the forward's `torch.autocast(device_type=h.device.type)` on meta (the CPU's autocast)."""
    p = archviz_cli("inspect", "titanish:model_registry", "layer", "2", "--set", "flavor=debug", "--no-cache",
                    "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    dim = _flavor("debug")["dim"]
    assert d["path"] == "layers.2"
    call = d["calls"][0]
    assert call["inputs"] == [["B", "T", dim]] and call["outputs"] == [["B", "T", dim]]


def test_the_library_call_builds_what_a_returned_spec_holds():
    """`archviz.load(callable)`: the same reading of a returned spec as the command's `package.module:callable`."""
    import importlib.util

    import archviz

    def load(name: str):
        import sys

        spec = importlib.util.spec_from_file_location(f"titanish_{name}", FIX / "titanish" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up
        try:
            spec.loader.exec_module(mod)
        finally:
            sys.modules.pop(spec.name, None)
        return mod

    model, spec = load("model"), load("spec")
    f = _flavor("small")
    layers = [model.BlockConfig(dim=f["dim"], hidden=f["hidden"]) for _ in range(f["n_layers"])]

    def registry():
        return spec.ModelSpec(name="t", flavor="small", model=model.ModelConfig(dim=f["dim"], vocab=f["vocab"],
                                                                                layers=layers), parallelize_fn=print)

    record = archviz.load(registry)
    assert record.summary.parameters == _expected("small")
    assert any("registry().model.build()" in n for n in record.source.notes)

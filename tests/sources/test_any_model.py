"""Any PyTorch model on the first try (issue 42), the source side: one import path for every form the user types
(the same stubs, noted alike), builder functions as sources, the root model by the code's calls, configs of any
kind, `--set` reaching constructor arguments and keys the code reads, launcher variables named, a file named like
its package, and a build of 0 parameters refused.

The fixtures (tests/data/anymodel) are written in the style of the code that failed; every count is worked out here
from the fixture's own numbers with the layers' formulas."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import archviz
from archviz.cli.flags import cli_text
from archviz.errors import SourceError

DATA = Path(__file__).resolve().parent.parent / "data" / "anymodel"


def linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def conv(i: int, o: int, k: int) -> int:
    return i * o * k + o


def params(source: str, **options) -> int:
    return archviz.load(source, **options).summary.parameters


def refused(source: str, **options) -> SourceError:
    with pytest.raises(SourceError) as e:
        archviz.build(source, **options)
    return e.value


@pytest.fixture()
def on_path(monkeypatch: pytest.MonkeyPatch):
    """tests/data/anymodel importable, as a folder the user runs archviz from is."""
    monkeypatch.syspath_prepend(str(DATA))
    monkeypatch.chdir(DATA)
    yield
    ours = {"absentdep", "sibling_words", "not_installed_vision_pkg"}
    for name in [n for n in sys.modules if n.split(".")[0] in ours]:
        del sys.modules[name]


def segmenter(width: int, depth: int, classes: int = 5) -> int:
    return conv(3, width, 16) + depth * linear(width, width) + linear(width, classes)


def test_every_form_imports_alike_and_stubs_the_missing_package(on_path):
    """`absentdep/__init__` imports a predictor that needs a package that is not installed: the callable form and
    the file form build the same model and both stub that package by its own name (not absentdep's module)."""
    by_callable = archviz.build("absentdep.build:build_small")
    by_file = archviz.build(str(DATA / "absentdep" / "build.py"), model_class="build_small")
    for built in (by_callable, by_file):
        assert sum(p.numel() for p in built.model.parameters()) == segmenter(16, 2)
        assert "not_installed_vision_pkg" in built.stubbed_imports
        assert not any(s.startswith("absentdep") for s in built.stubbed_imports)
    assert params("absentdep.build:build_large") == segmenter(32, 3)


def test_builders_listed_with_signatures_when_several_fit(on_path):
    line = refused(str(DATA / "absentdep" / "build.py")).line()
    assert "build_small(checkpoint=None)" in line and "build_large(checkpoint=None)" in line
    line = refused(str(DATA / "absentdep" / "build.py"), model_class="build_tiny").line()
    assert "build_small" in line  # the names there, never an empty list


def net(in_dim=6, width=24, depth=3, out=4) -> int:
    return linear(in_dim, width) + depth * linear(width, width) + 2 * width + linear(width, out)


def test_root_by_calls_not_docstrings_and_never_the_loss(on_path):
    """Net is named in its blocks' docstrings and a weightless loss class sits beside it: the file builds Net from
    its defaults; its builder functions build through it, as functions of the file and as module:callable, with
    --set and with their keyword arguments given as JSON."""
    assert params(str(DATA / "sibling_words.py")) == net()
    assert params(str(DATA / "sibling_words.py"), model_class="Net_L") == net(width=40, depth=5)
    assert params("sibling_words:Net_S", overrides={"out": 7}) == net(width=8, depth=2, out=7)


def test_factory_keyword_arguments_as_json(on_path, tmp_path: Path):
    kw = tmp_path / "kw.json"
    kw.write_text(json.dumps({"in_dim": 5, "out": 9}))
    assert params("sibling_words:Net_S", config=str(kw)) == net(in_dim=5, width=8, depth=2, out=9)
    assert params(str(DATA / "sibling_words.py"), model_class="Net_L", config=str(kw)) == \
        net(in_dim=5, width=40, depth=5, out=9)


def test_a_subclass_never_drops_its_base(tmp_path: Path):
    cfg = {"width": 12, "depth": 3, "out": 5}
    (tmp_path / "params.json").write_text(json.dumps(cfg))
    assert params(str(DATA / "wrapped.py"), config=str(tmp_path / "params.json")) == \
        cfg["depth"] * linear(cfg["width"], cfg["width"]) + linear(cfg["width"], cfg["out"], False)
    line = cli_text(refused(str(DATA / "wrapped.py")).line())  # no config: what is there, with signatures, never empty
    assert "Core(params: wrapped.CoreParams)" in line and "--config" in line


def test_attribute_bag_and_dict_subclass_configs(tmp_path: Path):
    bag = {"vocab": 30, "depth": 2, "model": {"width": 6}}
    (tmp_path / "bag.json").write_text(json.dumps(bag))
    w = bag["model"]["width"]
    assert params(str(DATA / "bagcfg.py"), config=str(tmp_path / "bag.json")) == \
        bag["vocab"] * w + bag["depth"] * linear(w, w) + linear(w, 3)
    h = {"num_mels": 10, "channels": 8, "kernels": [4, 8]}
    (tmp_path / "h.json").write_text(json.dumps(h))
    c = h["channels"]
    assert params(str(DATA / "dictcfg.py"), config=str(tmp_path / "h.json")) == \
        conv(h["num_mels"], c, 7) + sum(conv(c, c, k) for k in h["kernels"]) + conv(c, 1, 7)


def test_set_reaches_required_arguments_and_keys_the_code_reads():
    s = {"width": 16, "depth": 2}  # Settings' defaults
    base = s["depth"] * linear(s["width"], s["width"]) + linear(s["width"], 10)
    assert params(str(DATA / "needs_arg.py"), model_class="Classifier", overrides={"num_classes": 10}) == base
    record = archviz.load(str(DATA / "needs_arg.py"), model_class="Classifier",
                          overrides={"num_classes": 10, "extra_tokens": 3})
    assert record.summary.parameters == base + 3 * s["width"]
    assert any("extra_tokens" in n and "needs_arg.py" in n for n in record.source.notes)
    assert params(str(DATA / "needs_arg.py"), model_class="Plain", overrides={"num_classes": 4}) == linear(8, 4)
    line = refused(str(DATA / "needs_arg.py"), model_class="Classifier").line()
    assert "num_classes" in line
    assert "no_such_key" in refused(str(DATA / "needs_arg.py"), model_class="Classifier",
                                    overrides={"num_classes": 2, "no_such_key": 1}).line()


def test_launcher_variable_named(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ARCHVIZ_FIXTURE_SHARDS", raising=False)
    e = refused(str(DATA / "launcher.py"))
    assert "ARCHVIZ_FIXTURE_SHARDS" in e.message and "launcher.py:5" in e.message
    assert "ARCHVIZ_FIXTURE_SHARDS=" in e.hint and "fix the module" not in e.line()
    monkeypatch.setenv("ARCHVIZ_FIXTURE_SHARDS", "3")
    assert params(str(DATA / "launcher.py")) == linear(12, 36)


def test_file_named_like_its_package():
    assert params(str(DATA / "nsrepo" / "pkg" / "pkg.py")) == 3 * (linear(10, 20) + linear(20, 10))


def test_zero_parameters_refused(archviz_cli):
    r = archviz_cli("summary", str(DATA / "only_loss.py"))
    assert r.returncode == 2 and "0 parameters" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_diffusers_config_builds_through_from_config(tmp_path: Path):
    """A diffusers config.json (`_class_name`, no `model_type`): built by diffusers' own from_config on meta, the
    count that of the same class built on the CPU. Skipped where diffusers is not installed (it is not a test
    dependency: it brings Pillow and more)."""
    diffusers = pytest.importorskip("diffusers")
    cfg = {"_class_name": "UNet2DModel", "sample_size": 8, "block_out_channels": [8, 16],
           "down_block_types": ["DownBlock2D", "AttnDownBlock2D"], "up_block_types": ["AttnUpBlock2D", "UpBlock2D"],
           "layers_per_block": 1, "norm_num_groups": 4, "attention_head_dim": 4}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    on_cpu = diffusers.UNet2DModel.from_config(cfg)
    assert params(str(tmp_path)) == sum(p.numel() for p in on_cpu.parameters())


def test_diffusers_config_without_diffusers_says_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "diffusers", None)  # as if not installed
    (tmp_path / "config.json").write_text(json.dumps({"_class_name": "UNet2DModel", "sample_size": 8}))
    e = refused(str(tmp_path / "config.json"))
    assert "diffusers" in e.message and e.hint == "pip install diffusers"


def test_code_naming_its_own_package_is_imported_inside_it():
    """`from pkg.layers import Block` and `sys.modules["pkg"]` in pkg/ (no __init__.py, no installer): the file is
    imported as a module of its package, never a missing package stubbed nor a KeyError."""
    built = archviz.build(str(DATA / "ownpkg" / "pkg" / "model.py"))
    assert sum(p.numel() for p in built.model.parameters()) == 4 * linear(6, 6)
    assert not built.stubbed_imports
    assert params(str(DATA / "ownpkg" / "pkg" / "keyed.py")) == linear(5, 10)


@pytest.mark.parametrize("resblock", ["a", "b"])
def test_unannotated_h_config_blocks_picked_by_name_and_a_helper_missing_its_package(tmp_path: Path, resblock: str):
    h = {"resblock": resblock, "num_mels": 12, "channels": 6, "kernels": [3, 5, 7]}
    (tmp_path / "config.json").write_text(json.dumps(h))
    built = archviz.build(str(DATA / "vocoder" / "models.py"), config=str(tmp_path / "config.json"))
    c = h["channels"]
    per_block = {"a": lambda k: conv(c, c, k), "b": lambda k: 2 * conv(c, c, k)}[resblock]
    assert sum(p.numel() for p in built.model.parameters()) == \
        conv(h["num_mels"], c, 7) + sum(per_block(k) for k in h["kernels"]) + conv(c, 1, 7)
    assert "not_installed_plot_pkg" in built.stubbed_imports and "helpers" not in built.stubbed_imports


def test_class_from_name_and_a_package_folder(on_path):
    """`module:Class.from_name` and `--model-class Class.from_name` build alike; a package's folder is a source (its
    builders, gathered by its __init__, listed when several fit)."""
    assert params("sibling_words:Net.from_name", overrides={"name": "L"}) == net(width=40, depth=5)
    assert params(str(DATA / "sibling_words.py"), model_class="Net.from_name", overrides={"name": "S"}) == \
        net(width=8, depth=2)
    line = refused(str(DATA / "absentdep")).line()
    assert "build_small(checkpoint=None)" in line and "build_large(checkpoint=None)" in line
    assert params(str(DATA / "absentdep"), model_class="build_large") == segmenter(32, 3)


def test_every_command_that_builds_takes_the_same_source_options():
    import inspect

    from archviz.cli import app

    source_options = {"config", "set_", "model_class", "config_class", "tokenizer", "trust_remote_code"}
    commands = {c.name or c.callback.__name__: set(inspect.signature(c.callback).parameters)
                for c in app.registered_commands}
    building = {n: ps for n, ps in commands.items() if "model_class" in ps}
    assert {"summary", "inspect", "walk", "cost", "check", "build", "probe", "diff"} <= set(building)
    for name, ps in building.items():
        assert source_options - {"set_", "config"} <= ps, (name, source_options - ps)

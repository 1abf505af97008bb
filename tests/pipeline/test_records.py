"""archviz.pipeline.records_for: build → walk → the meta pass → group, the records cache in front; what archviz.load
and the commands run. Counts are worked out here from the fixture's config.json, shapes from running its model on
the CPU."""

from __future__ import annotations

import importlib.util
import json
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import archviz
from archviz.errors import ArchvizError
from archviz.pipeline import Feedback, PassOptions, records_for
from archviz.records import dumps, dumps_compact, loads
from archviz.sources import BuildOptions

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "pipeline"
CONFIG = json.loads((FIX / "config.json").read_text())


def parameters(c: dict) -> int:
    """Embedding and untied head vocab×dim each, a LayerNorm (2·dim) and two bias-free linears per block, a final
    LayerNorm."""
    v, d, i, n = c["vocab_size"], c["dim"], c["inter_dim"], c["n_layers"]
    return 2 * v * d + n * (2 * d + 2 * d * i) + 2 * d


def modules(c: dict) -> int:
    """The model, embed, layers, norm, head; each block and its norm, up and down."""
    return 5 + 4 * c["n_layers"]


@pytest.fixture()
def model(tmp_path):
    """The fixture copied to a folder of this test's own, with its builds.log (one line per construction)."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("model.py", "config.json"):
        shutil.copy(FIX / name, folder / name)
    (folder / "builds.log").write_text("")
    return folder


def _builds(folder: Path) -> int:
    return (folder / "builds.log").read_text().count("built")


def _build(folder: Path, **overrides) -> BuildOptions:
    return BuildOptions(config=str(folder / "config.json"), overrides=tuple(overrides.items()))


def test_the_records_count_what_the_config_says(model):
    rec = records_for(str(model / "model.py"), _build(model))
    assert rec.summary.parameters == parameters(CONFIG)
    assert rec.summary.modules == modules(CONFIG)
    assert rec.extra("shapes") is None and rec.extra("grouping") is None  # neither asked for
    four = records_for(str(model / "model.py"), _build(model, n_layers=4))
    assert four.summary.parameters == parameters({**CONFIG, "n_layers": 4})
    assert four.summary.modules == modules({**CONFIG, "n_layers": 4})


def test_the_pass_and_the_grouping_when_asked(model):
    B, T = 3, 5
    rec = records_for(str(model / "model.py"), _build(model), PassOptions(shapes=True, batch=B, seq=T), group=True)
    spec = importlib.util.spec_from_file_location("pipeline_fixture_model", model / "model.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    real = code.Transformer(code.ModelArgs(**CONFIG))(torch.zeros(B, T, dtype=torch.long))  # on the CPU, for real
    assert rec.extra("shapes")["B"] == B and rec.extra("shapes")["T"] == T
    head = next(m for m in rec.modules if m.path == "head")
    sizes = {"B": B, "T": T}
    assert tuple(sizes.get(d, d) for d in head.calls[0].outputs[0]) == tuple(real.shape)
    layers = rec.extra("grouping")["layers"]
    assert layers["count"] == CONFIG["n_layers"]
    d, i = CONFIG["dim"], CONFIG["inter_dim"]
    assert [(k["layers"], k["parameters"]) for k in layers["kinds"]] == [(list(range(CONFIG["n_layers"])),
                                                                         2 * d + 2 * d * i)]


def test_a_cache_hit_is_the_records_built_without_building_again(model):
    src, build, passes = str(model / "model.py"), _build(model), PassOptions(shapes=True)
    first = records_for(src, build, passes, cache=True)
    assert _builds(model) == 1
    second = records_for(src, build, passes, cache=True)
    assert _builds(model) == 1, "the second run built the model instead of reading the cache"
    assert dumps(second) == dumps(first)
    assert second.summary.parameters == parameters(CONFIG)
    records_for(src, build, passes)  # no cache: built again
    assert _builds(model) == 2
    records_for(src, _build(model, n_layers=1), passes, cache=True)  # other options: another entry
    assert _builds(model) == 3


def test_a_records_file_is_read_and_takes_no_build_options(model, tmp_path):
    path = tmp_path / "records.json"
    path.write_text(dumps_compact(records_for(str(model / "model.py"), _build(model))))
    rec = records_for(str(path), group=True)
    assert rec.summary.parameters == parameters(CONFIG)
    assert rec.extra("grouping")["layers"]["count"] == CONFIG["n_layers"]  # grouped from the file's modules
    with pytest.raises(ArchvizError, match=r"a records file is already built, so `config`, `overrides` cannot apply"):
        records_for(str(path), _build(model, n_layers=2))
    with pytest.raises(ArchvizError, match=r"so `batch` cannot apply"):
        records_for(str(path), passes=PassOptions(batch=2))


def test_options_of_a_pass_that_does_not_run_are_refused(model):
    with pytest.raises(ArchvizError, match=r"`seq`, `train=True` apply to the meta forward pass, which this run skips"):
        records_for(str(model / "model.py"), _build(model), PassOptions(seq=8, train=True))
    assert _builds(model) == 0  # refused before any build


def test_feedback_names_each_step_and_the_walk_counts_every_module(model):
    steps: list[str] = []
    counted: dict[str, list[tuple[int, int]]] = {}

    @contextmanager
    def step(label):
        steps.append(label)
        yield

    @contextmanager
    def progress(label):
        counted[label] = []
        yield lambda done, total: counted[label].append((done, total))

    src = str(model / "model.py")
    records_for(src, _build(model), PassOptions(shapes=True), feedback=Feedback(step=step, progress=progress))
    assert steps == [f"building {src} on meta"]
    assert list(counted) == ["walking modules", "meta forward pass"]
    assert counted["walking modules"][-1] == (modules(CONFIG), modules(CONFIG))
    walked: list[tuple[int, int]] = []
    archviz.load(src, config=str(model / "config.json"), progress=lambda done, total: walked.append((done, total)))
    assert walked[-1] == (modules(CONFIG), modules(CONFIG))


def test_archviz_load_and_the_command_line_give_the_same_records(model, tmp_path, archviz_cli):
    src, config = str(model / "model.py"), str(model / "config.json")
    loaded = archviz.load(src, config=config, overrides={"n_layers": 2})
    out = tmp_path / "walk.json"
    p = archviz_cli("walk", src, "--config", config, "--set", "n_layers=2", "-o", out)
    assert p.returncode == 0, p.stderr
    walked = loads(out.read_text())
    assert loaded.summary.parameters == walked.summary.parameters == parameters({**CONFIG, "n_layers": 2})
    assert dumps(loaded) == dumps(walked)
    p = archviz_cli("summary", src, "--config", config, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["parameters"] == parameters(CONFIG)
    built = archviz.build(src, BuildOptions(config=config))  # a BuildOptions, or its fields as keywords
    assert sum(t.numel() for t in built.model.parameters()) == parameters(CONFIG)
    with pytest.raises(TypeError, match="not both"):
        archviz.build(src, BuildOptions(config=config), config=config)

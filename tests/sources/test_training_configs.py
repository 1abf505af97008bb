"""Configs as training codebases keep them: a YAML config (a checkpoint's `model_config.yaml`) read as a JSON one is
(bounded, no code run, aliases that would expand past a budget refused in one line); the model chosen over the parts
its config class names as strings (`mlp_class_name: Literal["GeluMLP", "GatedMLP"]`: picked by name); a key that
names a preset (`name`, the first argument of `Config.from_name(name, **kwargs)`) makes the config by that preset.

tests/data/posdecode is written in that style; the counts are worked out here from the YAML's values and the
fixture's presets."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import archviz
from archviz.errors import SourceError

DATA = Path(__file__).resolve().parent.parent / "data" / "posdecode"


def _gpt(c: dict) -> int:
    C, H, G, V, n = c["n_embd"], c["n_head"], c["n_query_groups"], c["vocab_size"], c["n_layer"]
    hs = C // H
    attention = C * (H + 2 * G) * hs + (H + 2 * G) * hs + C * C + C  # qkv and proj, with biases
    mlp = 3 * C * 4 * C if c.get("mlp_class_name") == "GatedMLP" else C * 4 * C + 4 * C + 4 * C * C + C
    return V * C + n * (2 * 2 * C + attention + mlp) + 2 * C + C * V  # two LayerNorms a layer; ln_f; the head


def test_yaml_config_builds_the_model_not_the_parts_it_names():
    c = yaml.safe_load((DATA / "model_config.yaml").read_text())
    assert c["mlp_class_name"] == "GatedMLP"
    record = archviz.load(str(DATA / "model.py"), config=str(DATA / "model_config.yaml"))
    assert record.source.model_class.endswith(".GPT")  # not GeluMLP or GatedMLP: the config class names them
    assert record.summary.parameters == _gpt(c)


def test_a_key_naming_a_preset_makes_the_config_by_it():
    import importlib.util

    spec = importlib.util.spec_from_file_location("posdecode_presets", DATA / "model.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    tiny = {**code.Config().__dict__, **code.PRESETS["tiny"]}
    record = archviz.load(str(DATA / "model.py"), overrides={"name": "tiny"})
    assert record.summary.parameters == _gpt(tiny)  # was the defaults' count, the name set alone
    assert any("from_name(name='tiny')" in n for n in record.source.notes)
    assert archviz.load(str(DATA / "model.py"), overrides={"name": "tiny", "n_layer": 1}).summary.parameters == \
        _gpt({**tiny, "n_layer": 1})


@pytest.mark.parametrize("text, said", [
    ("a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n" + "".join(
        f"{k}: &{k} [{', '.join(['*' + p] * 10)}]\n" for p, k in zip("abcdefg", "bcdefgh")), "aliases"),
    ("n_layer: !!python/object/apply:os.system ['echo never']\n", "not a readable YAML config"),
    ("- just\n- a list\n", "a YAML mapping"),
])
def test_bad_yaml_config_is_one_line(tmp_path: Path, text: str, said: str):
    (tmp_path / "cfg.yaml").write_text(text)
    with pytest.raises(SourceError) as e:
        archviz.build(str(DATA / "model.py"), config=str(tmp_path / "cfg.yaml"))
    assert said in e.value.line() and "\n" not in e.value.line()


def test_a_file_the_config_names_and_the_constructor_reads(tmp_path: Path):
    """gemma_pytorch's style (tests/data/configfile): the constructor asserts the tokenizer file its config names;
    absent, the line names the config key and how to give the path; given, the vocabulary sizes the embedding."""
    model = str(DATA.parent / "configfile" / "model.py")
    with pytest.raises(SourceError) as e:
        archviz.build(model)
    assert "tokenizer" in e.value.line() and "tokenizer/vocab.txt" in e.value.line() and "set" in e.value.options
    words = ["<pad>", "the", "a", "model", "reads", "files"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    hidden = 24  # LMConfig's default
    assert archviz.load(model, overrides={"tokenizer": str(tmp_path / "vocab.txt")}).summary.parameters == \
        2 * len(words) * hidden

"""One validator style for every JSON and TOML data file archviz reads (archviz.records.recordcheck): a field of the wrong
type is exit 2, one line naming the file, the field's path and what it must hold, and no traceback, for each kind of
file: records, annotations, hardware presets, names files, the gallery's --sets, rules files, manifests. Each file
is written here, whole but for the one field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import one_line_error

from archviz.records.recordcheck import SchemaError, want_int, want_number, want_str, want_strs, want_table

TESTS = Path(__file__).resolve().parents[1]
TOPLEVEL = TESTS / "fixtures" / "toplevel" / "model.py"


def test_the_primitives_name_the_path_and_what_was_expected() -> None:
    cases = [(lambda: want_int("a.b", True), "a.b: an integer, not True"),
             (lambda: want_int("n", 0, minimum=1), "n: an integer of at least 1, not 0"),
             (lambda: want_number("x", float("nan")), "x: a number, not nan"),
             (lambda: want_number("x", "1", minimum=0), "x: a non-negative number, not '1'"),
             (lambda: want_str("s", "  ", nonempty=True), "s: a non-empty string, not '  '"),
             (lambda: want_strs("l", ["a", 1]), "l: a list of strings, not ['a', 1]"),
             (lambda: want_table("t", {"a": 1, "z": 2}, {"a"}), "t: unknown key 'z' (keys: a)"),
             (lambda: want_table("t", [1]), "t: a table, not [1]")]
    for call, message in cases:
        with pytest.raises(SchemaError) as e:
            call()
        assert str(e.value) == message
    assert want_table("t", {"a": 1}, {"a", "b"}) == {"a": 1} and want_number("x", 3) == 3.0


def test_a_records_file_with_a_count_of_the_wrong_type(archviz_cli, tmp_path: Path) -> None:
    good = tmp_path / "r.json"
    assert archviz_cli("walk", TOPLEVEL, "-o", good).returncode == 0
    data = json.loads(good.read_text())
    data["summary"]["parameters"] = "many"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    line = one_line_error(archviz_cli("summary", bad))
    assert str(bad) in line and "summary.parameters: an integer, not 'many'" in line


def test_annotations_with_a_title_of_the_wrong_type(archviz_cli, tmp_path: Path) -> None:
    ann = tmp_path / "notes.toml"
    ann.write_text('[[node]]\npath = "layers.*"\ntitle = 3\n')
    line = one_line_error(archviz_cli("build", TOPLEVEL, "--annotations", ann, "-o", tmp_path / "site"))
    assert "notes.toml: node[path='layers.*'].title: a string or null, not 3" in line
    assert not (tmp_path / "site").exists()


def test_annotations_with_claim_lines_of_the_wrong_type(archviz_cli, tmp_path: Path) -> None:
    ann = tmp_path / "notes.toml"
    ann.write_text('[[node]]\nclass = "Block"\n[[node.claim]]\nid = "c"\nfile = "model.py"\nlines = [1.5, 2]\n'
                   'quote = "x"\n')
    line = one_line_error(archviz_cli("build", TOPLEVEL, "--annotations", ann, "-o", tmp_path / "site"))
    assert "notes.toml: claim 'c'.lines: [first, last], \"first-last\" or a line number, not [1.5, 2]" in line


@pytest.mark.parametrize("memory, peaks, message", [
    ('"80"', "bf16 = 989.5", "[mygpu].memory_gb: a non-negative number up to 1e+06, not '80'"),
    ("80", "bf16 = true", "[mygpu].peak_tflops.bf16: a non-negative number up to 1e+09, not True"),
])
def test_a_hardware_file_with_a_number_of_the_wrong_type(archviz_cli, tmp_path: Path, memory: str, peaks: str,
                                                         message: str) -> None:
    hw = tmp_path / "mine.toml"
    hw.write_text(f'[mygpu]\nname = "My GPU"\nsource = "its sheet"\nmemory_gb = {memory}\n'
                  f'memory_bandwidth_gb_s = 3350\ninterconnect_gb_s = 450\npeak_tflops = {{ {peaks} }}\n')
    line = one_line_error(archviz_cli("cost", TOPLEVEL, "--hardware", hw))
    assert f"{hw}: {message}" in line


@pytest.mark.parametrize("name, text, message", [
    ("names.toml", '"layers.*" = 3\n', "layers.*: a string, not 3"),
    ("names.toml", '[groups]\n"Block" = { "Out" = "proj" }\n',
     "groups.Block.Out: a non-empty list of non-empty strings, not 'proj'"),
    ("names.json", '{"groups": {"Block": {"Out": ["proj", 2]}}}',
     "groups.Block.Out: a non-empty list of non-empty strings, not ['proj', 2]"),
    ("names.json", '["layers"]', "a table of key = \"Title\" strings, not ['layers']"),
])
def test_a_names_file_with_a_field_of_the_wrong_type(archviz_cli, tmp_path: Path, name: str, text: str,
                                                      message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    line = one_line_error(archviz_cli("inspect", TOPLEVEL, "--names", path))
    assert f"names file {path}: {message}" in line


def test_a_gallery_sets_file_with_a_model_of_the_wrong_type(archviz_cli, tmp_path: Path) -> None:
    sets = tmp_path / "sets.json"
    sets.write_text('{"llama": {"num_key_value_heads": 8}, "mistral": ["num_key_value_heads=8"]}')
    line = one_line_error(archviz_cli("gallery", "--transformers", "llama", "--sets", sets, "-o", tmp_path / "g"))
    assert f"--sets {sets}: mistral: an object of config fields, not ['num_key_value_heads=8']" in line
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("rules, message", [
    ('{"ignore": [{"pattern": "x", "label": 3}]}', "ignore[0] label: a non-empty string, not 3"),
    ('{"prefixes": ["model.", 7]}', "prefixes: a list of strings, not ['model.', 7]"),
    ('{"scales": {"fp4_block": "32"}}', "scales.fp4_block: an integer of at least 1, not '32'"),
])
def test_a_rules_file_with_a_field_of_the_wrong_type(archviz_cli, tmp_path: Path, rules: str, message: str) -> None:
    path = tmp_path / "rules.json"
    path.write_text(rules)
    line = one_line_error(archviz_cli("check", TOPLEVEL, "--checkpoint", tmp_path / "none.safetensors",
                                       "--rules", path))
    assert f"{path} {message}" in line


def test_a_manifest_with_a_shard_size_of_the_wrong_type(archviz_cli, tmp_path: Path) -> None:
    path = tmp_path / "ckpt.manifest.json"
    path.write_text(json.dumps({"format": "archviz-manifest/1", "shards": [
        {"name": "model.safetensors", "file_bytes": "1024", "header_bytes": 16}], "tensors": []}))
    line = one_line_error(archviz_cli("check", TOPLEVEL, "--checkpoint", path))
    assert f"{path}: shards[0].file_bytes: an integer of at least 0, not '1024'" in line


def test_a_rank_manifest_with_a_rank_of_the_wrong_type(archviz_cli, tmp_path: Path) -> None:
    path = tmp_path / "ranks.json"
    path.write_text(json.dumps({"format": "archviz-ranks/1", "world_size": 2, "ranks": [
        {"rank": 0, "file": "model0-mp2.safetensors", "manifest": {}},
        {"rank": "1", "file": "model1-mp2.safetensors", "manifest": {}}]}))
    line = one_line_error(archviz_cli("check", TOPLEVEL, "--world-size", "2", "--checkpoint", path))
    assert f"{path}: ranks[1].rank: an integer, not '1'" in line


def test_a_safetensors_index_with_a_shard_of_the_wrong_type(archviz_cli, tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(json.dumps({"metadata": {}, "weight_map": {"embed.weight": "model-1.safetensors",
                                                               "head.weight": ["model-2.safetensors"]}}))
    line = one_line_error(archviz_cli("check", TOPLEVEL, "--checkpoint", path))
    assert "index: weight_map['head.weight']: a non-empty string, not ['model-2.safetensors']" in line

"""Unusable input reaches the user as one line on stderr and exit code 2, never a traceback (unless --debug).

Every case runs the real command line in its own process. The cases are independent, so they run side by side in one
module-scoped fixture; each test then reads its own result. Line numbers the messages must name are found here by
searching the offending file for the offending statement.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch
import transformers
from helpers import TESTS

BAD = TESTS / "data" / "bad"
FACTORIES = TESTS / "data" / "factories"
DSV3 = TESTS / "fixtures" / "dsv3like"


def line_of(path: Path, needle: str, nth: int = 0) -> int:
    hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    assert len(hits) > nth, f"{needle!r} not in {path}"
    return hits[nth]


CASES = {
    "unknown_type": ["summary", "hf:nope_model"],
    "missing_field": ["summary", BAD / "missing_field"],
    "unknown_attr": ["summary", BAD / "unknown_attr"],
    "raises_on_import": ["summary", BAD / "raises_on_import"],
    "raises_on_import_inspect": ["inspect", BAD / "raises_on_import"],
    "raises_on_import_walk": ["walk", BAD / "raises_on_import"],
    "returns_none": ["summary", "bad_factories:returns_none"],
    "needs_cuda": ["summary", "bad_factories:needs_cuda"],
    "set_unknown_hf": ["summary", "hf:llama", "--set", "num_hiden_layers=2"],
    "set_unknown_reference": ["summary", DSV3, "--set", "n_layer=2"],
    "set_not_key_value": ["summary", DSV3, "--set", "n_layers"],
    "missing_file": ["summary", BAD / "no_such_folder" / "model.py"],
    "missing_config": ["summary", BAD / "not_json" / "model.py", "--config", BAD / "no_such_config.json"],
    "not_json_reference": ["summary", BAD / "not_json"],
    "not_json_hf": ["summary", BAD / "not_json" / "config.json"],
    "config_fails_validation": ["summary", BAD / "config_fails_validation" / "config.json"],
    "debug": ["summary", BAD / "raises_on_import", "--debug"],
    "asks_for_cuda": ["summary", "bad_factories:asks_for_cuda", "--json"],
    "two_model_classes": ["summary", "hf:lw_detr_vit"],
    "config_field_null": ["inspect", DSV3, "--set", "n_layers=2", "--set", "n_activated_experts=null"],
    "build_field_null_reference": ["summary", DSV3, "--set", "kv_lora_rank=null"],
    "forward_input_named": ["inspect", "needs_input:model"],
    "forward_input_given": ["inspect", "needs_input:model", "--input", "features=B,T,8:float32", "mix", "--json"],
    "build_field_null_hf": ["summary", "hf:ministral", "--set", "num_hidden_layers=1", "--set", "head_dim=null"],
    "pass_option_walk": ["walk", DSV3, "--input", "x=B,T", "-o", Path(tempfile.gettempdir()) / "archviz-unused.json"],
    "pass_options_no_shapes": ["inspect", DSV3, "--no-shapes", "--batch", "3", "--every-block"],
    "pass_option_build": ["build", DSV3, "--no-shapes", "--kernel-rules", "rules.py", "-o", Path(tempfile.gettempdir()) / "archviz-unused-site"],
}


@pytest.fixture(scope="module")
def results(archviz_cli):
    return archviz_cli.many(CASES)


def one_line_error(r) -> str:
    """The contract: exit 2, nothing on stdout, exactly one line on stderr, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_unknown_model_type(results):
    line = one_line_error(results["unknown_type"])
    assert "unknown model type 'nope_model'" in line


def test_type_with_two_candidate_classes_names_them(results, archviz_cli, tmp_path):
    """lw_detr_vit has no Auto class, and its modeling module declares two for its config: the line names both and
    how to choose; doing what it says builds."""
    import transformers.models.lw_detr.modeling_lw_detr as modeling

    line = one_line_error(results["two_model_classes"])
    candidates = sorted(k for k, v in vars(modeling).items() if isinstance(v, type) and issubclass(
        v, transformers.PreTrainedModel) and getattr(v, "config_class", None) is transformers.LwDetrViTConfig
        and not k.endswith("PreTrainedModel"))
    assert len(candidates) == 2
    assert f"it could be one of {', '.join(candidates)}" in line
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "lw_detr_vit", "architectures": [candidates[0]]}))
    r = archviz_cli("summary", tmp_path / "config.json", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model_class"].endswith(f".{candidates[0]}")


def test_config_missing_a_required_field(results):
    line = one_line_error(results["missing_field"])
    assert str(BAD / "missing_field" / "config.json") in line
    assert "'dim'" in line  # the field ModelArgs requires and the config lacks


def test_model_reads_a_field_modelargs_lacks(results):
    line = one_line_error(results["unknown_attr"])
    where = line_of(BAD / "unknown_attr" / "model.py", "args.n_experts")
    assert f"args.n_experts at model.py:{where}" in line
    assert "ModelArgs" in line


@pytest.mark.parametrize("case", ["raises_on_import", "raises_on_import_inspect", "raises_on_import_walk"])
def test_reference_that_raises_on_import(results, case):
    line = one_line_error(results[case])
    where = line_of(BAD / "raises_on_import" / "model.py", 'raise RuntimeError("boom")')
    assert f"RuntimeError on import at model.py:{where}: boom" in line


def test_factory_returning_no_module(results):
    line = one_line_error(results["returns_none"])
    assert "bad_factories:returns_none" in line
    assert "NoneType" in line and "nn.Module" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="the factory only insists where CUDA is absent")
def test_model_that_insists_on_cuda(results):
    line = one_line_error(results["needs_cuda"])
    where = line_of(FACTORIES / "bad_factories.py", 'assert torch.cuda.is_available(), "needs CUDA"')
    assert "insists on CUDA" in line
    assert f"bad_factories.py:{where}" in line


def test_model_asking_for_cuda_builds_on_meta(results):
    r = results["asks_for_cuda"]
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # a: Linear(8, 16), b: Linear(16, 4), each with a bias; steps: a buffer of 3
    assert out["parameters"] == (8 * 16 + 16) + (16 * 4 + 4)
    assert out["buffer_elements"] == 3
    src = FACTORIES / "bad_factories.py"
    wanted = {
        f"torch.set_default_device('cuda') at bad_factories.py:{line_of(src, 'torch.set_default_device(')}",
        f"device='cuda' at bad_factories.py:{line_of(src, 'device=' + chr(34) + 'cuda', 0)}",
        f".cuda() at bad_factories.py:{line_of(src, '.cuda()')}",
        f"device='cuda' at bad_factories.py:{line_of(src, 'device=' + chr(34) + 'cuda', 1)}",
    }
    for note in wanted:
        assert any(n.startswith(note) for n in out["notes"]), (note, out["notes"])


def test_config_that_fails_transformers_validation_is_one_line(results):
    """transformers' validators raise multi-line messages; they are folded into the one line."""
    line = one_line_error(results["config_fails_validation"])
    assert "transformers rejects this llama config" in line
    assert "`num_hidden_layers` (2) must be equal to the number of `layer_types` (3)" in line


def test_set_unknown_field_hf(results):
    line = one_line_error(results["set_unknown_hf"])
    assert "--set num_hiden_layers" in line and "LlamaConfig has no field 'num_hiden_layers'" in line
    assert "did you mean num_hidden_layers" in line


def test_set_unknown_field_reference(results):
    line = one_line_error(results["set_unknown_reference"])
    assert "--set n_layer: ModelArgs has no field 'n_layer'" in line
    assert "n_layers" in line  # the suggestion


def test_set_without_a_value(results):
    line = one_line_error(results["set_not_key_value"])
    assert "not key=value" in line


def test_missing_source_file(results):
    line = one_line_error(results["missing_file"])
    assert "no_such_folder" in line and "no such file" in line


def test_missing_config_file(results):
    line = one_line_error(results["missing_config"])
    assert "no_such_config.json" in line and "no such file" in line


@pytest.mark.parametrize("case", ["not_json_reference", "not_json_hf"])
def test_config_that_is_not_json(results, case):
    line = one_line_error(results[case])
    assert "config.json: not a readable JSON config" in line


def test_debug_shows_the_traceback(results):
    r = results["debug"]
    assert r.returncode != 0
    assert "Traceback (most recent call last)" in r.stderr
    assert 'raise RuntimeError("boom")' in r.stderr  # the user's own frame is in it
    assert "RuntimeError: boom" in r.stderr


def test_a_config_field_left_null_is_named_when_the_pass_dies_on_it(results):
    """The gate's `self.topk = args.n_activated_experts` is None, so the meta pass dies in torch.topk: the line names
    the field to set, found from the gate's own __init__ (read here from the fixture's source)."""
    model = DSV3 / "model.py"
    line = one_line_error(results["config_field_null"])
    assert f"model.py:{line_of(model, 'scores.topk(self.topk, dim=-1)')}" in line, line
    assert ("self.topk is None: Gate.__init__ takes it from args.n_activated_experts, which this config leaves unset; "
            "give it with --set n_activated_experts=VALUE") in line
    assert f"model.py:{line_of(model, 'self.topk = args.n_activated_experts')}" not in line  # the use, not the set


def test_a_config_field_left_null_is_named_when_the_build_dies_on_it(results):
    """Built with a field set to null, the constructor dies on arithmetic with None: the line names the field, read
    from the __init__ that copied it (the fixture's MLA; transformers' MinistralAttention via getattr)."""
    import inspect

    from transformers.models.ministral.modeling_ministral import MinistralAttention

    line = one_line_error(results["build_field_null_reference"])
    assert f"model.py:{line_of(DSV3 / 'model.py', 'self.kv_lora_rank + self.qk_rope_head_dim')}" in line, line
    assert ("self.kv_lora_rank is None: MLA.__init__ takes it from args.kv_lora_rank, which this config leaves "
            "unset; give it with --set kv_lora_rank=VALUE") in line
    line = one_line_error(results["build_field_null_hf"])
    assert 'self.head_dim = getattr(config, "head_dim"' in inspect.getsource(MinistralAttention.__init__)
    assert ("self.head_dim is None: MinistralAttention.__init__ takes it from config.head_dim, which this config "
            "leaves unset; give it with --set head_dim=VALUE") in line


def test_a_forward_input_the_error_names_is_named_in_the_hint(results):
    """The model's forward raises naming its missing input: the line says which input to give and how, and doing
    what it says traces (the mixer then reads twice the width: token embedding and features side by side)."""
    line = one_line_error(results["forward_input_named"])
    assert "ValueError: `features` cannot be `None`" in line
    assert "TwoInputs.forward's features was not given: give it with --input name=dims[:dtype]" in line
    r = results["forward_input_given"]
    assert r.returncode == 0, r.stderr
    mix = json.loads(r.stdout)
    assert mix["inputs"] == [["B", "T", 16]] and mix["outputs"] == [["B", "T", 8]]


@pytest.mark.parametrize("case, flags", [("pass_option_walk", "--input applies"),
                                         ("pass_options_no_shapes", "--batch, --every-block apply"),
                                         ("pass_option_build", "--kernel-rules applies")])
def test_options_of_the_meta_pass_without_the_pass_are_refused(results, case, flags):
    """Given to a run that skips the meta pass, they would change nothing: the line says so and how to run it."""
    line = one_line_error(results[case])
    assert line.startswith(f"error: {flags} to the meta forward pass, which this run skips")
    assert "walk --shapes" in line and "--no-shapes" in line

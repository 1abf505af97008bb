"""Widths are named by the expression that built the module, read here from the fixture's own source."""
import json
import re

import pytest

import archviz
from helpers import REPO, TESTS

FIX = TESTS / "fixtures" / "dsv41like"


@pytest.fixture(scope="module")
def fixture_record():
    return archviz.load(str(FIX / "model.py"), config=str(FIX / "config.json"))


def test_output_projection_widths_are_named_from_its_constructor(fixture_record):
    cfg = json.loads((FIX / "config.json").read_text())
    source = (FIX / "model.py").read_text()
    m = re.search(r"self\.wo_b = \w+\((?:self|args)\.(\w+) \* (?:self|args)\.(\w+), (?:self|args)\.(\w+)\)", source)
    assert m, "the fixture builds wo_b as Linear(self.<groups> * args.<rank>, self.<dim>)"
    record = fixture_record
    dims = dict(record.module("layers.3.attn.wo_b").dims)
    assert dims == {cfg["o_groups"] * cfg["o_lora_rank"]: f"{m.group(1)} × {m.group(2)}", cfg["dim"]: m.group(3)}


def test_widths_without_a_constructor_name_take_the_config_field_everywhere(archviz_cli):
    """Fused experts get their widths from no constructor argument: --json and the terminal card name them by the
    config field they equal, as the site does (hidden_size for the model width, num_experts_per_tok for top-k)."""
    import transformers

    cfg = transformers.AutoConfig.for_model("qwen3_moe")
    path = "model.layers.0.mlp.experts"
    run = ["inspect", "hf:qwen3_moe", "--set", "num_hidden_layers=1", path]
    p = archviz_cli(*run, "--json")
    assert p.returncode == 0, p.stderr
    names = json.loads(p.stdout)["dim_names"]
    assert names[str(cfg.hidden_size)] == "hidden_size" and names[str(cfg.num_experts_per_tok)] == "num_experts_per_tok"
    p = archviz_cli(*run)
    assert f"[B·T, hidden_size={cfg.hidden_size}]" in p.stdout, p.stdout  # dims carry their names (issue 44)


def test_a_constructor_inside_a_conditional_expression_names_its_widths():
    """transformers' DeepSeek-V3 builds `self.q_b_proj = (nn.Linear(self.q_lora_rank, self.num_heads *
    self.qk_head_dim, ...) if self.q_lora_rank is not None else None)`: its widths are named from that call."""
    import inspect

    import transformers
    import transformers.models.deepseek_v3.modeling_deepseek_v3 as mod

    m = re.search(r"self\.q_b_proj = \(\s*nn\.Linear\(self\.(\w+), self\.(\w+) \* self\.(\w+)", inspect.getsource(mod))
    assert m, "transformers builds q_b_proj inside a conditional expression"
    cfg = transformers.AutoConfig.for_model("deepseek_v3")
    out = cfg.num_attention_heads * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim)
    record = archviz.load("hf:deepseek_v3", overrides={"num_hidden_layers": 1})
    assert dict(record.module("model.layers.0.self_attn.q_b_proj").dims) == {
        cfg.q_lora_rank: m.group(1), out: f"{m.group(2)} × {m.group(3)}"}
    # its RMSNorm makes `nn.Parameter(torch.ones(hidden_size))` of an argument the attention gives q_lora_rank: the
    # parameter's size is not named by that expression (the config's hidden_size is another value)
    norm = inspect.getsource(mod.DeepseekV3RMSNorm.__init__)
    assert "nn.Parameter(torch.ones(hidden_size))" in norm and cfg.hidden_size != cfg.q_lora_rank
    assert dict(record.module("model.layers.0.self_attn.q_a_layernorm").dims).get(cfg.q_lora_rank) is None
    assert dict(record.module("model.layers.0.input_layernorm").dims) == {cfg.hidden_size: "hidden_size"}


def test_a_code_name_that_is_a_config_field_of_another_value_gives_way_to_the_config():
    """The shared experts' MLP is built with intermediate_size = moe_intermediate_size × n_shared_experts and names
    its width `self.intermediate_size`; shown as 'intermediate_size' it would read as the config's (18432)."""
    import transformers

    from archviz.render.views import module_json

    cfg = transformers.AutoConfig.for_model("deepseek_v3")
    width = cfg.moe_intermediate_size * cfg.n_shared_experts
    assert width != cfg.intermediate_size
    record = archviz.load("hf:deepseek_v3", overrides={"num_hidden_layers": cfg.first_k_dense_replace + 1})
    path = f"model.layers.{cfg.first_k_dense_replace}.mlp.shared_experts.gate_proj"
    names = module_json(record, path)["dim_names"]
    assert names[str(width)] != "intermediate_size" and dict(record.module(path).dims).get(width) != \
        "intermediate_size"
    if cfg.n_shared_experts == 1:  # the MLP's self.intermediate_size is then the config's moe_intermediate_size
        assert names[str(width)] == "moe_intermediate_size"


def test_a_small_dim_is_not_named_as_a_chance_product_of_two_fields():
    """DeepSeek-V4-Flash's rotary tables are qk_rope_head_dim / 2 = 32 wide, which hc_mult × o_groups (4 × 8) also
    equals by chance: such a small dim is not named as the product but as the rotary half-width (of the three fields
    of 64, the one of the rotary encoding)."""
    from archviz.shapes import trace_shapes
    from archviz.sources import BuildOptions
    from archviz.sources.dispatch import build
    from archviz.render.views import module_json
    from archviz.walk import walk

    config = REPO / "examples" / "deepseek-v4-flash" / "config.json"
    cfg = json.loads(config.read_text())
    half = cfg["qk_rope_head_dim"] // 2
    assert half == cfg["hc_mult"] * cfg["o_groups"], "the coincidence this test is about"
    path = "model.layers.2.self_attn.compressor.rotary_emb"
    built = build(str(config), BuildOptions(overrides={"num_hidden_layers": 3}))
    record = trace_shapes(built, walk(built))
    assert any(half in s for c in record.module(path).calls for s in c.outputs)
    rotary = [k for k, v in cfg.items() if v == 2 * half and "rope" in k]
    assert len(rotary) == 1 and len([k for k, v in cfg.items() if v == 2 * half]) > 1  # what the name decides between
    assert module_json(record, path)["dim_names"][str(half)] == f"{rotary[0]}/2"


def test_a_code_name_is_put_in_the_config_terms_of_its_module():
    """transformers' DeepSeek-V4 indexer sets `self.head_dim = config.index_head_dim` and builds
    `kv_proj = nn.Linear(config.hidden_size, 2 * self.head_dim)`: "2 × head_dim" would read as the config's
    head_dim, so the width is named "2 × index_head_dim" (both facts read here from transformers' source)."""
    import inspect

    import transformers.models.deepseek_v4.modeling_deepseek_v4 as mod

    src = inspect.getsource(mod.DeepseekV4Indexer.__init__)
    assert re.search(r"self\.head_dim = config\.index_head_dim", src)
    assert re.search(r"self\.kv_proj = nn\.Linear\(config\.hidden_size, 2 \* self\.head_dim", src)
    config = REPO / "examples" / "deepseek-v4-flash" / "config.json"
    cfg = json.loads(config.read_text())
    assert cfg["head_dim"] != cfg["index_head_dim"]
    record = archviz.load(str(config), overrides={"num_hidden_layers": 3})
    dims = dict(record.module("model.layers.2.self_attn.compressor.indexer.kv_proj").dims)
    assert dims[2 * cfg["index_head_dim"]] == "2 × index_head_dim"


def test_a_module_beside_list_attributes_is_walked_and_named():
    """Bamba's Mamba mixer holds a list attribute (time_step_limit) beside its Linears: the walk once failed on it
    ("unhashable type: 'list'"). Its out_proj is built from self.intermediate_size, which the mixer sets to
    mamba_expand × hidden_size -- not the config's intermediate_size (the MLP's) -- so that width stays unnamed."""
    import inspect

    import transformers
    from transformers.models.bamba import modeling_bamba

    cfg = transformers.AutoConfig.for_model("bamba")
    source = inspect.getsource(modeling_bamba.BambaMixer.__init__)
    assert "self.out_proj = nn.Linear(self.intermediate_size, self.hidden_size" in source
    assert "self.time_step_limit = config.time_step_limit" in source
    mixer_width = int(cfg.mamba_expand * cfg.hidden_size)
    assert mixer_width != cfg.intermediate_size
    record = archviz.load("hf:bamba", overrides={"num_hidden_layers": 1})
    mixer = record.module("model.layers.0.mamba")
    assert any(isinstance(v, list) for _, v in mixer.attributes)
    dims = dict(record.module("model.layers.0.mamba.out_proj").dims)
    assert dims == {mixer_width: "", cfg.hidden_size: "hidden_size"}


def test_a_parameter_size_from_a_local_variable_is_named_by_its_expression(fixture_record):
    """The hyper-connection block computes `mix_hc = (2 + args.hc_mult) * args.hc_mult` in its __init__ and makes
    `nn.Parameter(torch.empty(mix_hc, hc_dim))`: the size is named by that expression in the config's terms, on the
    module and on its node page. By value alone it could not be: other pairs of fields give it too."""
    from archviz.render.dims import named_dims

    cfg = json.loads((FIX / "config.json").read_text())
    source = (FIX / "model.py").read_text()
    local = re.search(r"\n\s+(\w+) = \(2 \+ args\.(\w+)\) \* args\.(\w+)\n", source)
    assert local and local.group(2) == local.group(3), "the fixture computes (2 + hc) * hc in a local variable"
    var, field = local.group(1), local.group(2)
    made = re.search(rf"self\.(\w+) = nn\.Parameter\(torch\.empty\({var}, (\w+),", source)
    assert made
    size = (2 + cfg[field]) * cfg[field]
    ints = {k: v for k, v in cfg.items() if type(v) is int and v > 1}
    assert [(a, b) for a in ints for b in ints if a < b and ints[a] * ints[b] == size], "a chance product exists"
    block = next(m for m in fixture_record.modules if any(t.name == made.group(1) for t in m.tensors))
    name = f"(2 + {field}) × {field}"
    assert dict(block.dims)[size] == name
    assert named_dims(block, dict(fixture_record.source.config))[size] == name

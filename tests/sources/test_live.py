"""`archviz.load` of Python objects: a live model (walked where it is, its weights untouched), wrapped models (the
base model's counts plus the wrapper's own, said as such), a factory callable, a transformers config, and inputs
given as tensors or shapes."""

from __future__ import annotations

import hashlib

import pytest
import torch
from torch import nn

import archviz

TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100}


def _llama_parameters(layers: int = 2, d: int = 64, ff: int = 128, heads: int = 4, kv_heads: int = 2,
                      vocab: int = 100) -> int:
    kv = kv_heads * (d // heads)
    return 2 * vocab * d + layers * (2 * d * d + 2 * d * kv + 3 * d * ff + 2 * d) + d


def _checksum(model: nn.Module) -> str:
    h = hashlib.sha256()
    for name, t in model.state_dict(keep_vars=True).items():
        h.update(name.encode())
        h.update(t.detach().cpu().numpy().tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def live() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**TINY))
    model.train()  # the user's mode: the walk and the pass must leave it so
    return model


@pytest.fixture(scope="module")
def from_source():
    return archviz.load("hf:llama", overrides=TINY, shapes=True, group=True)


def test_a_live_cpu_model_has_the_records_of_its_source_and_is_untouched(live: nn.Module, from_source) -> None:
    before = _checksum(live)
    ptrs = [p.data_ptr() for p in live.parameters()]
    record = archviz.load(live, shapes=True, group=True)
    assert _checksum(live) == before and [p.data_ptr() for p in live.parameters()] == ptrs
    assert live.training and all(p.device.type == "cpu" for p in live.parameters())
    assert record.summary.parameters == from_source.summary.parameters == _llama_parameters()

    def facts(r):
        return {m.path: (m.class_name, m.totals, [(t.name, t.shape, t.dtype) for t in m.tensors],
                         [(c.inputs, c.outputs) for c in m.calls]) for m in r.modules}

    assert facts(record) == facts(from_source)  # parameters, tensors and the pass's shapes, module by module
    assert record.extra("grouping") == from_source.extra("grouping")


def test_torch_compile_is_taken_off_and_said(live: nn.Module) -> None:
    record = archviz.load(torch.compile(live))
    wrapper = record.extra("wrapper")
    assert wrapper["wrappers"] == ["torch.compile (OptimizedModule)"]
    assert (wrapper["base_parameters"], wrapper["own_parameters"]) == (_llama_parameters(), 0)
    assert record.summary.parameters == _llama_parameters()
    assert any("torch.compile" in n for n in record.source.notes)


def test_a_peft_lora_model_counts_the_base_and_the_adapters_apart(live: nn.Module) -> None:
    peft = pytest.importorskip("peft")
    import copy

    wrapped = peft.get_peft_model(copy.deepcopy(live), peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    record = archviz.load(wrapped)
    # each adapted linear gains A (r × in) and B (out × r): q is 64 → 64, v is 64 → 32, in 2 layers
    adapters = 2 * (4 * (64 + 64) + 4 * (64 + 32))
    wrapper = record.extra("wrapper")
    assert wrapper["wrappers"][0].startswith("peft ")
    assert (wrapper["base_parameters"], wrapper["own_parameters"]) == (_llama_parameters(), adapters)
    assert record.summary.parameters == _llama_parameters() + adapters
    shown = str(archviz.summary(record))
    assert f"the base model's {_llama_parameters():,} plus the wrapper's own {adapters:,}" in shown


def test_a_config_object_and_a_factory_callable(live: nn.Module) -> None:
    assert archviz.load(live.config).summary.parameters == _llama_parameters()

    def make(width: int = 8) -> nn.Module:
        return nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, width))

    record = archviz.load(make, overrides={"width": 16})
    assert record.summary.parameters == 16 * 32 + 32 + 32 * 16 + 16
    assert next(p for p in record.modules if p.path == "0").tensors[0].shape == (32, 16)


class _Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x).mean(dim=(2, 3)))


@pytest.mark.parametrize("inputs", [{"x": (2, 3, 32, 32)}, {"x": torch.zeros(2, 3, 32, 32)}, ["x=2,3,32,32"]])
def test_inputs_as_shapes_tensors_or_specs(inputs) -> None:
    record = archviz.load(_Conv(), inputs=inputs)
    conv = record.module("conv")
    assert [list(s) for s in conv.calls[0].outputs] == [[2, 8, 16, 16]]  # (32 + 2 - 3) // 2 + 1 = 16


def test_a_built_model_takes_no_overrides_or_file_options(live: nn.Module) -> None:
    with pytest.raises(archviz.SourceError, match="takes no overrides"):
        archviz.load(live, overrides={"num_hidden_layers": 1})
    with pytest.raises(archviz.SourceError, match="config applies to a model built from a SOURCE string"):
        archviz.load(live, config="config.json")


def test_ddp_and_fsdp2_on_a_one_process_group(live: nn.Module, tmp_path) -> None:
    """DistributedDataParallel is taken off; FSDP2's fully_shard (in place) is walked as it is, each parameter at its
    global shape: both give the base model's counts, and say the wrapper."""
    import copy

    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        ddp = archviz.load(nn.parallel.DistributedDataParallel(copy.deepcopy(live)), shapes=True)
        assert ddp.extra("wrapper")["wrappers"] == ["DistributedDataParallel"]
        assert ddp.summary.parameters == _llama_parameters()
        from torch.distributed.fsdp import fully_shard

        sharded = fully_shard(copy.deepcopy(live))
        record = archviz.load(sharded)
        assert record.extra("wrapper")["wrappers"][0].startswith("FSDP2 fully_shard")
        assert record.summary.parameters == _llama_parameters()
    finally:
        dist.destroy_process_group()

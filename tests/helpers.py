"""Helpers shared by several test files: where the tests' files are, small transformers configs, records made by
hand, and small models written out for a test to build."""

from __future__ import annotations

import contextlib
import math
import re
import sys
import textwrap
from pathlib import Path
from typing import Iterator

from archviz.records import ModelRecord, ModuleRecord, SourceInfo, Summary, TensorRecord, Totals

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
FACTORIES = TESTS / "data" / "factories"

# Small configs, written by hand: every width is tiny, every kind of layer is kept.
TINY = {
    "llama": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=256, max_position_embeddings=128),
    "mixtral": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=256, num_local_experts=4, num_experts_per_tok=2,
                    max_position_embeddings=128),
    "qwen3_moe": dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256, num_experts=8,
                      num_experts_per_tok=2, max_position_embeddings=128),
    "gpt_oss": dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, vocab_size=256, num_local_experts=4, num_experts_per_tok=2,
                    max_position_embeddings=128, sliding_window=8,
                    layer_types=["sliding_attention", "full_attention"]),
    "deepseek_v3": dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
                        first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32,
                        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, head_dim=8,
                        n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
                        vocab_size=256, max_position_embeddings=128),
    "deepseek_v4": dict(hidden_size=64, moe_intermediate_size=32, num_hidden_layers=4, num_attention_heads=4,
                        num_key_value_heads=1, head_dim=32, qk_rope_head_dim=8, q_lora_rank=32, o_lora_rank=16,
                        o_groups=2, index_n_heads=2, index_head_dim=16, index_topk=4, n_routed_experts=8,
                        num_experts_per_tok=2, n_shared_experts=1, num_hash_layers=1, vocab_size=256,
                        sliding_window=8, compress_ratios=[0, 4, 128, 0],
                        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                        max_position_embeddings=256),
    "bert": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=256,
                 max_position_embeddings=64),
}


def hand_record(specs: list[tuple[str, str, dict, list[tuple[str, tuple]]]]) -> ModelRecord:
    """A hand-made record: (path, class, attributes, [(tensor name, shape)]) in pre-order."""
    paths = [p for p, *_ in specs]
    children = {p: [c for c in paths if c and (c.rsplit(".", 1)[0] if "." in c else "") == p] for p in paths}
    own = {}
    tens = {}
    for p, _, _, ts in specs:
        tens[p] = tuple(TensorRecord(n, "weight", s, "float32", math.prod(s), math.prod(s), 4 * math.prod(s))
                        for n, s in ts)
        own[p] = Totals(parameters=sum(t.elements for t in tens[p]), bytes=sum(t.bytes for t in tens[p]))
    totals = {}
    for p in reversed(paths):
        t = own[p]
        for c in children[p]:
            t = t + totals[c]
        totals[p] = t
    mods = tuple(ModuleRecord(path=p, class_name=cls, class_module="m", children=tuple(children[p]),
                              tensors=tens[p], totals=totals[p], own=own[p], attributes=tuple(attrs.items()))
                 for p, cls, attrs, _ in specs)
    root = totals[""]
    summary = Summary(parameters=root.parameters, active_parameters=None, scale_elements=0, table_elements=0,
                      buffer_elements=0, persistent_buffer_elements=0, bytes=root.bytes, bytes_by_dtype=(),
                      parameters_by_dtype=(), modules=len(mods))
    return ModelRecord(source=SourceInfo(spec="hand", kind="factory", name="hand", model_class="m.M"),
                       modules=mods, summary=summary)


def expand(name: str) -> set[str]:
    """Every name a compact name ("a.{0-1,3}.b | c.{2}") stands for."""
    out: set[str] = set()
    for alt in name.split(" | "):
        m = re.search(r"\{([0-9,\-]+)\}", alt)
        if m is None:
            out.add(alt)
            continue
        nums: list[int] = []
        for part in m.group(1).split(","):
            lo, _, hi = part.partition("-")
            nums.extend(range(int(lo), int(hi or lo) + 1))
        for k in nums:
            out |= expand(alt[:m.start()] + str(k) + alt[m.end():])
    return out


# The dataflow tests' blocks (tests/shapes/test_flow.py), a module written out for each build.
FLOW_BLOCKS = '''
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Attn(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = Attn(d)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        h = x + self.attn(self.norm1(x))
        out = h + self.mlp(self.norm2(h))
        return out


class MoEBlock(Block):
    """Another kind of layer: two MLPs averaged where Block has one."""

    def __init__(self, d):
        super().__init__(d)
        self.mlp2 = MLP(d)

    def forward(self, x):
        h = x + self.attn(self.norm1(x))
        return h + (self.mlp(self.norm2(h)) + self.mlp2(self.norm2(h))) / 2


class Net(nn.Module):
    def __init__(self, kinds, d=24):
        super().__init__()
        self.embed = nn.Embedding(50, d)
        self.layers = nn.ModuleList(MoEBlock(d) if k == "m" else Block(d) for k in kinds)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 50)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


class ArgBlock(nn.Module):
    """A block called with several arguments: positional, a pair, *rest and a keyword."""

    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.proj = nn.Linear(d, d)

    def forward(self, x, freqs, pair, *rest, mask=None):
        h = self.norm(x) * freqs + pair[0] - pair[1]
        for r in rest:
            h = h + r
        return self.proj(h + mask)


class ArgNet(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.embed = nn.Embedding(50, d)
        self.block = ArgBlock(d)

    def forward(self, ids):
        x = self.embed(ids)
        freqs = torch.ones(x.shape[-1], device=x.device)
        return self.block(x, freqs, (x * 2, x * 3), x * 4, mask=x * 0)


def arguments():
    return ArgNet()


def small():
    return Net("bb")


def two_kinds():
    return Net("ddd" + "m" * 9)


def alternating():
    return Net("bm" * 6)
'''


# A site built from names, docstrings and annotations that carry HTML and script.
XSS_MODULE = textwrap.dedent('''
    import torch
    from torch import nn

    PAYLOAD_DOC = '"><img src=x onerror=alert(1)> <script>alert(2)</script>'

    def build():
        Evil = type("<script>alert(3)</script>", (nn.Module,), {"__doc__": PAYLOAD_DOC})
        Img = type('"><img src=x onerror=alert(4)>', (nn.Linear,), {"__doc__": PAYLOAD_DOC})
        m = Evil()
        m.proj = Img(4, 4)
        m.items = nn.ModuleList([Img(4, 4), Img(4, 4)])
        return m
''')

XSS_ANNOTATIONS = textwrap.dedent('''
    [[node]]
    path = "proj"
    title = "<script>alert(5)</script>"
    description = "\\"><img src=x onerror=alert(6)>"
''')


def xss_site(tmp_path: Path, monkeypatch, cli) -> Path:
    """The site of XSS_MODULE with XSS_ANNOTATIONS, built by `cli` (the `archviz_cli` fixture) in tmp_path."""
    (tmp_path / "xss_factory.py").write_text(XSS_MODULE)
    (tmp_path / "xss.toml").write_text(XSS_ANNOTATIONS)
    out = tmp_path / "xss-site"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "xss_factory", raising=False)
    r = cli("build", "xss_factory:build", "-o", out, "--annotations", tmp_path / "xss.toml", "--no-shapes")
    assert r.returncode == 0, r.stderr
    return out


def one_line_error(r) -> str:
    """The one stderr line of a command refused as bad input (exit 2, no traceback), from a CompletedProcess."""
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    return lines[0]


@contextlib.contextmanager
def modules_cache(folder: Path) -> Iterator[Path]:
    """transformers' modules cache (HF_MODULES_CACHE, read once when transformers is imported) in `folder` for the
    duration; sys.path and the modules imported from it (`transformers_modules...`) as they were before."""
    import pytest
    import transformers.dynamic_module_utils as dmu

    package = dmu.TRANSFORMERS_DYNAMIC_MODULE_NAME
    ours = [name for name in sys.modules if name.split(".")[0] == package]
    before = ({name: sys.modules.pop(name) for name in ours}, list(sys.path))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dmu, "HF_MODULES_CACHE", str(folder))
        try:
            yield folder
        finally:
            for name in [name for name in sys.modules if name.split(".")[0] == package]:
                del sys.modules[name]
            sys.modules.update(before[0])
            sys.path[:] = before[1]


ANYINPUT = TESTS / "fixtures" / "anyinput"  # models whose inputs, layers and labels are not an LLM's


def anyinput(name: str):
    """The fixture module tests/fixtures/anyinput/NAME.py, imported afresh (for a real CPU run of the same code)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"anyinput_{name}", ANYINPUT / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

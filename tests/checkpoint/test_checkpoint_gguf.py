"""GGUF checkpoints: real files written with llama.cpp's own ``gguf`` package (GGUFWriter, gguf.quants) from small
models built here, checked against the same models; hostile headers written byte by byte.

The GGUF names are written out by hand below (llama.cpp's naming, as its converter writes them), not taken from the
gguf package's TensorNameMap that archviz reads them back with. Bytes per type are worked out here from the block
sizes of the GGML format (Q8_0: 32 values in 34 bytes; Q4_0: 32 values in 18 bytes; F16: 2 bytes; F32: 4 bytes).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from archviz.checkpoint import open_checkpoint  # noqa: E402
from archviz.checkpoint.gguf_header import parse_gguf  # noqa: E402
from tests.adversarial.adv_tools import cli_here, refused  # noqa: E402

Q = gguf.GGMLQuantizationType
BYTES_PER_BLOCK = {"Q8_0": (32, 34), "Q4_0": (32, 18), "F16": (1, 2), "F32": (1, 4)}

LLAMA = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
         "mlp.gate": "ffn_gate_inp"}
TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight", "transformer.wte.weight": "token_embd.weight",
       "transformer.wpe.weight": "position_embd.weight", "transformer.ln_f.weight": "output_norm.weight",
       "transformer.ln_f.bias": "output_norm.bias"}
GPT2 = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
        "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}


def _tensors(family: str, state: dict) -> dict[str, np.ndarray]:
    """The model's state dict as llama.cpp's converter lays it out: GGUF names, experts stacked per layer (gate and
    up split apart), GPT-2's Conv1D weights transposed, the tied output left out."""
    out: dict[str, np.ndarray] = {}
    for name, t in state.items():
        a = t.float().numpy()
        if name in TOP:
            if name == "lm_head.weight" and family == "gpt2":
                continue  # tied to the embedding: the converter writes it once
            out[TOP[name]] = a
            continue
        parts = name.split(".")
        layer, local, leaf = parts[2], ".".join(parts[3:-1]), parts[-1]
        if local == "mlp.experts":  # stacked experts, (E, out, in): gate and up apart, as llama.cpp keeps them
            if leaf == "gate_up_proj":
                half = a.shape[1] // 2
                out[f"blk.{layer}.ffn_gate_exps.weight"] = np.ascontiguousarray(a[:, :half])
                out[f"blk.{layer}.ffn_up_exps.weight"] = np.ascontiguousarray(a[:, half:])
            else:
                out[f"blk.{layer}.ffn_down_exps.weight"] = a
            continue
        table = GPT2 if family == "gpt2" else LLAMA
        if family == "gpt2" and a.ndim == 2:
            a = np.ascontiguousarray(a.T)  # Conv1D (in, out) written as Linear (out, in)
        out[f"blk.{layer}.{table[local]}.{leaf}"] = a
    return out


def write_gguf(path: Path, arch: str, blocks: int, tensors: dict[str, np.ndarray], qtype: str, *,
               split: int = 0, big: bool = False) -> list[Path]:
    """A real GGUF file (several with ``split``: tensors per file) written by gguf's GGUFWriter; matrices in
    ``qtype`` (quantized by gguf.quants), vectors in F32."""
    endian = gguf.GGUFEndian.BIG if big else gguf.GGUFEndian.LITTLE
    w = gguf.GGUFWriter(str(path), arch, endianess=endian, split_max_tensors=split)
    w.add_block_count(blocks)
    for name, a in tensors.items():
        if a.ndim == 1 or qtype == "F32":
            w.add_tensor(name, a.astype(np.float32))
        elif qtype == "F16":
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(a.astype(np.float32), Q[qtype]), raw_dtype=Q[qtype])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(path.parent.glob(path.stem + "*.gguf"))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, np.ndarray]]]:
    """Three small transformers models (config.json beside GGUF-laid-out tensors): a llama, a Mixtral-style MoE
    (4 stacked experts), a GPT-2 (fused QKV, Conv1D, tied output)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MixtralConfig, \
        MixtralForCausalLM

    torch.manual_seed(0)
    common = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2)
    built = {
        "llama": ("llama", LlamaForCausalLM(LlamaConfig(**common, tie_word_embeddings=False))),
        "mixtral": ("llama", MixtralForCausalLM(MixtralConfig(**common, num_local_experts=4,
                                                              num_experts_per_tok=2, tie_word_embeddings=False))),
        "gpt2": ("gpt2", GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                                    bos_token_id=0, eos_token_id=0))),
    }
    out = {}
    for key, (family, model) in built.items():
        folder = tmp_path_factory.mktemp(key)
        model.config.save_pretrained(folder)
        out[key] = (folder / "config.json", _tensors(family, model.state_dict()))
    return out


ARCH = {"llama": "llama", "mixtral": "llama", "gpt2": "gpt2"}


def _expected_bytes(tensors: dict[str, np.ndarray], qtype: str) -> dict[str, tuple[int, int]]:
    """(elements, bytes) per type, from the block sizes."""
    out: dict[str, list[int]] = {}
    for a in tensors.values():
        t = "F32" if a.ndim == 1 or qtype == "F32" else qtype
        block, size = BYTES_PER_BLOCK[t]
        row = out.setdefault(t, [0, 0])
        row[0] += a.size
        row[1] += a.size // block * size
    return {k: (v[0], v[1]) for k, v in out.items()}


@pytest.mark.parametrize("key,qtype", [("llama", "Q4_0"), ("mixtral", "Q8_0"), ("gpt2", "F16")])
def test_check_passes_and_counts_per_type(models, tmp_path, archviz_cli, key, qtype) -> None:
    config, tensors = models[key]
    path = write_gguf(tmp_path / "m.gguf", ARCH[key], 2, tensors, qtype)[0]
    inv = open_checkpoint(path)
    got = {t.dtype: (t.elements, t.bytes) for t in inv.type_totals()}
    assert got == _expected_bytes(tensors, qtype)
    assert {n: t.shape for n, t in inv.tensors.items()} == {n: a.shape for n, a in tensors.items()}
    r = cli_here(archviz_cli, "check", config, "--checkpoint", path, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_split_files_and_big_endian_read_as_one(models, tmp_path, archviz_cli) -> None:
    config, tensors = models["llama"]
    parts = write_gguf(tmp_path / "m.gguf", "llama", 2, tensors, "Q8_0", split=len(tensors) // 2 + 1)
    assert [p.name for p in parts] == ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]
    inv = open_checkpoint(parts[1])
    assert list(inv.tensors) == list(tensors) and [s.name for s in inv.shards] == [p.name for p in parts]
    assert cli_here(archviz_cli, "check", config, "--checkpoint", parts[0]).returncode == 0
    parts[1].unlink()
    refused(cli_here(archviz_cli, "check", config, "--checkpoint", parts[0]), "m-00002-of-00002.gguf", "missing")
    (tmp_path / "big").mkdir()
    big = write_gguf(tmp_path / "big" / "b.gguf", "llama", 2, tensors, "F16", big=True)
    assert {n: t.shape for n, t in open_checkpoint(big[0]).tensors.items()} == {n: a.shape for n, a in tensors.items()}


@pytest.mark.parametrize("big", [False, True])
def test_table_agrees_with_gguf_reader(models, tmp_path, big) -> None:
    """On a trusted file, llama.cpp's own GGUFReader (which maps the whole file) lists the same tensors: name, type,
    dims (innermost first: reversed), absolute data offset and bytes; and the same key-values."""
    _, tensors = models["mixtral"]
    path = write_gguf(tmp_path / "m.gguf", "llama", 2, tensors, "Q4_0", big=big)[0]
    inv = open_checkpoint(path)
    reader = gguf.GGUFReader(str(path), "r")
    data_at = inv.shards[0].header_bytes
    assert [(t.name, t.dtype, t.shape[::-1], data_at + t.data_offsets[0], t.nbytes) for t in inv] == [
        (t.name, t.tensor_type.name, tuple(int(d) for d in t.shape), int(t.data_offset), int(t.n_bytes))
        for t in reader.tensors]
    assert inv.metadata["gguf"]["llama.block_count"] == reader.fields["llama.block_count"].contents()


def _bad(tensors: dict[str, np.ndarray], change: str) -> tuple[dict[str, np.ndarray], str]:
    t = dict(tensors)
    if change == "layer":
        for n in [n for n in t if n.startswith("blk.1.")]:
            del t[n]
        return t, "model.layers.1.self_attn.q_proj.weight"
    if change == "expert":
        t["blk.1.ffn_down_exps.weight"] = t["blk.1.ffn_down_exps.weight"][:3]
        return t, "model.layers.1.mlp.experts.down_proj"
    t["blk.0.attn_k.weight"] = np.zeros((32, 32), np.float32)  # 16 rows in the model
    return t, "model.layers.0.self_attn.k_proj.weight"


@pytest.mark.parametrize("key,change", [("llama", "layer"), ("mixtral", "expert"), ("llama", "dim")])
def test_check_names_what_a_converter_dropped(models, tmp_path, archviz_cli, key, change) -> None:
    import json

    config, tensors = models[key]
    bad, name = _bad(tensors, change)
    path = write_gguf(tmp_path / "m.gguf", "llama", 2, bad, "F16")[0]
    r = cli_here(archviz_cli, "check", config, "--checkpoint", path, "--json")
    assert r.returncode == 1, r.stderr[-2000:]
    res = json.loads(r.stdout)
    wrong = {e["model"] for e in res["tensors"] if e["verdict"] in ("missing", "mismatch")}
    assert name in wrong, wrong


def test_manifest_lists_the_quant_mix(models, tmp_path, archviz_cli) -> None:
    import json

    config, tensors = models["llama"]
    path = write_gguf(tmp_path / "m.gguf", "llama", 2, tensors, "Q4_0")[0]
    r = cli_here(archviz_cli, "manifest", path, "-o", tmp_path / "m.json", "--json")
    assert r.returncode == 0, r.stderr
    types = {t["type"]: (t["elements"], t["bytes"], t["bits_per_weight"]) for t in json.loads(r.stdout)["types"]}
    want = _expected_bytes(tensors, "Q4_0")
    assert types == {k: (n, b, round(8 * b / n, 4)) for k, (n, b) in want.items()}
    assert types["Q4_0"][2] == 4.5
    assert cli_here(archviz_cli, "check", config, "--checkpoint", tmp_path / "m.json").returncode == 0


# ---------------------------------------------------------------------------------------------------------------------
# hostile headers, byte by byte


def _s(text: bytes | str, length: int | None = None) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw) if length is None else length) + raw


def _header(n_tensors: int, kvs: bytes, n_kv: int, table: bytes, data: bytes = b"", version: int = 3) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + kvs + table
    return head + b"\0" * (-len(head) % 32) + data


def _info(name: str, dims: tuple[int, ...], type_id: int = 0, offset: int = 0) -> bytes:
    return _s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + \
        struct.pack("<IQ", type_id, offset)


ARCH_KV = _s("general.architecture") + struct.pack("<I", 8) + _s("llama")


def _nested(depth: int) -> bytes:
    body = struct.pack("<I", 4) + struct.pack("<Q", 1) + struct.pack("<I", 7)  # innermost: [uint32 7]
    for _ in range(depth - 1):
        body = struct.pack("<I", 9) + struct.pack("<Q", 1) + body
    return _s("x.nested") + struct.pack("<I", 9) + body


HOSTILE = {
    "tensor count 2**63": (_header(2**63, ARCH_KV, 1, b""), "9,223,372,036,854,775,808 tensors"),
    "string of 2**40 bytes": (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _s("general.name") + struct.pack("<I", 8)
                              + struct.pack("<Q", 2**40), "1,099,511,627,776 bytes"),
    "dims overflow int64": (_header(1, ARCH_KV, 1, _info("w", (2**32, 2**32))), "2**63 - 1 elements"),
    "unknown type id": (_header(1, ARCH_KV, 1, _info("w", (4,), type_id=999), b"\0" * 64), "unknown GGML type id 999"),
    "truncated table": (_header(2, ARCH_KV, 1, _info("w", (4,)))[:-40], "runs past the end"),
    "offset past the end": (_header(1, ARCH_KV, 1, _info("w", (8,), offset=4096), b"\0" * 32), "run past the"),
    "nested arrays": (_header(0, _nested(40), 1, b""), "nested more than"),
    "version 1": (_header(0, b"", 0, b"", version=1), "version 1"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_headers_are_refused_in_one_line(tmp_path, archviz_cli, case) -> None:
    data, fragment = HOSTILE[case]
    path = tmp_path / "h.gguf"
    path.write_bytes(data)
    line = refused(cli_here(archviz_cli, "manifest", path, "-o", tmp_path / "out.json"))
    assert fragment in line, line
    assert not (tmp_path / "out.json").exists()


def test_a_40_gb_sparse_file_costs_what_a_40_mb_one_does(tmp_path) -> None:
    """The header is read from the front and the data region never: a sparse 40 GB file's header is read in the
    same reads as a 40 MB file's."""
    table = _info("blk.0.attn_q.weight", (4096, 1024), type_id=int(Q.Q8_0))
    reads = {}
    for name, size in (("small", 40 * 10**6), ("big", 40 * 10**9)):
        path = tmp_path / f"{name}.gguf"
        path.write_bytes(_header(1, ARCH_KV, 1, table))
        os.truncate(path, size)
        log: list[tuple[int, int]] = []
        with open(path, "rb") as f:
            def read_at(at: int, n: int) -> bytes:
                log.append((at, n))
                return os.pread(f.fileno(), n, at)

            shard, _ = parse_gguf(read_at, size, shard=name, where=str(path))
        reads[name] = (log, sum(n for _, n in log), shard.tensors["blk.0.attn_q.weight"].nbytes)
    assert reads["small"][2] == 4096 * 1024 // 32 * 34
    assert reads["big"][0] == reads["small"][0] and reads["big"][1] < 2 * 2**20


# ---------------------------------------------------------------------------------------------------------------------
# remote, by range requests (tests/checkpoint/conftest.py's Hub-like server on 127.0.0.1)


class _Shrinking(dict):
    """A repository's files whose GGUF is replaced by a shorter one after it was first served."""

    def __getitem__(self, key: str) -> bytes:
        data = dict.__getitem__(self, key)
        if key.endswith(".gguf"):
            dict.__setitem__(self, key, data[: len(data) // 2])
        return data


def test_remote_gguf_by_range_requests(models, tmp_path, hub_server, archviz_cli) -> None:
    config, tensors = models["llama"]
    parts = write_gguf(tmp_path / "m.gguf", "llama", 2, tensors, "Q8_0", split=len(tensors) // 2 + 1)
    files = {p.name: p.read_bytes() for p in parts}
    hub_server.add_repo("o/m", files)
    spec = "hf://o/m/m-00001-of-00002.gguf"
    inv = open_checkpoint(spec)
    assert list(inv.tensors) == list(tensors)
    (tmp_path / "big").mkdir()
    big = write_gguf(tmp_path / "big" / "big.gguf", "llama", 0, {"w": np.zeros((1024, 1024), np.float32)}, "F16")
    hub_server.add_repo("o/big", {"big.gguf": big[0].read_bytes()})
    shard = open_checkpoint("hf://o/big/big.gguf").shards[0]
    # the header, read ahead by at most the first chunk (64 KiB), not the 2 MiB of data
    assert sum(r.body_bytes for r in hub_server.file_requests("big.gguf")) <= shard.header_bytes + 65_536 + 24
    assert cli_here(archviz_cli, "check", config, "--checkpoint", spec).returncode == 0
    refused(cli_here(archviz_cli, "manifest", "hf://o/m", "-o", tmp_path / "x.json"), "hf://o/m/m-00001-of-00002.gguf")
    hub_server.repos["o/m"].files = _Shrinking(files)
    refused(cli_here(archviz_cli, "manifest", spec, "-o", tmp_path / "x.json"), "changed while archviz read it")


# ---------------------------------------------------------------------------------------------------------------------
# summary FILE.gguf: the model the key-values describe, built, and the file checked against it


def test_summary_of_a_gguf_alone(models, tmp_path, archviz_cli) -> None:
    import json

    config, tensors = models["mixtral"]
    cfg = json.loads(config.read_text())
    path = tmp_path / "mx.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(cfg["num_local_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    for name, a in tensors.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = cli_here(archviz_cli, "summary", path, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["config"]["model_type"] == "mixtral" and res["config"]["num_local_experts"] == 4
    total = sum(a.size for a in tensors.values())
    assert res["checkpoint"]["summary"]["model_parameters"] == total
    assert res["checkpoint"]["verdict"] == "match"
    other = tmp_path / "other.gguf"
    write_gguf(other, "no-such-arch", 1, {"w": np.zeros((4, 32), np.float32)}, "F32")
    refused(cli_here(archviz_cli, "summary", other), "no GGUF config table", "'no-such-arch'")


def test_key_values_stay_json(tmp_path, archviz_cli) -> None:
    """A NaN float and a string with terminal escapes in the key-values: the manifest is JSON archviz reads back."""
    path = tmp_path / "nan.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_float32("llama.rope.freq_base", float("nan"))
    w.add_string("general.name", "a\x1b[31mred\u202e")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert cli_here(archviz_cli, "manifest", path, "-o", tmp_path / "m.json").returncode == 0
    kv = open_checkpoint(tmp_path / "m.json").metadata["gguf"]
    assert kv["llama.rope.freq_base"] == "nan" and kv["general.name"] == "a\x1b[31mred\u202e"


#: BERT as llama.cpp's converter names it (written out here): its tensor set has no tensor for the pooler, which
#: every converter therefore leaves out.
BERT = {"embeddings.word_embeddings": "token_embd", "embeddings.position_embeddings": "position_embd",
        "embeddings.token_type_embeddings": "token_types", "embeddings.LayerNorm": "token_embd_norm"}
BERT_LAYER = {"attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
              "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
              "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm"}


def test_a_tensor_the_format_cannot_hold_is_model_only(tmp_path, archviz_cli) -> None:
    """A BERT written without its pooler (GGUF's bert tensor set has no place for it) passes, the pooler said apart
    as model-only and counted apart; the same file without layer 1 (which the set does hold) fails naming it."""
    import json

    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    hidden = 32
    model = BertModel(BertConfig(vocab_size=64, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, max_position_embeddings=32))
    model.config.save_pretrained(tmp_path)
    tensors: dict[str, np.ndarray] = {}
    for name, t in model.state_dict().items():
        module, leaf = name.rsplit(".", 1)
        if module in BERT:
            tensors[f"{BERT[module]}.{leaf}"] = t.float().numpy()
        elif module.startswith("encoder.layer."):
            _, _, i, local = module.split(".", 3)
            tensors[f"blk.{i}.{BERT_LAYER[local]}.{leaf}"] = t.float().numpy()
        else:
            assert module == "pooler.dense" or leaf == "position_ids", name  # the one the converter leaves out
    path = write_gguf(tmp_path / "bert.gguf", "bert", 2, tensors, "Q8_0")[0]
    r = cli_here(archviz_cli, "check", tmp_path / "config.json", "--checkpoint", path, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    res = json.loads(r.stdout)
    only = {e["model"] for e in res["tensors"] if e["verdict"] == "model-only"}
    assert only == {"pooler.dense.weight", "pooler.dense.bias"}
    assert res["summary"]["model_only"] == hidden * hidden + hidden
    assert res["summary"]["missing"] == 0 and res["modules"]["pooler"]["verdict"] == "model-only"
    text = cli_here(archviz_cli, "check", tmp_path / "config.json", "--checkpoint", path, "--format", "github")
    assert text.returncode == 0 and "::error" not in text.stdout
    assert "model-only" in text.stdout and "bert tensor set has no tensor" in text.stdout

    dropped = write_gguf(tmp_path / "drop" / "bert.gguf", "bert", 2,
                         {n: a for n, a in tensors.items() if not n.startswith("blk.1.")}, "Q8_0")[0] \
        if (tmp_path / "drop").mkdir() is None else None
    r = cli_here(archviz_cli, "check", tmp_path / "config.json", "--checkpoint", dropped, "--json")
    assert r.returncode == 1
    res = json.loads(r.stdout)
    missing = {e["model"] for e in res["tensors"] if e["verdict"] == "missing"}
    assert "encoder.layer.1.attention.self.query.weight" in missing
    assert not {m for m in missing if not m.startswith("encoder.layer.1.")}

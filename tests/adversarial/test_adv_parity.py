"""Parity with the safetensors library, differentially, on one corpus: every header is given to both
``safetensors.safe_open`` and archviz; what the library refuses archviz refuses (exit 2), what it accepts archviz
accepts, with the same tensors (dtype, shape, and the bytes each occupies).

The corpus: hand cases for every difference once measured (duplicate fields, lone surrogates, rank 65, nesting,
-0, NaN, ...) and hypothesis-generated headers built from valid entries and mutated at the text level.

One deliberate difference, documented in SECURITY.md: archviz refuses tensor names over
``MAX_NAME_CHARS`` characters, which the library has no limit for; the corpus stays below it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from adv_tools import LINEAR_TENSORS, cli, refused, shard_bytes, write_shard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open

from archviz.checkpoint.header import parse_shard_bytes
from archviz.checkpoint.records import DTYPE_BITS
from archviz.errors import CheckpointError

E = '{"dtype":"U8","shape":[2],"data_offsets":[0,2]}'
E2 = '{"dtype":"U8","shape":[2],"data_offsets":[2,4]}'
RANK65 = ",".join(["2"] + ["1"] * 64)
DEEP = lambda n: "[" * n + "]" * n  # noqa: E731

HAND = {
    "plain": ('{"a":%s}' % E, b"ab"),
    "dup_tensor_identical": ('{"a":%s,"a":%s}' % (E, E), b"ab"),
    "dup_tensor_last_wins": ('{"a":%s,"b":%s,"a":%s}' % (E2, E, E2), b"abcd"),
    "dup_tensor_bad_layout": ('{"a":%s,"a":%s}' % (E, E2), b"abcd"),
    "dup_field_dtype": ('{"a":{"dtype":"U8","dtype":"U8","shape":[2],"data_offsets":[0,2]}}', b"ab"),
    "dup_field_offsets": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"data_offsets":[0,2]}}', b"ab"),
    "dup_metadata": ('{"__metadata__":{},"__metadata__":{"k":"v"},"a":%s}' % E, b"ab"),
    "dup_metadata_key": ('{"__metadata__":{"k":"1","k":"2"},"a":%s}' % E, b"ab"),
    "dup_extra_field": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":1,"x":2}}', b"ab"),
    "lone_high_surrogate_name": ('{"\\ud800":%s}' % E, b"ab"),
    "lone_low_surrogate_meta": ('{"__metadata__":{"k":"\\udc00"},"a":%s}' % E, b"ab"),
    "lone_surrogate_extra": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":"\\ud800"}}', b"ab"),
    "surrogate_pair": ('{"\\ud83d\\ude00":%s}' % E, b"ab"),
    "escaped_backslash_u": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":"\\\\ud800"}}', b"ab"),
    "rank65": ('{"a":{"dtype":"U8","shape":[%s],"data_offsets":[0,2]}}' % RANK65, b"ab"),
    "rank65_empty": ('{"a":{"dtype":"U8","shape":[0,%s],"data_offsets":[0,0]}}' % RANK65, b""),
    "rank300": ('{"a":{"dtype":"U8","shape":[%s],"data_offsets":[0,2]}}' % ",".join(["2"] + ["1"] * 299), b"ab"),
    "nesting_127": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":%s}}' % DEEP(125), b"ab"),
    "nesting_128": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":%s}}' % DEEP(126), b"ab"),
    "nesting_5000": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":%s}}' % DEEP(5000), b"ab"),
    "dim_2_64_with_zero": ('{"a":{"dtype":"U8","shape":[0,%d],"data_offsets":[0,0]}}' % 2**64, b""),
    "dim_2_64_minus_1": ('{"a":{"dtype":"U8","shape":[0,%d],"data_offsets":[0,0]}}' % (2**64 - 1), b""),
    "neg_zero_dim": ('{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}', b""),
    "neg_zero_offset": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[-0,2]}}', b"ab"),
    "neg_one_extra": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":-1}}', b"ab"),
    "nan_extra": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":NaN}}', b"ab"),
    "inf_extra": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":1e400}}', b"ab"),
    "int_300_digits_extra": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":%s}}' % ("9" * 300), b"ab"),
    "int_5000_digits_extra": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":%s}}' % ("9" * 5000), b"ab"),
    "float_dim": ('{"a":{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}}', b"ab"),
    "exp_dim": ('{"a":{"dtype":"U8","shape":[2e0],"data_offsets":[0,2]}}', b"ab"),
    "meta_null": ('{"__metadata__":null,"a":%s}' % E, b"ab"),
    "meta_int": ('{"__metadata__":{"k":1},"a":%s}' % E, b"ab"),
    "meta_only": ('{"__metadata__":{"a":"b"}}', b""),
    "tensor_named_metadata": ('{"__metadata__":%s}' % E, b"ab"),
    "empty": ("{}", b""),
    "empty_text": ("", b""),
    "top_array": ("[]", b""),
    "nul_in_name": ('{"a\\u0000b":%s}' % E, b"ab"),
    "escape_in_name": ('{"a\\u001b[2Jb":%s}' % E, b"ab"),
    "raw_control_in_name": ('{"a\x01b":%s}' % E, b"ab"),
    "trailing_spaces": ('{"a":%s}      ' % E, b"ab"),
    "trailing_nul": ('{"a":%s}\x00\x00' % E, b"ab"),
    "bom": ('\ufeff{"a":%s}' % E, b"ab"),
    "formfeed": ('{\x0c"a":%s}' % E, b"ab"),
    "zero_size_at_end": ('{"z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},"b":%s}' % E, b"ab"),
    "zero_size_inside": ('{"z":{"dtype":"U8","shape":[0],"data_offsets":[1,1]},"b":%s}' % E, b"ab"),
    "two_zero_sized": ('{"y":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},'
                       '"z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":%s}' % E, b"ab"),
    "f4_odd": ('{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', b"ab"),
    "f4_even": ('{"a":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}}', b"ab"),
    "lower_dtype": ('{"a":{"dtype":"u8","shape":[2],"data_offsets":[0,2]}}', b"ab"),
    "three_offsets": ('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2,2]}}', b"ab"),
    "data_left_over": ('{"a":%s}' % E, b"abc"),
    "hole": ('{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"ab"),
}


def library(path: Path) -> tuple[bool, dict]:
    try:
        with safe_open(str(path), framework="numpy") as f:
            out = {}
            for k in f.keys():
                s = f.get_slice(k)
                out[k] = (s.get_dtype(), tuple(s.get_shape()))
            return True, out
    except Exception:  # noqa: BLE001 - the library's verdict is all that matters here
        return False, {}


_LIB_DTYPE = {"BOOL": "BOOL", "U8": "U8", "I8": "I8", "I16": "I16", "U16": "U16", "F16": "F16", "BF16": "BF16",
              "I32": "I32", "U32": "U32", "F32": "F32", "F64": "F64", "I64": "I64", "U64": "U64"}


def archviz(data: bytes) -> tuple[bool, dict]:
    n = int.from_bytes(data[:8], "little") if len(data) >= 8 else 0
    try:
        parsed = parse_shard_bytes(data[:8], data[8:8 + n], file_bytes=len(data), shard="s", where="s")
    except CheckpointError as e:
        assert e.exit_code == 2 and "\n" not in e.line()
        return False, {}
    return True, {t.name: (t.dtype, t.shape) for t in parsed.tensors.values()}


def same_verdict(tmp: Path, data: bytes) -> None:
    path = tmp / "x.safetensors"
    path.write_bytes(data)
    lib_ok, lib = library(path)
    ours_ok, ours = archviz(data)
    assert lib_ok == ours_ok, ("safetensors accepts" if lib_ok else "safetensors refuses", data[:300])
    if lib_ok:
        assert set(lib) == set(ours)
        for k, (dtype, shape) in lib.items():
            assert ours[k][1] == shape, k
            if dtype in _LIB_DTYPE:
                assert ours[k][0] == _LIB_DTYPE[dtype], k


@pytest.mark.parametrize("case", sorted(HAND))
def test_hand_corpus(tmp_path: Path, case: str) -> None:
    header, data = HAND[case]
    same_verdict(tmp_path, shard_bytes(header, data))


def test_hand_corpus_covers_both_verdicts(tmp_path: Path) -> None:
    """The corpus is not all one side: the library accepts some and refuses others (so the test can fail)."""
    verdicts = set()
    for header, data in HAND.values():
        p = tmp_path / "x.safetensors"
        p.write_bytes(shard_bytes(header, data))
        verdicts.add(library(p)[0])
    assert verdicts == {True, False}


# ---- generated corpus --------------------------------------------------------------------------------------------

DTYPES = sorted(DTYPE_BITS)
_names = st.text(st.characters(codec="utf-8", exclude_characters='"\\'), min_size=1, max_size=12)


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(1, 4))
    names = draw(st.lists(_names, min_size=n, max_size=n, unique=True))
    entries = []
    pos = 0
    for name in names:
        dtype = draw(st.sampled_from(["U8", "F32", "BF16", "F4", "I64", "BOOL"]))
        shape = draw(st.lists(st.integers(0, 4), max_size=draw(st.sampled_from([3, 3, 70]))))
        numel = 1
        for d in shape:
            numel *= d
        size = (numel * DTYPE_BITS[dtype] + 7) // 8
        entries.append([name, dtype, shape, pos, pos + size])
        pos += size
    # structural mutations of one entry, each a case the library decides
    kind = draw(st.sampled_from(["none", "none", "offset", "dim", "dtype", "swap", "extra", "dupfield", "negzero",
                                 "bigdim", "surrogate", "nan", "deep", "meta", "dupname", "zero"]))
    i = draw(st.integers(0, n - 1))
    e = entries[i]
    extra = ""
    if kind == "offset":
        e[4] += draw(st.sampled_from([-1, 1]))
    elif kind == "dim" and e[2]:
        e[2][0] += 1
    elif kind == "dtype":
        e[1] = draw(st.sampled_from(DTYPES + ["u8", "F8", "Q4", ""]))
    elif kind == "swap" and n > 1:
        j = (i + 1) % n
        entries[i][3:], entries[j][3:] = entries[j][3:], entries[i][3:]
    elif kind == "extra":
        extra = ',"x":' + draw(st.sampled_from(['1', '"s"', '[1,{"y":null}]', '-1', '1.5', 'true', '9' * 400]))
    elif kind == "dupfield":
        field = draw(st.sampled_from(["dtype", "shape", "data_offsets", "other"]))
        extra = f',"{field}":' + json.dumps({"dtype": e[1], "shape": e[2], "data_offsets": e[3:], "other": 0}[field])
    elif kind == "bigdim":
        e[2] = [0, draw(st.sampled_from([2**63, 2**64 - 1, 2**64, 2**70]))]
        e[4] = e[3]
    elif kind == "deep":
        extra = ',"x":' + DEEP(draw(st.sampled_from([100, 125, 126, 127, 400])))
    elif kind == "zero":
        e[2] = [0]
        e[4] = e[3]
    data_len = max([0] + [x[4] for x in entries])
    if kind == "offset" and draw(st.booleans()):
        data_len += 1
    parts = []
    for k, (name, dtype, shape, b, end) in enumerate(entries):
        fields = f'"dtype":{json.dumps(dtype)},"shape":{json.dumps(shape)},"data_offsets":[{b},{end}]'
        if k == i and kind == "negzero":
            fields = fields.replace('"data_offsets":[0,', '"data_offsets":[-0,') if b == 0 else fields
        if k == i:
            fields += extra
            if kind == "nan":
                fields += ',"x":' + draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]))
        key = json.dumps(name, ensure_ascii=draw(st.booleans()))
        if k == i and kind == "surrogate":
            key = '"' + draw(st.sampled_from(["\\ud800", "\\udfff", "\\ud83d\\ude00", "x\\udc00y"])) + '"'
        parts.append(f"{key}:{{{fields}}}")
    if kind == "dupname":
        parts.append(parts[i])
    body = ",".join(parts)
    if kind == "meta":
        meta = draw(st.sampled_from(['{}', 'null', '{"k":"v"}', '{"k":1}', '[]', '{"k":"v","k":"w"}']))
        body = f'"__metadata__":{meta},' + body
    sep = draw(st.sampled_from(["", " ", "\n"]))
    return shard_bytes("{" + sep + body + sep + "}", b"\0" * data_len)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=headers())
def test_generated_corpus(tmp_path: Path, data: bytes) -> None:
    same_verdict(tmp_path, data)


# ---- shards that leave their folder ------------------------------------------------------------------------------


def _index(folder: Path, weight_map: dict[str, str]) -> Path:
    p = folder / "model.safetensors.index.json"
    p.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return p


def test_shard_symlink_leaving_the_folder_is_refused_like_dotdot(tmp_path: Path) -> None:
    outside = write_shard(tmp_path / "outside.safetensors", LINEAR_TENSORS)
    ck = tmp_path / "ck"
    ck.mkdir()
    index = _index(ck, dict.fromkeys(LINEAR_TENSORS, "model.safetensors"))
    (ck / "model.safetensors").symlink_to(outside)
    refused(cli("manifest", ck, "-o", tmp_path / "m.json"), "model.safetensors", "outside the checkpoint's folder")
    # the same through the index, and through a loose-shard folder
    refused(cli("manifest", index, "-o", tmp_path / "m.json"), "outside the checkpoint's folder")
    os.unlink(index)
    refused(cli("manifest", ck, "-o", tmp_path / "m.json"), "outside the checkpoint's folder")
    # ../ in the index: refused the same way (what the symlink did by other means)
    _index(ck, dict.fromkeys(LINEAR_TENSORS, "../outside.safetensors"))
    refused(cli("manifest", ck, "-o", tmp_path / "m.json"), "points outside the index's folder")
    assert not (tmp_path / "m.json").exists()


def test_symlinked_subfolder_leaving_the_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_shard(elsewhere / "model.safetensors", LINEAR_TENSORS)
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "sub").symlink_to(elsewhere)
    _index(ck, dict.fromkeys(LINEAR_TENSORS, "sub/model.safetensors"))
    refused(cli("manifest", ck, "-o", tmp_path / "m.json"), "outside the checkpoint's folder")


def test_symlinks_inside_the_folder_and_the_hf_cache_layout_are_followed(tmp_path: Path) -> None:
    """A symlink within the folder is fine; so is the Hugging Face cache's snapshots/<rev> -> ../../blobs/<hash>."""
    ck = tmp_path / "ck"
    ck.mkdir()
    write_shard(ck / "real.safetensors", LINEAR_TENSORS)
    _index(ck, dict.fromkeys(LINEAR_TENSORS, "model.safetensors"))
    (ck / "model.safetensors").symlink_to("real.safetensors")
    r = cli("manifest", ck / "model.safetensors.index.json", "-o", tmp_path / "a.json", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensors"] == 2
    repo = tmp_path / "models--org--lin"
    snap = repo / "snapshots" / ("a" * 40)
    blobs = repo / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir()
    write_shard(blobs / ("b" * 64), LINEAR_TENSORS)
    (snap / "model.safetensors").symlink_to(Path("..") / ".." / "blobs" / ("b" * 64))
    r = cli("manifest", snap, "-o", tmp_path / "b.json", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensors"] == 2

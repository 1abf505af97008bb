"""Property-based fuzzing of every checkpoint-side parser — shard header, index, both manifest formats (plain and
gzip'd), rules file, config: whatever the bytes, the only failure is the parser's one-line error (exit 2), never
another exception (the CLI's exit 3), and every accepted inventory holds only names a UTF-8 file can hold."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from adv_tools import shard_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archviz.checkpoint import open_checkpoint
from archviz.checkpoint.rules import RulesError, load_rules
from archviz.errors import ArchvizError, CheckpointError, SourceError
from archviz.sources import read_json_config

# JSON values with the hostile atoms mixed in: huge ints, lone surrogates, control characters, deep lists.
_atoms = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=6), st.sampled_from(
    ["\ud800", "\udfff", "\x1b[2J", "__metadata__", "U8", "F32", "s.safetensors", 10**50]), st.none(), st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(_atoms, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                      st.dictionaries(st.sampled_from(
                                                          ["dtype", "shape", "data_offsets", "shard", "name",
                                                           "file_bytes", "header_bytes", "tensors", "shards",
                                                           "weight_map", "format", "metadata", "\ud800"]), kids,
                                                          max_size=5)), max_leaves=25)
_docs = st.one_of(
    _values,
    st.fixed_dictionaries({"format": st.just("archviz-manifest/1"), "shards": _values, "tensors": _values}),
    st.fixed_dictionaries({"shards": st.just([{"name": "s", "file_bytes": 12, "header_bytes": 10}]),
                           "tensors": st.dictionaries(st.text(max_size=4), _values, max_size=3)}),
    st.fixed_dictionaries({"metadata": _values, "weight_map": st.dictionaries(st.text(max_size=4), _values,
                                                                              max_size=3)}),
)


def _text(doc: object, deep: int, junk: bytes) -> bytes:
    text = json.dumps(doc, ensure_ascii=True)
    if deep:
        text = text.replace("[", "[" * deep, 1).replace("]", "]" * deep, 1) if "[" in text else text
    return text.encode("ascii") + junk


_SETTINGS = settings(max_examples=250, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_junk = st.sampled_from([b"", b"", b" ", b"\x00", b"}", b"\xff", b"NaN"])


def _opened(path: Path) -> None:
    try:
        inv = open_checkpoint(path)
    except CheckpointError as e:
        assert e.exit_code == 2 and "\n" not in e.line()
        return
    for name in inv.tensors:
        name.encode("utf-8")  # no lone surrogate got in


@_SETTINGS
@given(doc=_docs, deep=st.sampled_from([0, 0, 130, 3000]), junk=_junk, gz=st.booleans())
def test_manifests_and_indexes(tmp_path: Path, doc: object, deep: int, junk: bytes, gz: bool) -> None:
    (tmp_path / "s.safetensors").write_bytes(shard_bytes('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}',
                                                         b"ab"))
    raw = _text(doc, deep, junk)
    for name in ("m.json", "model.safetensors.index.json"):
        p = tmp_path / (name + (".gz" if gz and name == "m.json" else ""))
        p.write_bytes(gzip.compress(raw) if p.suffix == ".gz" else raw)
        _opened(p)


@_SETTINGS
@given(doc=_values, deep=st.sampled_from([0, 130]), junk=_junk, prefix_delta=st.sampled_from([0, 0, -1, 1, 2**40]))
def test_shard_headers(tmp_path: Path, doc: object, deep: int, junk: bytes, prefix_delta: int) -> None:
    raw = _text(doc, deep, junk)
    p = tmp_path / "x.safetensors"
    p.write_bytes(max(0, len(raw) + prefix_delta).to_bytes(8, "little") + raw + b"\0" * 8)
    _opened(p)


@_SETTINGS
@given(doc=_values, deep=st.sampled_from([0, 130, 3000]), junk=_junk)
def test_rules_and_configs(tmp_path: Path, doc: object, deep: int, junk: bytes) -> None:
    raw = _text(doc, deep, junk)
    rules = tmp_path / "rules.json"
    rules.write_bytes(raw)
    try:
        load_rules(str(rules))
    except RulesError as e:
        assert e.exit_code == 2 and "\n" not in e.line()
    except ArchvizError as e:  # pragma: no cover - a rules fault must be a RulesError
        raise AssertionError(f"not a RulesError: {e!r}") from e
    cfg = tmp_path / "config.json"
    cfg.write_bytes(raw)
    try:
        read_json_config(str(cfg))
    except SourceError as e:
        assert e.exit_code == 2 and "\n" not in e.line()

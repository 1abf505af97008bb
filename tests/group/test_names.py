"""Grouping: virtual nodes from a names file's `[groups]` table ("Grouped output" over `wo_a`, `wo_b`).

Expected breadcrumbs, multiplicities and counts are written by hand from the configs (`dim × o_groups·o_lora_rank`
and so on) or from the flat records' own per-module totals, never from the grouping output itself."""

from __future__ import annotations

import re

import io
import json
import math

import pytest
from rich.console import Console

import archviz
from helpers import TESTS, hand_record
from archviz.group import group, load_names
from archviz.records import ModelRecord, dumps, loads

ROOT = TESTS
DSV41 = ROOT / "fixtures" / "dsv41like"
NAMES_FILE = ROOT / "fixtures" / "names" / "deepseek-v4.1-flash.toml"
# The V4.1-like fixture pinned to the seed's shape: a KV-source layer every 6 layers, the 5 after it reuse its cache.
SEED_SHAPE = {"n_layers": 12, "n_mtp_layers": 1, "compress_ratios": [2] * 12 + [0], "kv_source_layers": [0, 6],
              "index_source_layers": [0, 6], "engram_layer_ids": [], "n_hash_layers": 0}
_CONTAINERS = ("ModuleList", "Sequential", "ModuleDict")


@pytest.fixture(autouse=True)
def _no_names_env(monkeypatch):
    monkeypatch.delenv("ARCHVIZ_NAMES", raising=False)


def G(record: ModelRecord) -> dict:
    return record.extra("grouping")


def by_id(record: ModelRecord) -> dict[str, dict]:
    return {n["id"]: n for n in G(record)["nodes"]}


def node_of(record: ModelRecord, path: str) -> dict:
    return by_id(record)[G(record)["by_path"][path]["node"]]


def parent_of(record: ModelRecord, node: dict) -> dict:
    return by_id(record)[node["parent"]]


def factors(node_or_entry: dict) -> list[tuple[int, str]]:
    return [(f["factor"], f["name"]) for f in node_or_entry["multiplicity"]]


def titles(record: ModelRecord, node: dict) -> list[str]:
    ids = by_id(record)
    return [ids[c]["title"] for c in node["children"]]


def check_all(record: ModelRecord, names: dict | None = None) -> None:
    """Every parameter is accounted for exactly once, virtual nodes (repeating groups and gatherings) included."""
    g = G(record)
    json.dumps(g)
    nodes = g["nodes"]
    ids = {n["id"]: n for n in nodes}
    index = record.index()
    root = nodes[0]
    assert root["parent"] is None and root["representative"] == "" and root["total"] == record.summary.parameters
    pre_order = []
    stack = [root["id"]]
    while stack:
        nid = stack.pop()
        pre_order.append(nid)
        stack.extend(reversed(ids[nid]["children"]))
    assert pre_order == [n["id"] for n in nodes]  # a tree, listed in pre-order
    pointed = {e["node"] for e in g["by_path"].values()}
    for n in nodes:
        prod = math.prod(f["factor"] for f in n["multiplicity"])
        assert all(f["factor"] > 1 for f in n["multiplicity"]), n["title"]
        assert n["total"] == n["per_instance"] * prod, n["title"]
        kids = [ids[c] for c in n["children"]]
        assert sum(k["total"] for k in kids) + n["own_total"] == n["total"], n["title"]
        for k in kids:
            assert k["parent"] == n["id"]
            assert k["multiplicity"][:len(n["multiplicity"])] == n["multiplicity"]
            assert k["breadcrumb"] == n["breadcrumb"] + [k["title"]]
        if n.get("segment") == "gather":
            parent = ids[n["parent"]]
            assert n["virtual"] is True and n["class_name"] == "" and n["own_total"] == 0 and n["count"] == 1
            assert n["multiplicity"] == parent["multiplicity"] and n["representative"] == parent["representative"]
            assert parent.get("segment") != "group" and n["id"] not in pointed
            rep = parent["representative"]
            members = [f"{rep}.{x}" if rep else x for x in n["items"]]
            assert n["period"] == len(n["items"]) == len(kids) >= 1
            assert n["per_instance"] == sum(index[p].totals.parameters for p in members), n["title"]
            assert n["scale_elements_total"] == prod * sum(index[p].totals.scale_elements for p in members)
            assert n["paths"] == [f"{p}.{x}" if p else x for x in n["items"] for p in parent["paths"]]
            for x, k in zip(n["items"], kids):  # the children are the members, in the order given
                lp = [f"{p}.{x}" if p else x for p in parent["paths"]]
                assert k["paths"] == lp or g["by_path"][lp[0]]["node"] == k["id"], (n["title"], x)
                for p in lp:
                    assert n["title"] in g["by_path"][p]["group"].split(" › ")
        if n.get("virtual"):
            assert len(n["paths"]) == prod * n["period"], n["title"]
            assert sum(index[p].totals.parameters for p in n["paths"]) == n["total"], n["title"]
        else:
            assert len(n["paths"]) == prod, n["title"]
            assert {index[p].totals.parameters for p in n["paths"]} == {n["per_instance"]}, n["title"]
            assert {index[p].own.parameters * prod for p in n["paths"]} == {n["own_total"]}
    assert sum(ids[c]["total"] for c in root["children"]) + index[""].own.parameters == record.summary.parameters
    assert sum(n["own_total"] for n in nodes) == record.summary.parameters
    seen: dict[str, str] = {}
    for n in nodes:
        if not n.get("virtual"):
            for p in n["paths"]:
                assert p not in seen, p
                seen[p] = n["id"]
    assert set(g["by_path"]) == set(index)
    for path, e in g["by_path"].items():
        node = ids[e["node"]]
        # the breadcrumb holds every gathering above the node; the group line names the folds and gatherings
        chain = []
        a = node
        while a["parent"] is not None:
            if a.get("segment") in ("run", "group", "gather"):
                chain.append(a["title"])
            a = ids[a["parent"]]
        assert e["group"] == (" › ".join(reversed(chain)) or None), path
        if path in seen:
            assert e["node"] == seen[path] and e["total"] == node["total"]
        else:  # a list folded into its items' node: its own total
            m = index[path]
            assert m.class_name in _CONTAINERS
            assert e["total"] == m.totals.parameters * math.prod(f["factor"] for f in e["multiplicity"])
    again = group(loads(dumps(record.with_extra("grouping", None))), names)
    assert json.dumps(G(again), sort_keys=True) == json.dumps(g, sort_keys=True)


# ---------------------------------------------------------------------------------------------------------------------
# The names file


def test_load_names_reads_groups(tmp_path):
    names = load_names(str(NAMES_FILE))
    assert names["groups"] == {"Attention": {"Grouped output": ["wo_a", "wo_b"]}}
    assert names["layers.*.attn.wo_a"] == "Grouped low-rank projection"
    assert names["layers.*.attn.wo_b"] == "Output projection"
    assert "Grouped output" not in {v for v in names.values() if isinstance(v, str)}

    # JSON, with a [names] table beside [groups]
    j = tmp_path / "n.json"
    spec = {"Block": {"Mixing": ["attn", "ffn"], "Norms": ["n1", "n2"]}}
    j.write_text(json.dumps({"names": {"path:groups": "Head groups", "Block": "Layer"}, "groups": spec}))
    assert load_names(str(j)) == {"path:groups": "Head groups", "Block": "Layer", "groups": spec}
    # without a [groups] table, "groups" = "Title" titles a module named so, as before
    t = tmp_path / "n.toml"
    t.write_text('"groups" = "Head groups"\n')
    assert load_names(str(t)) == {"groups": "Head groups"}
    t.write_text('[names]\n"groups" = "Head groups"\n\n[groups]\n"Block" = { "Mixing" = ["attn", "ffn"] }\n')
    with pytest.raises(archviz.ArchvizError, match="both a title key and the"):
        load_names(str(t))
    t.write_text('"Block" = "Layer"\n\n[groups]\n"layers.*" = { "Mixing" = ["attn", "ffn"] }\n')
    assert load_names(str(t)) == {"Block": "Layer", "groups": {"layers.*": {"Mixing": ["attn", "ffn"]}}}


@pytest.mark.parametrize("body, match", [
    ('[groups]\n"Attention" = ["wo_a", "wo_b"]\n', r"groups\.Attention: a table of .*, not \['wo_a', 'wo_b'\]$"),
    ('[groups]\n"Attention" = { "Grouped output" = "wo_a" }\n',
     r"groups\.Attention\.Grouped output: a non-empty list of non-empty strings, not 'wo_a'$"),
    ('[groups]\n"Attention" = { "Grouped output" = [] }\n', r"groups\.Attention\.Grouped output: .*, not \[\]$"),
    ('[groups]\n"Attention" = { "Grouped output" = ["wo_a", 3] }\n',
     r"groups\.Attention\.Grouped output: .*, not \['wo_a', 3\]$"),
    ('[groups]\n"Attention" = { "A" = ["wo_a", "wo_b"], "B" = ["wo_b"] }\n', "listed twice"),
    ('[groups]\n"Attention" = { "A" = ["wo_a", "wo_a"] }\n', "listed twice"),
])
def test_bad_groups_tables(tmp_path, body, match):
    f = tmp_path / "names.toml"
    f.write_text(body)
    with pytest.raises(archviz.ArchvizError, match=match):
        load_names(str(f))


# ---------------------------------------------------------------------------------------------------------------------
# The V4.1-like fixture: the seed page's breadcrumb


@pytest.fixture(scope="module")
def names() -> dict:
    return load_names(str(NAMES_FILE))


@pytest.fixture(scope="module")
def seed_raw() -> ModelRecord:
    return archviz.load(str(DSV41 / "model.py"), config=str(DSV41 / "config.json"), overrides=SEED_SHAPE)


@pytest.fixture(scope="module")
def seed(seed_raw, names) -> ModelRecord:
    return group(seed_raw, names)


def test_seed_shape_grouped_output(seed, names):
    cfg = json.loads((DSV41 / "config.json").read_text())
    # by hand from the config: wo_b maps o_groups·o_lora_rank = 2·16 = 32 group features to dim 64; wo_a maps each
    # group's n_heads·head_dim/o_groups = 4·32/2 = 64 head features to o_groups·o_lora_rank = 32, no biases.
    wo_b_per = cfg["dim"] * cfg["o_groups"] * cfg["o_lora_rank"]
    wo_a_per = cfg["n_heads"] * cfg["head_dim"] // cfg["o_groups"] * cfg["o_groups"] * cfg["o_lora_rank"]
    assert (wo_b_per, wo_a_per) == (2048, 2048)

    wo_b = node_of(seed, "layers.3.attn.wo_b")
    assert wo_b["breadcrumb"] == ["12 layers", "2 groups of 6 layers", "5 reusing layers",
                                  "Compressed sparse attention", "Grouped output", "Output projection"]
    assert factors(wo_b) == [(2, "groups"), (5, "layers")]
    assert wo_b["per_instance"] == wo_b_per and wo_b["total"] == wo_b_per * 10
    reusing = [1, 2, 3, 4, 5, 7, 8, 9, 10, 11]
    assert sorted(wo_b["paths"]) == sorted(f"layers.{i}.attn.wo_b" for i in reusing)

    out = parent_of(seed, wo_b)
    assert out["title"] == "Grouped output" and out["virtual"] is True and out["segment"] == "gather"
    assert out["items"] == ["wo_a", "wo_b"] and out["class_name"] == ""
    assert out["per_instance"] == wo_a_per + wo_b_per and out["total"] == (wo_a_per + wo_b_per) * 10
    assert factors(out) == [(2, "groups"), (5, "layers")]
    assert out["representative"] == "layers.1.attn"  # the attention's path: no call site of its own
    assert out["paths"] == [f"layers.{i}.attn.wo_a" for i in reusing] + [f"layers.{i}.attn.wo_b" for i in reusing]
    assert titles(seed, out) == ["Grouped low-rank projection", "Output projection"]
    wo_a = node_of(seed, "layers.8.attn.wo_a")
    assert wo_a["parent"] == out["id"] and wo_a["per_instance"] == wo_a_per and wo_a["total"] == wo_a_per * 10
    # the gathering stands where wo_a stood among the attention's parts; everything else keeps its place
    attn = parent_of(seed, out)
    assert attn["title"] == "Compressed sparse attention" and attn["representative"] == "layers.1.attn"
    assert titles(seed, attn) == ["Query down-projection", "q_norm (RMSNorm)", "Query up-projection",
                                  "wkv (Linear)", "kv_norm (RMSNorm)", "Grouped output"]
    assert attn["total"] == 10 * seed.module("layers.3.attn").totals.parameters
    # the members' by_path entries: their own nodes, the gathering in their group line
    e = G(seed)["by_path"]["layers.3.attn.wo_b"]
    assert e["node"] == wo_b["id"] and e["total"] == wo_b_per * 10
    assert e["group"] == "2 groups of 6 layers › 5 reusing layers › Grouped output"
    assert G(seed)["by_path"]["layers.3.attn"]["group"] == "2 groups of 6 layers › 5 reusing layers"
    # the KV-source layers and the MTP block's attention are gathered too
    kv = node_of(seed, "layers.6.attn.wo_b")
    assert kv["breadcrumb"] == ["12 layers", "2 groups of 6 layers", "KV-source layer", "Compressed sparse attention",
                                "Grouped output", "Output projection"]
    assert factors(kv) == [(2, "groups")] and kv["total"] == 2 * wo_b_per
    mtp = node_of(seed, "mtp.0.attn.wo_b")
    assert mtp["breadcrumb"][-3:] == ["Sliding-window attention", "Grouped output", "wo_b (RowParallelLinear)"]
    assert parent_of(seed, mtp)["total"] == wo_a_per + wo_b_per
    check_all(seed, names)


def test_without_groups_nothing_is_gathered(seed_raw, names):
    plain = {k: v for k, v in names.items() if k != "groups"}
    rec = group(seed_raw, plain)
    wo_b = node_of(rec, "layers.3.attn.wo_b")
    assert wo_b["breadcrumb"][-2:] == ["Compressed sparse attention", "Output projection"]
    assert not any(n.get("segment") == "gather" for n in G(rec)["nodes"])
    assert G(rec)["by_path"]["layers.3.attn.wo_b"]["group"] == "2 groups of 6 layers › 5 reusing layers"
    check_all(rec, plain)


def test_names_from_environment_gather(monkeypatch, seed_raw):
    monkeypatch.setenv("ARCHVIZ_NAMES", str(NAMES_FILE))
    rec = group(seed_raw)
    assert node_of(rec, "layers.3.attn.wo_b")["breadcrumb"][-3:] == ["Compressed sparse attention",
                                                                     "Grouped output", "Output projection"]


def test_v41_flash_seed_page_breadcrumb(names):
    """The seed page: `40 layers › 2 groups of 6 layers › 5 reusing layers › Compressed sparse attention › Grouped
    output › Output projection`, `41,943,040 × 2 groups × 5 layers = 419,430,400`."""
    cfg = json.loads((DSV41 / "config_flash.json").read_text())
    rec = group(archviz.load(str(DSV41 / "model.py"), config=str(DSV41 / "config_flash.json"),
                             overrides={"n_routed_experts": 8, "vocab_size": 1024, "max_seq_len": 256}), names)
    wo_b_per = cfg["dim"] * cfg["o_groups"] * cfg["o_lora_rank"]
    wo_a_per = cfg["n_heads"] * cfg["head_dim"] // cfg["o_groups"] * cfg["o_groups"] * cfg["o_lora_rank"]
    assert wo_b_per == 5120 * 8 * 1024 == 41_943_040 and wo_a_per == 64 * 512 // 8 * 8 * 1024 == 33_554_432
    wo_b = node_of(rec, "layers.9.attn.wo_b")
    assert wo_b["breadcrumb"] == ["40 layers", "2 groups of 6 layers", "5 reusing layers",
                                  "Compressed sparse attention", "Grouped output", "Output projection"]
    assert " › ".join(wo_b["breadcrumb"]) == ("40 layers › 2 groups of 6 layers › 5 reusing layers › Compressed "
                                              "sparse attention › Grouped output › Output projection")
    assert factors(wo_b) == [(2, "groups"), (5, "layers")]
    assert wo_b["per_instance"] == 41_943_040 and wo_b["total"] == 419_430_400
    out = parent_of(rec, wo_b)
    assert out["title"] == "Grouped output" and out["per_instance"] == wo_a_per + wo_b_per
    assert out["total"] == 10 * (wo_a_per + wo_b_per) and factors(out) == [(2, "groups"), (5, "layers")]
    assert out["per_instance"] == sum(rec.module(f"layers.9.attn.{x}").totals.parameters for x in ("wo_a", "wo_b"))
    # layers 15–19 reuse too, outside the groups: one gathering there, × 5 layers
    late = node_of(rec, "layers.17.attn.wo_a")
    assert late["breadcrumb"][-3:] == ["Compressed sparse attention", "Grouped output", "Grouped low-rank projection"]
    assert factors(late) == [(5, "layers")] and late["total"] == 5 * wo_a_per
    check_all(rec, names)


# ---------------------------------------------------------------------------------------------------------------------
# Hand-made records: keys, order, precedence


_rec = hand_record


def _blocks(n: int = 4, modes=None) -> ModelRecord:
    """embed 10×4; n blocks of: n1 (4), attn (q 4×4, k 4×4, o 4×4 + sink 4), n2 (4), ffn (up 8×4, down 4×8),
    experts (3 × 2×2); head 10×4."""
    specs = [("", "M", {}, []), ("embed", "Emb", {}, [("weight", (10, 4))]), ("blocks", "ModuleList", {}, [])]
    for i in range(n):
        b = f"blocks.{i}"
        specs += [(b, "Block", {"layer_id": i, "mode": (modes or ["local"] * n)[i]}, []),
                  (f"{b}.n1", "Norm", {}, [("weight", (4,))]),
                  (f"{b}.attn", "Attn", {}, [("sink", (4,))]),
                  (f"{b}.attn.q", "Linear", {}, [("weight", (4, 4))]),
                  (f"{b}.attn.k", "Linear", {}, [("weight", (4, 4))]),
                  (f"{b}.attn.o", "Linear", {}, [("weight", (4, 4))]),
                  (f"{b}.n2", "Norm", {}, [("weight", (4,))]),
                  (f"{b}.ffn", "FFN", {}, []),
                  (f"{b}.ffn.up", "Linear", {}, [("weight", (8, 4))]),
                  (f"{b}.ffn.down", "Linear", {}, [("weight", (4, 8))]),
                  (f"{b}.experts", "ModuleList", {}, [])]
        specs += [(f"{b}.experts.{e}", "Expert", {}, [("w", (2, 2))]) for e in range(3)]
    specs.append(("head", "Linear", {}, [("weight", (10, 4))]))
    return _rec(specs)


def test_several_gatherings_order_and_missing_members():
    rec = _blocks()
    names = {"groups": {"Block": {"Mixing": ["ffn", "attn", "absent"], "Norms": ["n2", "n1"],
                                  "Nothing here": ["missing"]}}}
    g = group(rec, names)
    layer = node_of(g, "blocks.2")
    assert layer["title"] == "4 blocks" and factors(layer) == [(4, "blocks")]
    # each gathering stands where its first present member stood in the module's own child order (n1, attn, ...);
    # members in the order given; absent members skipped; a gathering with none present is not made
    assert titles(g, layer) == ["Norms", "Mixing", "3 experts"]
    norms, mixing = (by_id(g)[c] for c in layer["children"][:2])
    assert titles(g, norms) == ["n2 (Norm)", "n1 (Norm)"] and norms["items"] == ["n2", "n1"]
    assert titles(g, mixing) == ["ffn (FFN)", "attn (Attn)"] and mixing["items"] == ["ffn", "attn"]
    # by hand: ffn 8·4 + 4·8 = 64, attn 3·16 + 4 = 52; × 4 blocks
    assert mixing["per_instance"] == 64 + 52 and mixing["total"] == 4 * 116 and factors(mixing) == [(4, "blocks")]
    assert norms["per_instance"] == 8 and norms["total"] == 32
    assert node_of(g, "blocks.1.attn.o")["breadcrumb"] == ["4 blocks", "Mixing", "attn (Attn)", "o (Linear)"]
    assert G(g)["by_path"]["blocks.1.attn.o"]["group"] == "4 blocks › Mixing"
    assert G(g)["by_path"]["blocks.1.experts.0"]["group"] == "4 blocks › 3 experts"
    check_all(g, names)


def test_gathering_a_list_and_at_the_root():
    rec = _blocks()
    names = {"groups": {"M": {"The ends": ["embed", "head"]}, "Block": {"Feed-forward": ["ffn", "experts"]}},
             "The ends": "Embedding and head"}
    g = group(rec, names)
    root = G(g)["nodes"][0]
    assert titles(g, root) == ["Embedding and head", "4 blocks"]  # a title key renames a gathering
    ends = by_id(g)[root["children"][0]]
    assert ends["per_instance"] == ends["total"] == 80 and ends["representative"] == "" and ends["multiplicity"] == []
    assert ends["paths"] == ["embed", "head"]
    ff = parent_of(g, node_of(g, "blocks.3.experts.1"))
    assert ff["title"] == "Feed-forward" and titles(g, ff) == ["ffn (FFN)", "3 experts"]
    assert ff["per_instance"] == 64 + 12 and ff["total"] == 4 * 76
    e = G(g)["by_path"]["blocks.3.experts"]  # the experts list folds into its items' node, inside the gathering
    assert e["node"] == node_of(g, "blocks.3.experts.1")["id"]
    assert e["group"] == "4 blocks › Feed-forward › 3 experts"
    assert node_of(g, "blocks.0.experts.2")["breadcrumb"] == ["4 blocks", "Feed-forward", "3 experts"]
    check_all(g, names)


def test_most_specific_key_wins():
    rec = _blocks(4, ["local", "global", "local", "global"])
    names = {"groups": {"Attn": {"By class": ["q", "k"]},
                        "Block[mode=global]": {"Global norms": ["n1", "n2"]},
                        "blocks.*.attn": {"By glob": ["k", "o"]},
                        "blocks.1.attn": {"By path": ["q"]},
                        "Norm": {"Never": ["weight"]}}}
    g = group(rec, names)
    assert G(g)["layers"]["pattern"] == "2 × (local block, global block)"
    # an exact path beats a glob, a glob beats a class; the exact path names one instance of a folded node, so the
    # node it belongs to (blocks 1 and 3) takes it, as titles do
    assert parent_of(g, node_of(g, "blocks.3.attn.q"))["title"] == "By path"
    assert parent_of(g, node_of(g, "blocks.3.attn.k"))["title"] == "attn (Attn)"
    assert titles(g, node_of(g, "blocks.3.attn")) == ["By path", "k (Linear)", "o (Linear)"]
    assert titles(g, node_of(g, "blocks.0.attn")) == ["q (Linear)", "By glob"]
    assert parent_of(g, node_of(g, "blocks.2.attn.o"))["title"] == "By glob"
    # a class with attribute values: only the global blocks
    assert parent_of(g, node_of(g, "blocks.1.n2"))["title"] == "Global norms"
    assert parent_of(g, node_of(g, "blocks.0.n2"))["title"] == "local block"
    # names that are not children (a tensor, say) gather nothing
    assert not any(n["title"] == "Never" for n in G(g)["nodes"])
    check_all(g, names)


def test_gather_title_key_and_breadcrumb_of_default_titles():
    rec = _blocks()
    names = {"groups": {"attn (Attn)": {"Projections": ["q", "k", "o"]}}}
    g = group(rec, names)
    q = node_of(g, "blocks.0.attn.q")
    assert q["breadcrumb"] == ["4 blocks", "attn (Attn)", "Projections", "q (Linear)"]
    assert parent_of(g, q)["per_instance"] == 48 and parent_of(g, parent_of(g, q))["own_total"] == 4 * 4
    check_all(g, names)


# ---------------------------------------------------------------------------------------------------------------------
# Rendering: the terminal tree, the site page, the CLI


def render(renderable) -> str:
    console = Console(file=io.StringIO(), width=240, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def test_grouped_tree_shows_the_gathering(seed):
    from archviz.render.grouped import grouped_tree

    text = render(grouped_tree(seed, "layers.3.attn", 2))
    assert re.search(r"│ +Grouped output +│ wo_a \+ wo_b +│.*│ +4,096 │ 2 groups × 5 layers +│ +40,960 │", text)
    assert re.search(r"│ +Output projection +│ RowParallelLinear +│.*│ +2,048 │ 2 groups × 5 layers +│ +20,480 │", text)
    first = render(grouped_tree(seed, "layers.3.attn.wo_b", 1)).splitlines()
    assert any("5 reusing layers › Compressed sparse attention › Grouped output › Output projection" in ln
               for ln in first)


def test_site_page_of_a_gathering(seed):
    from archviz.render.site import CodeBank, ModelSite

    ms = ModelSite(seed, "m", CodeBank(), None, None)
    out = next(nid for nid, n in ms.nodes.items() if n.title == "Grouped output" and len(n.multiplicity) == 2)
    n = ms.nodes[out]
    assert n.virtual and n.file.startswith("n/") and n.file.endswith("_group.html")
    ctx = ms.node_context(out)
    assert ctx["call_sites"] == [] and ctx["shapes"] is None
    assert ctx["description"] == "2 parts of Attention gathered under one title."
    assert [c["title"] for c in ctx["children"]] == ["Grouped low-rank projection", "Output projection"]
    assert [r["params"] for r in ctx["rows"]] == ["2,048", "2,048", "4,096"]
    assert ctx["total"] == "40,960" and ctx["mult"] == "× 2 groups × 5 layers"
    wo_b = ms.node_of["layers.3.attn.wo_b"]
    crumbs = [c["title"] for c in ms.node_context(ms.nodes[wo_b].children[0] if ms.nodes[wo_b].children
                                                  else next(c for c in ms.nodes[out].children))["crumbs"]]
    assert crumbs[-2:] == ["Compressed sparse attention", "Grouped output"]
    # every page's calculation adds up, the gatherings' and their parents' included
    for node in ms.nodes.values():
        rows, _ = ms.calculation(node, ms.index.get(node.representative) or seed.modules[0])
        parts = sum(int(r["params"].replace(",", "")) for r in rows[:-1] if r["params"] not in ("—", ""))
        assert parts == int(rows[-1]["params"].replace(",", "")) == node.per_instance, node.title


def test_cli_inspect_with_names_env(monkeypatch):
    from typer.testing import CliRunner

    from archviz.cli import app

    monkeypatch.setenv("ARCHVIZ_NAMES", str(NAMES_FILE))
    args = ["inspect", str(DSV41 / "model.py"), "--config", str(DSV41 / "config.json"), "--no-shapes"]
    for k, v in SEED_SHAPE.items():
        args += ["--set", f"{k}={json.dumps(v)}"]
    j = CliRunner().invoke(app, args + ["layers.3.attn.wo_b", "--json"])
    assert j.exit_code == 0, j.output
    d = json.loads(j.output)
    assert d["multiplicity"] == [{"factor": 2, "name": "groups"}, {"factor": 5, "name": "layers"}]
    assert d["total"] == 10 * 2048 and d["group"] == "2 groups of 6 layers › 5 reusing layers › Grouped output"

"""`archviz diff A B`: what changed between two models, run as real commands on fixtures we wrote, and the library
on hand-made records. Every expected figure is derived here from config formulas or from the fixture's text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import REPO, TESTS, TINY, hand_record

sys.path.insert(0, str(TESTS / "fixtures"))

from expected import dsv41like  # noqa: E402  (our figures for the dsv41like fixture, from its config)

DSV3 = REPO / "tests" / "fixtures" / "dsv3like"
DSV41 = REPO / "tests" / "fixtures" / "dsv41like"


def run_json(archviz_cli, *args) -> tuple[int, dict]:
    r = archviz_cli("diff", *args, "--json")
    assert r.returncode in (0, 1), (r.returncode, r.stderr)
    assert r.stderr.strip() == "", r.stderr
    return r.returncode, json.loads(r.stdout)


def one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    return lines[0]


def total(d: dict, name: str) -> dict:
    return next(t for t in d["totals"] if t["name"] == name)


# ---------------------------------------------------------------------------------------------------------------------
# V4-style against V4.1-style: the Engram tables and the MTP block are found, each with its parameters


def test_v4_against_v41_finds_engram_and_mtp(archviz_cli, tmp_path: Path) -> None:
    c41 = json.loads((DSV41 / "config.json").read_text())
    c4 = dict(c41, engram_layer_ids=[], engram_num_embeddings=[], n_mtp_layers=0)  # V4: no Engram, no MTP
    (tmp_path / "v4.json").write_text(json.dumps(c4))
    rc, d = run_json(archviz_cli, DSV41 / "model.py", DSV41 / "model.py", "--config-a", tmp_path / "v4.json",
                     "--config-b", DSV41 / "config.json")
    assert rc == 1 and d["verdict"] == "different"
    added = {x["path"]: x for x in d["added"]}
    assert set(added) == {"layers.1.engram", "layers.7.engram", "mtp.0"}
    assert d["removed"] == [] and d["renamed"] == []

    # Engram at layer j: wkv [dim * (hc + 1), n_cols * head_dim] and gate_weight [hc, dim] parameters, and its
    # NgramTable's [rows_j, head_dim] weight; n_cols = (max_ngram_size - 1) * n_heads
    D, hc, ehd = c41["dim"], c41["hc_mult"], c41["engram_head_dim"]
    n_cols = (c41["engram_max_ngram_size"] - 1) * c41["engram_n_heads"]
    for layer, rows in zip(c41["engram_layer_ids"], c41["engram_num_embeddings"]):
        want = D * (hc + 1) * n_cols * ehd + hc * D + rows * ehd
        assert added[f"layers.{layer}.engram"]["parameters"] == want
        assert added[f"layers.{layer}.engram"]["class_name"] == "Engram"
    # The MTP block: our tally of the fixture's config, less the backbone's embed and head it shares (counted there)
    figures4, figures41 = dsv41like(c4), dsv41like(c41)
    V = c41["vocab_size"]
    assert added["mtp.0"]["parameters"] == figures41["module"]["mtp.0"]["params"] - 2 * V * D
    assert added["mtp.0"]["class_name"] == "MTPBlock"

    params = total(d, "parameters")
    assert (params["a"], params["b"]) == (figures4["params"], figures41["params"])
    assert params["delta"] == sum(x["parameters"] for x in d["added"])
    # active: each Engram table counts the rows a token reads ((max_ngram_size - 1) × n_heads of head_dim values),
    # not the whole table, as the tally counts it
    read = n_cols
    unread = sum((rows - read) * ehd for rows in c41["engram_num_embeddings"])
    assert total(d, "active parameters")["delta"] == figures41["active_params"] - unread - figures4["active_params"]
    # the grouped entries add up to the same delta
    assert sum(g["parameters"] for g in d["groups"]) == params["delta"]


def test_v4_against_v41_finds_vision_engram_and_mtp(archviz_cli) -> None:
    """tests/fixtures/v41mini: our own small V4-style model, whose V4.1 config adds Engram, a vision tower and an MTP
    block (the dsv41like fixture does not model its config's vision tower)."""
    folder = REPO / "tests" / "fixtures" / "v41mini"
    c4 = json.loads((folder / "config_v4.json").read_text())
    c = json.loads((folder / "config_v41.json").read_text())
    assert {k: c[k] for k in c4} == c4  # V4.1 = V4 + the three parts
    rc, d = run_json(archviz_cli, folder / "model.py", folder / "model.py", "--config-a", folder / "config_v4.json",
                     "--config-b", folder / "config_v41.json")
    assert rc == 1
    D, I, r, V = c["dim"], c["inter_dim"], c["kv_lora_rank"], c["vocab_size"]
    vd, vi, p = c["vision_dim"], c["vision_inter_dim"], c["vision_patch_size"]
    # Engram: table [rows, engram_dim], proj [dim, engram_dim], gate [1, dim] + bias
    engram = c["engram_rows"] * c["engram_dim"] + c["engram_dim"] * D + D + 1
    # vision: patch_embed (3·p² -> vd, biased); per ViT block two LayerNorms (weight + bias), qkv (vd -> 3·vd),
    # proj (vd -> vd), fc1 (vd -> vi), fc2 (vi -> vd), all biased; a final LayerNorm; projector vd -> dim
    vit_block = 2 * 2 * vd + (3 * vd * vd + 3 * vd) + (vd * vd + vd) + (vd * vi + vi) + (vi * vd + vd)
    vision = (3 * p * p * vd + vd) + c["vision_n_layers"] * vit_block + 2 * vd + vd * D
    # MTP block: a block (two RMSNorms, wq, wkv_a, kv_norm, wkv_b, wo, w1/w2/w3) plus enorm, hnorm, e_proj, h_proj
    block = 2 * D + (D * D + D * r + r + r * 2 * D + D * D) + 3 * D * I
    mtp = block + 2 * D + 2 * D * D
    added = {x["path"]: x for x in d["added"]}
    want = {f"layers.{i}.engram": engram for i in c["engram_layer_ids"]}
    want.update({"vision": vision, **{f"mtp.{j}": mtp for j in range(c["n_mtp_layers"])}})
    assert {k: v["parameters"] for k, v in added.items()} == want
    assert added["vision"]["class_name"] == "VisionTower"
    assert added["vision"]["modules"] == 5 + c["vision_n_layers"] * 7  # tower, patch_embed, blocks, norm, projector
    assert d["removed"] == [] and d["renamed"] == []
    params = total(d, "parameters")
    assert params["delta"] == sum(want.values()) == sum(g["parameters"] for g in d["groups"])
    # the two Engram layers read as one entry, the parameters multiplied out
    g = next(g for g in d["groups"] if g["kind"] == "added" and g["class_name"] == "Engram")
    assert g["count"] == len(c["engram_layer_ids"]) and g["parameters"] == g["count"] * engram
    assert g["b"] == ["layers.{" + ",".join(map(str, c["engram_layer_ids"])) + "}.engram"]


# ---------------------------------------------------------------------------------------------------------------------
# hf:llama against hf:mistral


def _sets(cfg: dict) -> list[str]:
    out = []
    for k, v in cfg.items():
        out += ["--set", f"{k}={v}"]
    return out


def test_llama_against_mistral(archviz_cli) -> None:
    cfg = TINY["llama"]
    rc, d = run_json(archviz_cli, "hf:llama", "hf:mistral", *_sets(cfg))
    assert rc == 1
    # the same parameters, by the formula: embeddings and an untied head (V × H each), a final norm, and per
    # layer q/o (H × H), k/v (H × kv_heads × head_dim), gate/up/down (H × I) and two norms
    H, V, I, L = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    kv = cfg["num_key_value_heads"] * (H // cfg["num_attention_heads"])
    want = 2 * V * H + H + L * (2 * H * H + 2 * H * kv + 3 * H * I + 2 * H)
    params = total(d, "parameters")
    assert params["a"] == params["b"] == want and params["delta"] == 0
    assert d["added"] == [] and d["removed"] == [] and d["renamed"] == []
    assert d["matched"] == d["a"]["modules"] == d["b"]["modules"]
    # the classes differ, once per kind: both decoder layers read as one entry, × 2 layers
    layer = next(g for g in d["groups"] if g["a"] == ["model.layers.{0-1}"])
    assert layer["count"] == L and layer["multiplicity"] == f"× {L} layers"
    cls = next(c for c in layer["changes"] if c["aspect"] == "class")
    assert cls["a"].endswith("modeling_llama.LlamaDecoderLayer")
    assert cls["b"].endswith("modeling_mistral.MistralDecoderLayer")
    # nothing about the tensors, attributes or totals differs: ignoring what does, the diff exits 0
    rc, d = run_json(archviz_cli, "hf:llama", "hf:mistral", *_sets(cfg),
                     "--ignore", "class,lines,doc", "--ignore", "call-sites,shapes")
    assert rc == 0 and d["verdict"] == "identical" and d["groups"] == []
    assert {"class", "lines", "doc", "call-sites", "shapes"} == set(d["ignored"])


# ---------------------------------------------------------------------------------------------------------------------
# The same fixture before and after moving one function down a few lines


def _move_function_down(src: Path, dst: Path, name: str, before: str) -> int:
    """Copy the fixture to `dst`, moving the top-level `def name` to just above `class before`; returns how many
    lines it holds."""
    for f in src.iterdir():
        (dst / f.name).write_text(f.read_text())
    lines = (src / "model.py").read_text().split("\n")
    s = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {name}("))
    e = next(i for i in range(s + 1, len(lines)) if lines[i].startswith(("def ", "class ", "@")))
    block, rest = lines[s:e], lines[:s] + lines[e:]
    at = next(i for i, ln in enumerate(rest) if ln.startswith(f"class {before}("))
    (dst / "model.py").write_text("\n".join(rest[:at] + block + rest[at:]))
    return len(block)


def _line_of(path: Path, prefix: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().split("\n"), 1) if ln.startswith(prefix))


def test_moving_a_function_changes_only_lines(archviz_cli, tmp_path: Path) -> None:
    moved = _move_function_down(DSV3, tmp_path, "apply_rotary_emb", "MLP")
    assert moved > 3
    a, b = DSV3 / "model.py", tmp_path / "model.py"
    rc, d = run_json(archviz_cli, a, b, "--config", DSV3 / "config.json")
    assert rc == 1
    changes = [c for m in d["modules"] for c in m["changes"]]
    assert changes and {c["aspect"] for c in changes} == {"lines"}
    assert {c["what"] for c in changes} <= {"class lines", "__init__ lines", "forward lines", "call-site lines"}
    # MLA, defined after the moved function, starts `moved` lines earlier; its own call sites move with it
    mla_a, mla_b = _line_of(a, "class MLA("), _line_of(b, "class MLA(")
    assert mla_b == mla_a - moved
    attn = next(m for m in d["modules"] if m["a"] == "layers.0.attn")
    span = next(c for c in attn["changes"] if c["what"] == "class lines")
    assert span["a"].startswith(f"model.py:{mla_a}-") and span["b"].startswith(f"model.py:{mla_b}-")
    wo = next(m for m in d["modules"] if m["a"] == "layers.0.attn.wo")
    site = next(c for c in wo["changes"] if c["what"] == "call-site lines")
    line_a = int(site["a"].rsplit(":", 1)[1])
    assert a.read_text().split("\n")[line_a - 1].strip().endswith(")")
    assert site["b"] == f"model.py:{line_a - moved}"
    assert "self.wo(" in b.read_text().split("\n")[line_a - moved - 1]
    # ... and nothing else: --ignore lines exits 0
    r = archviz_cli("diff", a, b, "--config", DSV3 / "config.json", "--ignore", "lines")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "identical" in r.stdout


# ---------------------------------------------------------------------------------------------------------------------
# A renamed submodule is a rename, not one removal and one addition


def _rename_ffn(src: Path, dst: Path, new: str) -> None:
    for f in src.iterdir():
        (dst / f.name).write_text(f.read_text())
    text = (src / "model.py").read_text()
    assert text.count("self.ffn = ") == 1 and text.count("self.ffn(") == 1
    (dst / "model.py").write_text(text.replace("self.ffn = ", f"self.{new} = ").replace("self.ffn(", f"self.{new}("))


def test_renamed_submodule_is_found_as_a_rename(archviz_cli, tmp_path: Path) -> None:
    _rename_ffn(DSV3, tmp_path, "channel_mix")
    cfg = json.loads((DSV3 / "config.json").read_text())
    rc, d = run_json(archviz_cli, DSV3 / "model.py", tmp_path / "model.py", "--config", DSV3 / "config.json")
    assert rc == 1
    assert d["added"] == [] and d["removed"] == []
    want = [{"a": f"layers.{i}.ffn", "b": f"layers.{i}.channel_mix", "how": "structure"}
            for i in range(cfg["n_layers"])]
    assert d["renamed"] == want
    assert total(d, "parameters")["delta"] == 0 and d["matched"] == d["a"]["modules"]
    # the dense layers' MLP and the MoE layers' MoE read as one entry each
    kinds = sorted((g["class_name"], g["count"]) for g in d["groups"] if g["kind"] == "renamed")
    assert kinds == sorted([("MLP", cfg["n_dense_layers"]), ("MoE", cfg["n_layers"] - cfg["n_dense_layers"])])
    # the call site's code changed with the name, and nothing else did
    rc, _ = run_json(archviz_cli, DSV3 / "model.py", tmp_path / "model.py", "--config", DSV3 / "config.json",
                     "--ignore", "renames,call-sites,lines")
    assert rc == 0


def test_rename_rule_from_rules_file(archviz_cli, tmp_path: Path) -> None:
    _rename_ffn(DSV3, tmp_path, "channel_mix")
    rules = tmp_path / "rules.json"
    # checkpoint -> model direction, as `archviz check` reads it: here B's names onto A's
    rules.write_text(json.dumps({"format": "archviz-rules/1", "renames": [["\\.channel_mix(\\.|$)", ".ffn\\1"]]}))
    rc, d = run_json(archviz_cli, DSV3 / "model.py", tmp_path / "model.py", "--config", DSV3 / "config.json",
                     "--rules", rules)
    assert rc == 1
    assert {(x["how"], x.get("rule")) for x in d["renamed"]} == {("rule", "user:rules.json")}
    assert len(d["renamed"]) == json.loads((DSV3 / "config.json").read_text())["n_layers"]


# ---------------------------------------------------------------------------------------------------------------------
# The library, on hand-made records


def _layers(width: int, n: int = 3) -> list:
    specs = [("", "M", {}, []), ("layers", "ModuleList", {}, [])]
    for i in range(n):
        specs += [(f"layers.{i}", "Layer", {"width": width}, []),
                  (f"layers.{i}.proj", "Linear", {}, [("weight", (width, 8))])]
    specs.append(("head", "Linear", {}, [("weight", (4, 8))]))
    return specs


def test_library_folds_a_change_in_every_layer() -> None:
    from archviz.diff import diff
    from archviz.diff.export import to_json

    a, b = hand_record(_layers(16)), hand_record(_layers(24))
    d = diff(a, b)
    assert not d.identical
    proj = next(f for f in d.folded if f.a == ("layers.{0-2}.proj",))
    assert proj.count == 3 and proj.multiplicity == "× 3 layers"
    assert proj.parameters_each == (24 - 16) * 8 and proj.parameters == 3 * (24 - 16) * 8
    assert [c.what for c in proj.changes] == ["tensor weight"]
    layer = next(f for f in d.folded if f.a == ("layers.{0-2}",))
    assert [(c.what, c.before, c.after) for c in layer.changes] == [("attribute width", "16", "24")]
    assert next(t for t in d.totals if t.name == "parameters").delta == 3 * 8 * 8
    assert json.dumps(to_json(d)) == json.dumps(to_json(diff(a, b)))  # deterministic
    assert diff(a, a).identical


def test_library_added_and_removed_subtrees() -> None:
    from archviz.diff import diff

    a = hand_record(_layers(16, n=3))
    b = hand_record(_layers(16, n=2) + [("extra", "Extra", {}, [("w", (5, 7))]),
                                        ("extra.inner", "Linear", {}, [("weight", (2, 3))])])
    d = diff(a, b)
    assert [(s.path, s.parameters, s.modules) for s in d.removed] == [("layers.2", 16 * 8, 2)]
    assert [(s.path, s.parameters, s.modules) for s in d.added] == [("extra", 5 * 7 + 2 * 3, 2)]
    assert sum(f.parameters for f in d.folded) == next(t for t in d.totals if t.name == "parameters").delta


def test_diff_does_not_import_torch() -> None:
    code = """
import sys
sys.path.insert(0, "tests")
from helpers import hand_record
import archviz.render.diff
from archviz.diff import diff, export  # (archviz.diff itself is the public function archviz.diff(a, b))
from archviz.checkpoint.rules import load_rules
a = hand_record([("", "M", {}, [("w", (2, 3))]), ("x", "L", {}, [("weight", (4, 4))])])
b = hand_record([("", "M", {}, [("w", (2, 3))]), ("y", "L", {}, [("weight", (4, 4))])])
d = diff(a, b, rules=load_rules())
export.to_json(d)
from rich.console import Console
Console(file=open("/dev/null", "w")).print(archviz.render.diff.diff_view(d))
archviz.render.diff.github_lines(d)
import archviz.render.site.diff
from archviz.group.tree import group
assert "diff.html" in archviz.render.site.diff.render_diff_site(d, group(a), group(b))
assert d.renamed, d
assert "torch" not in sys.modules and "transformers" not in sys.modules, "the diff imported torch"
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


# ---------------------------------------------------------------------------------------------------------------------
# Records files, GitHub annotations, untrusted names, bad input


def _write_records(path: Path, specs: list) -> Path:
    from archviz.records import dumps

    path.write_text(dumps(hand_record(specs)) + "\n")
    return path


def test_records_files_and_github_format_sanitise_names(archviz_cli, tmp_path: Path) -> None:
    evil = "Evil\x1b[31m%\r\nX\x07"
    a = _write_records(tmp_path / "a.json", _layers(16))
    b = _write_records(tmp_path / "b.json", _layers(16)[:-1] + [("head", evil, {}, [("weight", (4, 8))])])
    assert archviz_cli("diff", a, a).returncode == 0
    r = archviz_cli("diff", a, b, "--format", "github")
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(ln.startswith(("::error ", "::notice ")) for ln in lines)
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\r" not in r.stdout
    err = next(ln for ln in lines if ln.startswith("::error"))
    # CR and LF shown escaped as every other control character (archviz.files.sanitize.github_data), never a line break
    assert "%25" in err and "\\r\\n" in err and "\\x1b" in err and "\\x07" in err
    r = archviz_cli("diff", a, b)
    assert r.returncode == 1 and "\x1b" not in r.stdout and "\\x1b[31m" in r.stdout


def test_bad_input_is_one_line_exit_2(archviz_cli, tmp_path: Path) -> None:
    a = _write_records(tmp_path / "a.json", _layers(16))
    line = one_line_error(archviz_cli("diff", a, a, "--ignore", "lines,colour"))
    assert "'colour'" in line and "call-sites" in line
    line = one_line_error(archviz_cli("diff", a, tmp_path / "missing.json"))
    assert "missing.json" in line
    line = one_line_error(archviz_cli("diff", a, a, "--config-a", DSV3 / "config.json"))
    assert "records file" in line and "--config" in line
    line = one_line_error(archviz_cli("diff", a, a, "--format", "xml"))
    assert "xml" in line
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "archviz.records/1", "modules": [')
    line = one_line_error(archviz_cli("diff", a, bad))
    assert "bad.json" in line and "archviz walk" in line
    # records that do not form the tree they say: a child that is not recorded, a module recorded twice
    data = json.loads(a.read_text())
    data["modules"][0]["children"].append("ghost\x1b[2J")
    bad.write_text(json.dumps(data))
    line = one_line_error(archviz_cli("diff", bad, a))
    assert "bad.json" in line and "'ghost\\x1b[2J'" in line and "\x1b" not in line
    data = json.loads(a.read_text())
    data["modules"].append(data["modules"][-1])
    bad.write_text(json.dumps(data))
    assert "recorded twice" in one_line_error(archviz_cli("diff", a, bad))


def test_help_lists_aspects(archviz_cli) -> None:
    r = archviz_cli("diff", "--help")
    assert r.returncode == 0
    for word in ("--ignore", "--format", "--rules", "--config-a", "call-sites", "multiplicity"):
        assert word in r.stdout


def test_transformers_own_renames_match_an_old_layout(archviz_cli, tmp_path: Path) -> None:
    """A Mixtral records file in the layout its checkpoints use (`block_sparse_moe` for `mlp`): matched by rule,
    through the CLI's rules; and transformers' own load-time renames (hf_live) alone match it too."""
    import dataclasses

    from archviz.diff.renames import live_renames
    from archviz.diff import diff
    from archviz.records import dumps, loads

    r = archviz_cli("walk", "hf:mixtral", *_sets(TINY["mixtral"]), "-o", tmp_path / "new.json")
    assert r.returncode == 0, r.stderr
    new = loads((tmp_path / "new.json").read_text())
    old_name = lambda p: p.replace(".mlp", ".block_sparse_moe")  # noqa: E731
    old = dataclasses.replace(new, modules=tuple(
        dataclasses.replace(m, path=old_name(m.path), children=tuple(old_name(c) for c in m.children))
        for m in new.modules))
    (tmp_path / "old.json").write_text(dumps(old) + "\n")
    layers = TINY["mixtral"]["num_hidden_layers"]
    want = [(f"model.layers.{i}.block_sparse_moe", f"model.layers.{i}.mlp") for i in range(layers)]
    rc, d = run_json(archviz_cli, tmp_path / "old.json", tmp_path / "new.json")
    assert rc == 1 and d["added"] == [] and d["removed"] == []
    assert [(x["a"], x["b"]) for x in d["renamed"]] == want and {x["how"] for x in d["renamed"]} == {"rule"}
    live = diff(old, new, renames=live_renames(old, new))
    assert [(p.a, p.b, p.how, p.rule) for p in live.renamed] == [
        (a, b, "rule", "transformers:from_pretrained") for a, b in want]
    assert {p.how for p in diff(old, new).renamed} == {"structure"}  # without rules: found by structure


def test_site_diff_page_links_both_models(archviz_cli, tmp_path: Path) -> None:
    import re

    folder = REPO / "tests" / "fixtures" / "v41mini"
    site = tmp_path / "site"
    r = archviz_cli("diff", folder / "model.py", folder / "model.py", "--config-a", folder / "config_v4.json",
                    "--config-b", folder / "config_v41.json", "--site", site)
    assert r.returncode == 1, r.stderr
    page = (site / "diff.html").read_text()
    hrefs = re.findall(r'href="([^"]+)"', page)
    local = [h for h in hrefs if not h.startswith(("http", "data:"))]
    assert local and all((site / h).is_file() for h in local), [h for h in local if not (site / h).is_file()]
    slugs = json.loads((site / ".archviz-site").read_text())["models"]
    assert len(slugs) == 2 and all(f'href="{s}/index.html"' in page for s in slugs)
    # the added parts are coloured in B's tree and link to B's pages; A's tree links to A's pages
    for path in ("vision", "mtp.0"):
        assert re.search(rf'class="diff-added"><a href="{slugs[1]}/n/{re.escape(path)}\.html"', page), path
    assert re.search(rf'class="diff-changed"><a href="{slugs[0]}/n/layers\.0-3\.html"', page)


def test_totals_carry_flops_and_kv_bytes_from_cost_records(tmp_path, archviz_cli):
    """With `archviz cost -o` records on both sides, the totals delta adds FLOPs and KV bytes; llama's KV bytes per
    token are 2 (K and V) × layers × KV heads × head_dim × 2 bytes (bfloat16: a transformers config that names no
    dtype is counted in it, issue 44), from the configs."""
    from archviz.records import loads as read
    from archviz.cost.report import cost_report

    sides = []
    for name, layers in (("a", 2), ("b", 3)):
        sets = [f"--set={k}={v}" for k, v in {**TINY["llama"], "num_hidden_layers": layers}.items()]
        out = tmp_path / f"{name}.json"
        r = archviz_cli("cost", "hf:llama", *sets, "--context", "4096", "-o", out)
        assert r.returncode == 0, r.stderr
        sides.append(out)
    r = archviz_cli("diff", *sides, "--json")
    assert r.returncode == 1, r.stderr
    totals = {t["name"]: t for t in json.loads(r.stdout)["totals"]}
    c = TINY["llama"]
    per_layer = 2 * c["num_key_value_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * 2
    kv = totals["KV-cache bytes per token"]
    assert (kv["a"], kv["b"], kv["delta"]) == (2 * per_layer, 3 * per_layer, per_layer)
    prefill = next(t for k, t in totals.items() if k.startswith("prefill FLOPs"))
    assert prefill["a"] == cost_report(read(sides[0].read_text())).prefill.flops < prefill["b"]

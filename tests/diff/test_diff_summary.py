"""`archviz diff` says the summary first: the config keys that changed, the layers of each stack, the headline totals;
list items added or removed alike fold into one entry; modules that only moved in the source are counted, not
listed. The same on the terminal and in --json. Expected values come from the fixtures' configs and code."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import REPO

TOP = REPO / "tests" / "fixtures" / "toplevel"


def test_more_layers_summary_first_and_folded(archviz_cli, tmp_path: Path) -> None:
    ca = json.loads((TOP / "config.json").read_text())
    cb = dict(ca, n_layers=ca["n_layers"] + 5, image_tokens=not ca["image_tokens"])
    (tmp_path / "b.json").write_text(json.dumps(cb))
    args = ("diff", TOP / "model.py", TOP / "model.py", "--config-a", TOP / "config.json", "--config-b",
            tmp_path / "b.json")
    r = archviz_cli(*args, "--json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    s = d["summary"]
    assert {c["key"]: (c["a"], c["b"]) for c in s["config"]} == {
        k: (json.dumps(ca[k]), json.dumps(cb[k])) for k in ("n_layers", "image_tokens")}
    assert {x["path"]: (x["a"], x["b"]) for x in s["stacks"]} == {"layers": (ca["n_layers"], cb["n_layers"])}
    assert s["totals"][0]["name"] == "parameters"
    # the five layers B adds past A's last: one entry, "× 5 layers", each layer once
    added = [g for g in d["groups"] if g["kind"] == "added"]
    assert len(added) == 1 and added[0]["multiplicity"] == "× 5 layers"
    from archviz.paths import expand_pattern

    assert sorted(int(p.split(".")[1]) for p in expand_pattern(added[0]["b"][0])) == \
        list(range(ca["n_layers"], cb["n_layers"]))
    assert added[0]["parameters"] == sum(x["parameters"] for x in d["added"])

    text = archviz_cli(*args).stdout
    assert text.index("summary") < text.index("all totals") < text.index("what changed")
    assert f"config: 2 keys differ: n_layers {ca['n_layers']} → {cb['n_layers']}, image_tokens " in text
    assert f"layers: layers {ca['n_layers']} → {cb['n_layers']}" in text
    assert f"added    layers.{{{ca['n_layers']}-{cb['n_layers'] - 1}}} × 5 layers  Block" in text


def test_code_moved_in_its_file_is_counted_not_listed(archviz_cli, tmp_path: Path) -> None:
    moved = tmp_path / "model.py"
    moved.write_text("\n\n\n" + (TOP / "model.py").read_text())  # every line 3 further down, nothing else
    r = archviz_cli("diff", TOP / "model.py", moved, "--config-a", TOP / "config.json", "--config-b",
                    TOP / "config.json", "--json")
    d = json.loads(r.stdout)
    assert d["groups"] and all(c["aspect"] == "lines" for g in d["groups"] for c in g["changes"])
    assert d["summary"]["lines_only"] == sum(g["count"] for g in d["groups"]) > 0
    assert d["summary"]["config"] == []
    text = archviz_cli("diff", TOP / "model.py", moved, "--config-a", TOP / "config.json", "--config-b",
                       TOP / "config.json").stdout
    assert "what changed" not in text
    assert f"{d['summary']['lines_only']:,} modules moved in the source only" in text

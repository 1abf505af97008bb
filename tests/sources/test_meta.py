"""A builder that reads small tensors it made without a device while constructing (torchvision's RegNet:
`torch.arange(depth).int().tolist()`) builds on meta: the values are computed on the CPU and the build notes it.
Counts and shapes equal a real CPU build and run of the same model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from helpers import TESTS

sys.path.insert(0, str(TESTS / "data" / "factories"))
import tvstyle  # noqa: E402
from realrun import real_calls  # noqa: E402
from archviz.records import loads, to_json_dict  # a records file of either version, as /1's dicts

FIXTURE = Path(tvstyle.__file__)


def _line(needle: str) -> int:
    return next(i for i, line in enumerate(FIXTURE.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize("depth", [5, 9])
def test_regnet_style_builder(archviz_cli, depth):
    real = tvstyle.regnet_tiny(depth=depth)
    r = archviz_cli("walk", "tvstyle:regnet_tiny", "--set", f"depth={depth}", "--shapes", "--input",
                    "x=2,3,32,32", "-o", "-")
    assert r.returncode == 0, r.stderr
    rec = to_json_dict(loads(r.stdout))
    assert rec["summary"]["parameters"] == sum(p.numel() for p in real.parameters())
    assert [m["path"] for m in rec["modules"]] == [p for p, _ in real.named_modules()]
    got = {m["path"]: [{"inputs": c["inputs"], "outputs": c["outputs"]} for c in m["calls"]]
           for m in rec["modules"] if m.get("calls")}
    assert got == real_calls(real, torch.zeros(2, 3, 32, 32))
    notes = rec["source"]["notes"]
    for needle in ("block_widths = (torch.round", "stage_ids = torch.arange(depth)"):
        assert (f"tolist() of a tensor made without a device at tvstyle.py:{_line(needle)} answered with its "
                "values computed on the CPU") in notes


def test_big_tensors_get_no_twin():
    """Only small tensors are computed for real: a large one read while constructing still fails, clearly."""
    import archviz
    from archviz.errors import SourceError
    from archviz.sources.meta import TWIN_NUMEL

    with pytest.raises(SourceError, match="meta"):
        archviz.build("tvstyle:regnet_tiny", overrides={"depth": TWIN_NUMEL + 1})


def test_a_none_passed_as_a_size_is_named_though_the_error_does_not_say_none(archviz_cli, tmp_path):
    """`torch.empty(None, dim)` raises "empty() takes 1 positional argument but 2 were given", not a NoneType
    error: the build's line still names the config field its __init__ read the None from."""
    (tmp_path / "model.py").write_text(
        "from dataclasses import dataclass\nfrom typing import Optional\n\nimport torch\nfrom torch import nn\n\n\n"
        "@dataclass\nclass ModelArgs:\n    dim: int = 8\n    n_experts: Optional[int] = 4\n\n\n"
        "class Experts(nn.Module):\n    def __init__(self, args: ModelArgs):\n        super().__init__()\n"
        "        self.n_experts = args.n_experts\n"
        "        self.w = nn.Parameter(torch.empty(self.n_experts, args.dim))\n\n"
        "    def forward(self, x):\n        return x @ self.w.t()\n")
    (tmp_path / "config.json").write_text('{"dim": 8, "n_experts": null}')
    r = archviz_cli("summary", str(tmp_path / "model.py"), "--config", str(tmp_path / "config.json"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "empty() takes 1 positional argument" in r.stderr, r.stderr
    assert ("self.n_experts is None: Experts.__init__ takes it from args.n_experts, which this config leaves unset; "
            "give it with --set n_experts=VALUE") in " ".join(r.stderr.split()), r.stderr

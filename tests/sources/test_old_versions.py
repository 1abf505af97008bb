"""Code written for an older version of a package that is installed (tests/fixtures/firstcmds/oldtorch.py: `from
torch._six import container_abcs`, gone from torch 2): the missing submodule is stubbed, never the installed package
(which stood in for torch itself, its torch.hub included, and failed the build), and an isinstance test against a
stubbed name answers False as for any object. The count worked out from the fixture's defaults."""

from __future__ import annotations

import sys

from helpers import FIXTURES

import archviz

OLD = FIXTURES / "firstcmds" / "oldtorch.py"


def test_a_module_the_installed_version_lacks_is_stubbed_not_the_package():
    import torch

    built = archviz.build(str(OLD))
    dim, patch, img, classes = 16, 8, 32, 10  # PatchNet's defaults
    assert sum(p.numel() for p in built.model.parameters()) == \
        3 * dim * patch * patch + dim + (img // patch) ** 2 * dim + dim * classes + classes
    assert "torch._six" in built.stubbed_imports and "torch" not in built.stubbed_imports
    assert sys.modules["torch.hub"] is torch.hub and callable(torch.hub.load_state_dict_from_url)


def test_a_weightless_base_gives_way_to_the_model_derived_from_it():
    """`class DetectionModel(BaseModel)`: the subclass-gives-way rule keeps a base only where the base makes weights;
    the alias `Model = DetectionModel` is the same candidate, not a second one."""
    record = archviz.load(str(FIXTURES / "firstcmds" / "basemodel.py"))
    ch, width, nc = 3, 8, 4  # DetectionModel's defaults
    assert record.summary.parameters == ch * width * 9 + width + width * (nc + 5) + nc + 5
    assert record.source.model_class.endswith(".DetectionModel")

"""`archviz inspect SOURCE <path>`: a path that is not in the model gets a hint that names what was most likely meant."""

from __future__ import annotations

import pytest

from archviz.errors import ArchvizError
from archviz.group import resolve_target
from helpers import hand_record

REC = hand_record([
    ("", "Top", {}, []),
    ("model", "Body", {}, []),
    ("model.embed_tokens", "Embedding", {}, [("weight", (16, 4))]),
    ("model.layers", "ModuleList", {}, []),
    ("model.layers.0", "Block", {}, []),
    ("model.layers.0.attn", "Attn", {}, [("weight", (4, 4))]),
    ("model.layers.0.mlp", "MLP", {}, [("weight", (4, 4))]),
    ("model.layers.1", "Block", {}, []),
    ("model.layers.1.attn", "Attn", {}, [("weight", (4, 4))]),
    ("model.layers.1.mlp", "MLP", {}, [("weight", (4, 4))]),
    ("lm_head", "Linear", {}, [("weight", (16, 4))]),
])


def hint(path: str) -> str:
    with pytest.raises(ArchvizError) as e:
        resolve_target(REC, [path])
    assert e.value.message == f"no module {path!r} in this model"
    return e.value.hint


def test_a_path_that_exists_resolves():
    assert resolve_target(REC, ["model.layers.1.mlp"]) == "model.layers.1.mlp"
    assert resolve_target(REC, ["layer", "1"]) == "model.layers.1"


def test_a_prefix_left_out_is_named():
    assert hint("layers.1.mlp") == "did you mean model.layers.1.mlp?"


def test_a_misspelt_child_is_named_from_its_parent():
    assert hint("model.layers.0.mlpp") == "did you mean model.layers.0.mlp?"
    assert hint("model.embed") == "did you mean model.embed_tokens?"


def test_an_unknown_child_lists_the_parents_children():
    assert hint("model.layers.0.router") == "model.layers.0 has: attn, mlp"
    assert hint("lm_head.weight") == "lm_head has no sub-modules"


ONE_LAYER = hand_record([
    ("", "Top", {}, []),
    ("model", "Body", {}, []),
    ("model.layers", "ModuleList", {}, []),
    ("model.layers.0", "Block", {}, []),
    ("model.layers.0.attn", "Attn", {}, [("weight", (4, 4))]),
    ("mtp", "ModuleList", {}, []),
    ("mtp.0", "Block", {}, []),
    ("mtp.0.attn", "Attn", {}, [("weight", (8, 8))]),  # more parameters, but not the model's layer list by name
    ("head", "Linear", {}, [("weight", (16, 4))]),
])


def test_a_model_cut_to_one_layer_still_has_layer_0():
    """`--set num_hidden_layers=1` leaves a list of one block: `layer 0` is it, and `layer 1` names what there is."""
    assert resolve_target(ONE_LAYER, ["layer", "0"]) == "model.layers.0"
    with pytest.raises(ArchvizError) as e:
        resolve_target(ONE_LAYER, ["layer", "1"])
    assert e.value.message == "layer 1: model.layers has 1 layer (0)" and e.value.hint == "give layer 0"
    assert resolve_target(REC, ["layer", "1"]) == "model.layers.1"
    with pytest.raises(ArchvizError) as e:
        resolve_target(REC, ["layer", "2"])
    assert e.value.message == "layer 2: model.layers has 2 layers (0–1)"

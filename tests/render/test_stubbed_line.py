"""The summary's line of stubbed imports names each package once with how many names were taken from it: a model
that touches two dozen attributes of torchvision took a screen of `torchvision.transforms.functional....` lines."""

from __future__ import annotations

from archviz.render.terminal import stubbed_text


def test_few_names_are_listed_and_many_are_counted_per_package() -> None:
    assert stubbed_text(["tilelang", "kernel"]) == "tilelang, kernel"
    names = ["PIL", "PIL.Image"] + [f"torchvision.ops.op{i}" for i in range(9)] + ["einops"]
    assert stubbed_text(names) == "PIL (1 name), torchvision (9 names), einops"

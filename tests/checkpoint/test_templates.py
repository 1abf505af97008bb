"""`split_name`: a name with its all-ASCII-digit dotted components taken out."""

from __future__ import annotations

import random

from archviz.checkpoint.templates import HOLE, split_name


def by_definition(name: str) -> tuple[str, tuple[str, ...]]:
    parts = name.split(".")
    nums = tuple(p for p in parts if p.isdigit() and p.isascii())
    if not nums:
        return name, ()
    return ".".join(HOLE if p.isdigit() and p.isascii() else p for p in parts), nums


NAMES = ["", ".", "..", "0", "1.", ".2", "a..3", "a.3.", "03.b", "a.\u0663.b", "a.b", "x.12.y.7", "7", "é.5",
         "model.layers.61.mlp.experts.255.down_proj.weight_scale_inv", "layers.3.ffn.experts.17.w1.weight",
         "layers.3.ffn.experts.17.w1.scale", "h.0.attn.c_attn.bias", "a.b1.2c.3",
         ".".join(str(i) for i in range(100)), "x." * 80 + "3", "y." * 70 + "4.z", "w" * 300 + ".5.v",
         "a.1.b.2.c.3.d.4.e.5.f"]  # deeper and longer than the walk up goes


def test_split_name() -> None:
    rng = random.Random(22)
    names = NAMES + [".".join(rng.choice(["a", "7", "", "07", "x1", "\u0661", "b", "255"])
                              for _ in range(rng.randrange(1, 7))) for _ in range(5000)]
    for n in names:
        assert split_name(n) == by_definition(n), n

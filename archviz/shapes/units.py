"""What one pass of a model is, for `cost`'s unit: an image, an audio window, a video, a denoising step (a latent
or image beside a timestep, whatever conditioning sequence goes with it), a sample; None where the pass is over
token positions (its cost is per token), unless the model takes one length only (a fixed context: no token is
decoded). With the pass's input shapes as they ran."""

from __future__ import annotations

import math
from typing import Any

from ..sources import Built
from .inputs import conditioning, consumer_default


def pass_unit(built: Built, record: Any, input_specs: list[str] | None, batch: int, seq: int | None = None
              ) -> dict[str, str] | None:
    """What one pass of a model that takes no positions costs per: {"name": "image" | "latent" | "denoising step" |
    "audio window" | "video" | "sample", "inputs": the pass's input shapes as they ran, B at `batch` ("[1, 4, 32,
    32], [1], [1]")};
    None where the pass is over token positions (its inputs sized by T): its cost is per token. A denoising step
    over a sequence of latent patches (features [B, T, C] beside a timestep) is per denoising step, T at `seq`."""
    shapes = record.extra("shapes") or {}
    base = consumer_default(built)
    first = None if input_specs else base
    timed = base is not None and any("timestep" in n for n in conditioning(built.model, 1, config=built.config)[1])
    if "T" in shapes.get("used", ()) and not shapes.get("fixed_T") \
            and not (timed and (base.dims[0] == "T" or "T" not in base.dims)):
        return None  # (a latent with a timestep is a denoising step, whatever conditioning sequence goes beside)
    seq = shapes.get("T", seq) if shapes.get("fixed_T") else seq  # the one length the model takes
    root = record.modules[0] if record.modules else None
    call = root.calls[0] if root is not None and root.calls else None
    inputs = ", ".join("[" + ", ".join(_dim_at(d, batch, seq) for d in s) + "]" for s in call.inputs) \
        if call else "its inputs"
    name = "sample"
    if timed:
        name = "denoising step"
    elif first is not None and len(first.dims) == 3:
        name = "image" if first.dims[0] in (1, 3) else "latent"
    elif first is not None and len(first.dims) == 4:
        name = "video"
    elif first is not None and len(first.dims) == 2 and isinstance(first.dims[1], int):
        name = "audio window"
    return {"name": name, "inputs": inputs}


def _dim_at(dim: Any, batch: int, seq: int | None) -> str:
    """A recorded dim as the pass ran it: B at `batch`, T at `seq`, a product of them (`B·T`, which a pass at B = 1
    names so) multiplied out, a named size (`hidden_size=3072`) as its value."""
    text = str(dim).rpartition("=")[2]
    values = {"B": batch, "T": seq}
    factors = text.split("·")
    if all(f.isdigit() or values.get(f) for f in factors):
        return str(math.prod(int(f) if f.isdigit() else values[f] for f in factors))
    return text


__all__ = ["pass_unit"]

"""What one pass of a model is, for `cost`'s unit: an image, an audio window, a video, a denoising step (a latent
or image beside a timestep, whatever sequences go with it), a sample; None where the pass is over token positions
(its cost is per token), unless the model takes one length only (a fixed context: no token is decoded). With the
pass's inputs as they ran: B, T and the further sequences' lengths (T_txt) at their sizes."""

from __future__ import annotations

import inspect
import math
from typing import Any

from ..input_specs import check_input_specs
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
    first = _default_first(built, input_specs)
    timed = first is not None and \
        any("timestep" in n for n in conditioning(built.model, 1, config=built.config)[1])
    # [C, T] a convolution takes (a waveform, a spectrogram of T samples or frames), not a Linear's features [T, C]
    # nor a fixed window beside token ids (a speech model's decoder: its cost is per token)
    window = first is not None and len(first.dims) == 2 and isinstance(first.dims[0], int) and first.dims[1] == "T"
    if "T" in shapes.get("used", ()) and not timed and not window and not shapes.get("fixed_T"):
        return None  # (a denoising step, a window of samples or frames, a model of one length: never per token)
    seq = shapes.get("T", seq) if shapes.get("fixed_T") else seq  # the one length the model takes
    root = record.modules[0] if record.modules else None
    call = root.calls[0] if root is not None and root.calls else None
    values = {**shapes.get("named", {}), "B": batch, "T": seq}  # a further sequence's dim (T_txt) at its size
    inputs = ", ".join("[" + ", ".join(_dim_at(d, values) for d in s) + "]" for s in call.inputs) \
        if call else "its inputs"
    name = "sample"
    if timed:
        name = "denoising step"
    elif first is not None and len(first.dims) == 3:
        name = "image" if first.dims[0] in (1, 3) else "latent"
    elif first is not None and len(first.dims) == 4:
        name = "video"
    elif window or first is not None and len(first.dims) == 2 and isinstance(first.dims[1], int):
        name = "audio window"
    return {"name": name, "inputs": inputs}


def _default_first(built: Built, input_specs: list[str] | None) -> Any:
    """The default first input (`consumer_default`) where the input specs leave it its kind: they do not give the
    forward's first argument, or give it at as many dims (the same latent at another size); else None (token ids
    for a `*args` forward, another kind of input)."""
    first = consumer_default(built)
    if not input_specs or first is None:
        return first
    try:
        param = next(iter(inspect.signature(built.model.forward).parameters.values()), None)
    except (TypeError, ValueError):
        return None
    if param is None or param.kind is param.VAR_POSITIONAL:
        return None
    given = {name: payload for name, kind, payload in check_input_specs(input_specs) if kind == "tensor"}
    return first if param.name not in given or len(given[param.name][0]) == 1 + len(first.dims) else None


def _dim_at(dim: Any, values: dict[str, int | None]) -> str:
    """A recorded dim as the pass ran it: B, T and the named dims at their `values`, a product of them (`B·T`, which
    a pass at B = 1 names so) multiplied out, a named size (`hidden_size=3072`) as its value."""
    text = str(dim).rpartition("=")[2]
    factors = text.split("·")
    if all(f.isdigit() or values.get(f) for f in factors):
        return str(math.prod(int(f) if f.isdigit() else values[f] for f in factors))
    return text


__all__ = ["pass_unit"]

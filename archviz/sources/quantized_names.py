"""torch.ao.quantization's converted modules told by their classes' modules, without importing torch: the walk reads
it for every module (archviz.walk.converted), a records-cache hit imports the walk's modules and must not import
torch, and the meta build's answer to a conversion (sources.quantized_conversion) makes modules of these classes."""

from __future__ import annotations

from typing import Any

CONVERTED_NAMESPACES = ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized")


def is_converted(module: Any) -> bool:
    """Whether `module` is one of torch.ao.quantization's converted modules (or derives from one)."""
    return any(c.__module__.startswith(CONVERTED_NAMESPACES) for c in type(module).__mro__)


__all__ = ["CONVERTED_NAMESPACES", "is_converted"]

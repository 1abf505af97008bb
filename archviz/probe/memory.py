"""The probe's memory guard: sizes as written (`8GiB` for max_memory), the machine's default, and the reduced copy's
estimated bytes."""

from __future__ import annotations

import torch

from ..errors import EXIT_USAGE, option
from ..records import ModelRecord
from .errors import ProbeError

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}


def parse_size(text: str) -> int:
    """'8GB', '512MiB', '1.5g', '1000000' -> bytes (binary units: 1 GB = 1024³ bytes)."""
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ProbeError(f"{option('max-memory')} {text!r}: not a size", hint="write e.g. 8GB, 512MB or a number of "
                                                                              "bytes",
                         exit_code=EXIT_USAGE)
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def default_max_memory(device: str = "cpu") -> int:
    """Half the memory of the device the copy runs on: the machine's (MemTotal in /proc/meminfo, else 8 GB), or the
    GPU's."""
    if device.startswith("cuda") and torch.cuda.is_available():
        index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        return int(torch.cuda.get_device_properties(index).total_memory) // 2
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 8 * 1024**3


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


_QUANTIZED = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn_x2", "int8",
              "uint8")


def estimate_bytes(record: ModelRecord) -> tuple[int, int]:
    """(bytes of the copy's tensors, parameters and buffers; working space). The working space is what the largest
    tensor costs beyond itself: a quantized weight is dequantized to float32 copies in the torch GEMMs (16 bytes per
    value), any other tensor is copied a few times at most (its random init, a cast)."""
    tensors = record.modules[0].totals.bytes if record.modules else 0
    work = 0
    for m in record.modules:
        for t in m.tensors:
            work = max(work, 16 * t.elements if t.dtype in _QUANTIZED else 3 * t.bytes)
    return tensors, work + 64 * 1024**2

"""The execution probe (optional): a reduced copy of the model run for real, its shapes compared with the meta pass.

- `reduce`: the reduced copy's plan (fewer layers and experts, every kind kept) and its structural check;
- `run`: the probe from end to end (`run_probe`, its `ProbeOptions`), its result and report;
- `real`: running the copy for real; `agreement`: meta against real; `memory`: the memory guard.
"""

from __future__ import annotations

from .errors import ProbeError
from .memory import human_bytes, parse_size
from .run import ProbeOptions, ProbeResult, run_probe

__all__ = ["run_probe", "ProbeOptions", "ProbeResult", "ProbeError", "parse_size", "human_bytes"]

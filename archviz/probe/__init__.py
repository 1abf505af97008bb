"""The execution probe (optional): a reduced copy of the model run for real, its shapes compared with the meta pass.

- `reduce`: the reduced copy's plan (fewer layers and experts, the same kinds);
- `run`: building it, running it with real kernels, and the comparison.
"""

from __future__ import annotations

from .run import ProbeError, ProbeResult, human_bytes, parse_size, run_probe

__all__ = ["run_probe", "ProbeResult", "ProbeError", "parse_size", "human_bytes"]

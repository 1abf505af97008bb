"""The probe's error: it cannot run (memory guard, no such device), or the real forward pass failed."""

from __future__ import annotations

from ..errors import ArchvizError


class ProbeError(ArchvizError):
    """The probe cannot run (memory guard, no such device) or the real forward pass failed."""

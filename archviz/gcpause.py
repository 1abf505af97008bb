"""One way to pause Python's cyclic garbage collector around archviz's bulk work.

Building, walking, tracing, comparing and rendering a large model each allocate hundreds of thousands of small
acyclic objects (records, tuples, dicts, strings) on top of a heap that already holds the model. The collector would
rescan that heap again and again and free nothing; each stage pauses it and restores the caller's setting after.
Reference counting still frees everything that goes out of use.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector inside the block (or the decorated function); restore its previous state after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()

"""One way to pause Python's cyclic garbage collector around archviz's bulk work.

Building, walking, tracing, comparing and rendering a large model each allocate hundreds of thousands of small
acyclic objects (records, tuples, dicts, strings) on top of a heap that already holds the model. The collector would
rescan that heap again and again and free nothing; each stage pauses it and restores the caller's setting after.
Reference counting still frees everything that goes out of use. What the block made and kept is put in the oldest
generation as the pause ends (`gc.freeze()` then `gc.unfreeze()`, which move lists, not objects): left young, the
first collection after the pause would walk all of it once (a fifth of a second after the walk of a 60,000-module
model) and free nothing. Cycles among it are still freed, by the next full collection.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector inside the block (or the decorated function); restore its previous state after,
    with what survived the block in the oldest generation (not where the caller froze objects of its own)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():  # (a caller's own frozen objects are left as they are)
                gc.freeze()  # what the block made, and survived it, joins the oldest generation as it is: the
                gc.unfreeze()  # next young collection would only walk all of it once more, and free nothing
            gc.enable()
